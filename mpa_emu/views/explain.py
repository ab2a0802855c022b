"""``mpa-emu explain`` as text, JSON and HTML, from :mod:`mpa_emu.views.explanation`'s
explanations: a failed connection in a few lines, ``verbose`` adds the story."""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, TextIO

from mpa_emu.capture.spool import Spool
from mpa_emu.judge.model import errno_name
from mpa_emu.judge.stacks import LINUX_USERSPACE
from mpa_emu.views.explanation import Explanation

if TYPE_CHECKING:
    from mpa_emu.views.html.fpdu_fields import FpduRows


USERSPACE_EVENTS = "no rdma_cm (linux-userspace: its library's own events, not known)"
"""What a side judged linux-userspace saw: nothing rdma_cm would tell (see the note)."""


def _events(events: Sequence[str], none: str) -> str:
    return ", ".join(events) if events else none


def explanation_text(e: Explanation, verbose: bool = False) -> str:
    """One connection's block (no final newline)."""
    verdict = e.verdict.upper() if e.verdict == "failed" else e.verdict
    head = f"Connection {e.index}: {e.flow}: {verdict}"
    head += f", {e.cause}: {e.summary}" if e.cause != "ok" else " (established)"
    lines = [head]
    stacks = ", ".join(f"{side} {stack}" for side, stack in e.stacks.items())
    if stacks:
        lines.append(f"  {'stacks':<11} {stacks}")
    if e.evidence:
        lines.append(f"  {'evidence':<11} frame{'s' if len(e.evidence) > 1 else ''} "
                     + ", ".join(map(str, e.evidence)))
    if e.initiator_event:
        lines.append(f"  {'initiator':<11} {e.initiator_event} (status {e.initiator_status}"
                     + (f" {errno_name(e.initiator_status)}" if e.initiator_status else "")
                     + ")" + (f", then {', '.join(e.initiator_events[1:])}"
                              if len(e.initiator_events) > 1 else ""))
    elif e.stacks.get("client") == LINUX_USERSPACE and e.cause != "not-iwarp":
        lines.append(f"  {'initiator':<11} {USERSPACE_EVENTS}")
    elif e.cause not in ("ok", "not-iwarp"):
        lines.append(f"  {'initiator':<11} no rdma_cm event")
    if e.stacks.get("server") == LINUX_USERSPACE and e.cause != "not-iwarp":
        lines.append(f"  {'responder':<11} {USERSPACE_EVENTS}")
    elif e.cause != "not-iwarp":
        lines.append(f"  {'responder':<11} "
                     + _events(e.responder_events, "no rdma_cm event (its application "
                                                   "never hears of it)"))
    if e.private_data:
        lines.append(f"  {'pdata':<11} {e.private_data}")
    if e.verdict != "ok":
        if e.log:
            lines.append(f"  {'look for':<11} {e.log}")
        lines.append(f"  {'fix':<11} {e.fix}")
    lines.extend(f"  {'note':<11} {n}" for n in e.notes)
    if verbose:
        lines.append(f"  {'functions':<11} {e.functions}")
        lines.extend(f"  {'story' if i == 0 else '':<11} {s}" for i, s in enumerate(e.story))
    return "\n".join(lines)


def counts_line(path: str, explanations: Iterable[Explanation] = (), *,
                counts: dict[str, int] | None = None) -> str:
    """``CAPTURE: 3 connections: 2 ok, 0 warning, 1 failed``."""
    if counts is None:
        counts = {"ok": 0, "warning": 0, "failed": 0}
        for e in explanations:
            counts[e.verdict] += 1
    total = sum(counts.values())
    return (f"{path}: {total} connection{'s' if total != 1 else ''}: "
            f"{counts['ok']} ok, {counts['warning']} warning, {counts['failed']} failed")


def explanation_json(e: Explanation) -> str:
    """One entry of the ``connections`` list, indented for it."""
    text = json.dumps(e.to_dict(), indent=2, sort_keys=True)
    return "\n".join("    " + line for line in text.splitlines())


def json_head(path: str, counts: dict[str, int], problems: Sequence[str]) -> str:
    """The JSON document up to its ``connections`` list."""
    head = json.dumps({"capture": path, "counts": counts, "problems": list(problems)},
                      indent=2, sort_keys=True)
    return head[:-2] + ',\n  "connections": ['


