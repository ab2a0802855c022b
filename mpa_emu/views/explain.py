"""``mpa-emu explain`` as text, JSON and HTML, from :mod:`mpa_emu.views.explanation`'s
explanations: a failed connection in a few lines, ``verbose`` adds the story."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

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
    ``fpdus`` the frame panel's FPDU rows (read again from the capture when not given)."""
    shown = name or path
    from mpa_emu.views.diagram import from_capture
    from mpa_emu.views.html.fields import capture_fields
    from mpa_emu.views.html.page import Page, Section, cell, frame_link

    ladder = from_capture(path)
    rank: dict[int, str] = {}
    for e in explanations:
        if e.verdict != "ok":
            for n in e.evidence:
                rank[n] = "hl" if e.verdict == "failed" else rank.get(n, "rel")
    marks = {i: rank[row.frame] for i, row in enumerate(ladder.rows)
             if row.frame is not None and row.frame in rank}

    def body(e: Explanation) -> str:
        links = " ".join(frame_link(n) for n in e.evidence)
        return (f'<p class="mono">evidence: {links}</p>' if links else "") + \
            f'<pre class="mono wrap">{cell(explanation_text(e, verbose))}</pre>'

    judged = [e for e in explanations if e.verdict != "ok"]
    top = "".join(f'<section class="explained {e.verdict}" id="connection-{e.index}">'
                  f"<h2>Connection {e.index}: {cell(e.verdict)}</h2>{body(e)}</section>"
                  for e in judged)
    sections = [Section(f"Connection {e.index}: {e.verdict}", body(e),
                        anchor=f"connection-{e.index}")
                for e in explanations if e.verdict == "ok"]
    if problems:
        sections.append(Section("Frames outside any connection",
                                "".join(f"<p>{cell(p)}</p>" for p in problems)))
    failed = any(e.verdict == "failed" for e in explanations)
    return Page(title=f"mpa-emu explain {shown}", verdict=counts_line(shown, explanations),
                failed=failed, ladder=ladder, frames=capture_fields(path, fpdus=fpdus),
                marks=marks, top=top, sections=sections).html()