def explain_page(path: str, explanations: Sequence[Explanation], problems: Sequence[str],
                 verbose: bool = False, name: str | None = None,
                 fpdus: FpduRows | None = None) -> str:
    """The HTML page: the verdict of every connection that failed or warned above the
    capture's ladder (lines wrapped), its evidence frames marked, the connections that
    are ok below it; ``name`` is the capture's name as shown (``path`` by default);
    ``fpdus`` the frame panel's FPDU rows (inspect's, by the frame each starts in)."""
    out = io.StringIO()
    with ExplainPage(verbose) as page:
        for e in explanations:
            page.add(e)
        page.write(out, path, problems, name, fpdus)
    return out.getvalue()


OWN_SECTIONS = 100
"""Connections that get a section and a menu entry of their own on the explain page;
the rest share one section (each under its own heading), so that the page's memory does
not grow with the capture (the menu is made whole before the page is written)."""


class ExplainPage:
    """The explain page gathered a connection at a time and written as it is made: each
    connection's section waits in a temporary file, what stays in memory is the titles
    of the first :data:`OWN_SECTIONS` and the evidence frames of connections that are
    not ok; the ladder and the frames'
    fields are read from the capture while written (:mod:`mpa_emu.views.html.streamed`),
    so the page costs the same memory whatever the capture's length."""

    def __init__(self, verbose: bool = False) -> None:
        self.verbose = verbose
        self.counts = {"ok": 0, "warning": 0, "failed": 0}
        self._spool = Spool()
        self._titles: dict[int, str] = {}
        self._rank: dict[int, str] = {}
        self._last = 0
        self._top: list[str] = []

    def add(self, e: Explanation) -> None:
        """One connection's explanation."""
        from mpa_emu.views.html.page import cell, frame_link

        self.counts[e.verdict] += 1
        if e.verdict != "ok":
            for n in e.evidence:
                self._rank[n] = "hl" if e.verdict == "failed" else self._rank.get(n, "rel")
        text = explanation_text(e, self.verbose)
        links = " ".join(frame_link(n) for n in e.evidence)
        body = (f'<p class="mono">evidence: {links}</p>' if links else "") + \
            f'<pre class="mono wrap">{cell(text)}</pre>'
        title = f"Connection {e.index}: {e.verdict}"
        self._last = max(self._last, e.index)
        if e.verdict != "ok" and len(self._top) < OWN_SECTIONS:
            # A failed or warned connection stands above the ladder, on the first screen.
            self._top.append(f'<section class="explained {e.verdict}" '
                             f'id="connection-{e.index}"><h2>{cell(title)}</h2>{body}'
                             "</section>")
            return
        if e.index <= OWN_SECTIONS:
            self._titles[e.index] = title
        else:
            # Past the first connections, one section holds the rest, each under its own
            # heading (the same anchor, so frame links and bookmarks still find it).
            body = f'<h3 id="connection-{e.index}">{cell(title)}</h3>' + body
        self._last = max(self._last, e.index)
        self._spool.add(e.index, body)

    def write(self, out: TextIO, path: str, problems: Sequence[str],
              name: str | None = None, fpdus: FpduRows | None = None) -> None:
        """Write the page of ``path`` (``name``: as shown) into ``out``; ``fpdus``
        inspect's FPDU rows for the frame panel."""
        from mpa_emu.views.html.page import Page, Section, cell
        from mpa_emu.views.html.streamed import ParkedRows, streamed_fields

        shown = name or path
        pieces = self._spool.pieces()  # sorted by connection, as the titles below

        def body(piece_out: TextIO) -> None:
            piece_out.write(next(pieces))

        def rest(piece_out: TextIO) -> None:
            for piece in pieces:
                piece_out.write(piece)

        sections = [Section(title, body, anchor=f"connection-{index}")
                    for index, title in sorted(self._titles.items())]
        if self._last > OWN_SECTIONS:
            sections.append(Section(
                f"Connections {OWN_SECTIONS + 1} to {self._last} (one section: the menu "
                f"names the first {OWN_SECTIONS} connections)", rest,
                anchor=f"connections-past-{OWN_SECTIONS}"))
        if problems:
            sections.append(Section("Frames outside any connection",
                                    "".join(f"<p>{cell(p)}</p>" for p in problems)))
        rank = self._rank
        with ParkedRows(path) as ladder:
            Page(title=f"mpa-emu explain {shown}",
                 verdict=counts_line(shown, counts=self.counts),
                 failed=bool(self.counts["failed"]), ladder=ladder,
                 frames=streamed_fields(path, fpdus=fpdus), top="".join(self._top),
                 marks=lambda _i, row: rank.get(row.frame) if row.frame is not None else None,
                 sections=sections).write(out)

    def close(self) -> None:
        """Delete the temporary file."""
        self._spool.close()

    def __enter__(self) -> ExplainPage:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
