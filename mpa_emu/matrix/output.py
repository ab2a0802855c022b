"""A matrix as a user reads it: a terminal table per scenario, the JSON contract, and an
HTML page where every cell opens its ladder."""

from __future__ import annotations

import errno
import io
import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from html import escape
from typing import IO, Any

from mpa_emu.matrix.cell import CellResult

SHORT = {
    "RDMA_CM_EVENT_ESTABLISHED": "est",
    "RDMA_CM_EVENT_REJECTED": "rej",
    "RDMA_CM_EVENT_CONNECT_ERROR": "err",
    "RDMA_CM_EVENT_UNREACHABLE": "unr",
    "RDMA_CM_EVENT_DISCONNECTED": "disc",
    "RDMA_CM_EVENT_CONNECT_REQUEST": "req",
    "RDMA_CM_EVENT_CONNECT_RESPONSE": "resp",
}
LEGEND = ("est = RDMA_CM_EVENT_ESTABLISHED, rej = REJECTED, err = CONNECT_ERROR, "
          "unr = UNREACHABLE, disc = DISCONNECTED, refused = rdma_connect() returned the "
          "error, - = no event; then the status "
          "(errno name); +T = a Terminate on the wire; n/a = not expressible for these "
          "stacks; !bound = stopped at the event bound (the hosts never went quiet); "
          "!time = virtual time ran out before every connection had its outcome")

STOPPED = {"event-bound": "!bound", "time-out": "!time"}
"""The statuses of a cell a safety bound stopped, and their mark in the table."""


def status_text(status: int | None) -> str:
    """``-ECONNREFUSED`` for -111, ``0`` for 0, empty for None."""
    if status is None:
        return ""
    if status == 0:
        return "0"
    name = errno.errorcode.get(-status) if status < 0 else None
    if name == "ENOTSUP":  # the kernel's name for 95
        name = "EOPNOTSUPP"
    return f"-{name}" if name else str(status)


def cell_text(cell: CellResult) -> str:
    """The short form of a cell in the terminal table."""
    if cell.status != "ran" and cell.status not in STOPPED:
        return cell.status
    if cell.initiator_event is None and cell.initiator_status:
        text = "refused " + status_text(cell.initiator_status).lstrip("-")
    elif cell.initiator_event is None:
        text = "-"
    else:
        text = SHORT.get(cell.initiator_event, cell.initiator_event)
        if cell.initiator_status:
            text += " " + status_text(cell.initiator_status).lstrip("-")
    if cell.terminate is not None:
        text += " +T"
    if cell.status in STOPPED:
        text += " " + STOPPED[cell.status]
    return text


@dataclass(frozen=True, slots=True)
class GridEntry:
    """What the grids keep of a cell: its place, its short text, its colour and anchor."""

    scenario: str
    initiator: str
    responder: str
    text: str
    css: str
    anchor: str
    refused_by: str = ""
    """:attr:`CellResult.refused_by <mpa_emu.matrix.cell.CellResult.refused_by>`, empty
    when no rule of a side's own stack is broken."""

    @property
    def established(self) -> bool:
        """The initiator's application received RDMA_CM_EVENT_ESTABLISHED."""
        return self.css == "est"

    @classmethod
    def of(cls, cell: CellResult) -> GridEntry:
        """The entry of ``cell``."""
        css = ("bad" if cell.status in STOPPED else "na" if cell.status != "ran" else
               "est" if cell.initiator_event == "RDMA_CM_EVENT_ESTABLISHED" else "bad")
        # Interned: a grid holds one entry per cell, mostly the same few strings.
        return cls(sys.intern(cell.scenario), sys.intern(cell.initiator),
                   sys.intern(cell.responder), sys.intern(cell_text(cell)), css,
                   anchor(cell), sys.intern(cell.refused_by or ""))


SUMMARY_SCENARIO = "connect"
"""The scenario the "who talks to whom" summary reads: a plain connect that the
responder accepts, so a cell that does not establish is an interop refusal."""


@dataclass(frozen=True, slots=True)
class Talk:
    """One initiator's line of the "who talks to whom" summary: the responders its
    connect establishes with, and the others with what its application received and
    the kernel function that refused (when the cell knows it)."""

    initiator: str
    talks_to: tuple[str, ...]
    not_to: tuple[tuple[str, str, str], ...]
    """(responder, the cell's short text, :attr:`GridEntry.refused_by`)."""

    def text(self) -> str:
        """``siw talks to siw, cxgb4; not to irdma: rej ECONNRESET (irdma responder:
        irdma_negotiate_mpa_v2_ird_ord); erdma, erdma(cc=1): rej ECONNRESET (erdma
        responder: erdma_recv_mpa_rr)``: responders with the same outcome and refusal
        share one entry."""
        parts = [f"{self.initiator} talks to "
                 + (", ".join(self.talks_to) if self.talks_to else "no side")]
        if self.not_to:
            # Responders with the same outcome and refusal share one entry.
            groups: dict[tuple[str, str], list[str]] = {}
            for responder, text, by in self.not_to:
                groups.setdefault((text, by), []).append(responder)
            parts.append("not to " + "; ".join(_refused_text(", ".join(rs), text, by)
                                               for (text, by), rs in groups.items()))
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        """The line as the JSON document's ``who_talks_to_whom`` writes it."""
        return {"initiator": self.initiator, "talks_to": list(self.talks_to),
                "not_to": [{"responder": r, "outcome": t, "refused_by": b or None}
                           for r, t, b in self.not_to]}


def _refused_text(responders: str, text: str, by: str) -> str:
    return f"{responders}: {text}" + (f" ({by})" if by else "")


def summary_of(entries: Sequence[GridEntry]) -> list[Talk]:
    """The "who talks to whom" summary of the :data:`SUMMARY_SCENARIO` cells among
    ``entries``, an initiator a line in the grid's order (empty without such cells)."""
    rows = [e for e in entries if e.scenario == SUMMARY_SCENARIO]
    out = []
    for ini in dict.fromkeys(e.initiator for e in rows):
        mine = [e for e in rows if e.initiator == ini]
        out.append(Talk(ini, tuple(e.responder for e in mine if e.established),
                        tuple((e.responder, e.text, e.refused_by) for e in mine
                              if not e.established)))
    return out


def summary_text(talks: Sequence[Talk]) -> str:
    """The summary as the terminal prints it above the grids (empty without lines)."""
    if not talks:
        return ""
    lines = [f"who talks to whom ({SUMMARY_SCENARIO}: an initiator connects, the "
             "responder accepts)"]
    lines += ["  " + t.text() for t in talks]
    return "\n".join(lines) + "\n\n"


def summary_json(talks: Sequence[Talk]) -> dict[str, Any]:
    """The summary as the JSON document's ``who_talks_to_whom``."""
    return {"scenario": SUMMARY_SCENARIO, "initiators": [t.to_json() for t in talks]}


def summary_html(talks: Sequence[Talk]) -> str:
    """The summary as the HTML page shows it above the grids (empty without lines)."""
    if not talks:
        return ""
    items = "".join(f"<li>{escape(t.text())}</li>" for t in talks)
    return (f"<h2>who talks to whom</h2><p>{escape(SUMMARY_SCENARIO)}: an initiator "
            f"connects, the responder accepts</p><ul>{items}</ul>")


def _grids(entries: Sequence[GridEntry]) -> Iterator[tuple[str, list[str], list[str],
                                                          dict[tuple[str, str], GridEntry]]]:
    for scenario in dict.fromkeys(e.scenario for e in entries):
        rows = [e for e in entries if e.scenario == scenario]
        inis = list(dict.fromkeys(e.initiator for e in rows))
        resps = list(dict.fromkeys(e.responder for e in rows))
        yield scenario, inis, resps, {(e.initiator, e.responder): e for e in rows}


def table_of(entries: Sequence[GridEntry], *, legend: bool = True) -> str:
    """One grid per scenario: initiators down, responders across, what the initiator's
    application received in each cell."""
    out: list[str] = []
    for scenario, inis, resps, by in _grids(entries):
        def text(i: str, r: str, by: dict[tuple[str, str], GridEntry] = by) -> str:
            entry = by.get((i, r))
            return entry.text if entry is not None else ""

        first = max(len("initiator \\ responder"), *(len(i) for i in inis))
        widths = [max(len(r), *(len(text(i, r)) for i in inis)) for r in resps]
        out.append(f"{scenario}")
        head = "initiator \\ responder".ljust(first)
        out.append("  " + "  ".join([head, *(r.ljust(w) for r, w in zip(resps, widths,
                                                                        strict=True))]).rstrip())
        for i in inis:
            line = [i.ljust(first), *(text(i, r).ljust(w)
                                      for r, w in zip(resps, widths, strict=True))]
            out.append("  " + "  ".join(line).rstrip())
        out.append("")
    if legend:
        out.append(LEGEND)
    return "\n".join(out) + "\n"


def table(cells: Sequence[CellResult]) -> str:
    """The "who talks to whom" summary, then :func:`table_of` the cells."""
    entries = [GridEntry.of(c) for c in cells]
    return summary_text(summary_of(entries)) + table_of(entries)


def to_json(cells: Sequence[CellResult], *, rate: float | None = None) -> dict[str, Any]:
    """The JSON contract: ``{"cells": [...], "who_talks_to_whom": {...}}``, the cells in
    the order they were listed."""
    doc: dict[str, Any] = {"cells": [c.to_json() for c in cells],
                           "who_talks_to_whom": summary_json(
                               summary_of([GridEntry.of(c) for c in cells]))}
    if rate is not None:
        doc["cells_per_second"] = round(rate, 2)
    return doc


class JsonWriter:
    """The JSON contract written a cell at a time (nothing but the file grows)."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.count = 0
        self.summary: list[GridEntry] = []
        """The cells the summary reads (:func:`summary_of`), kept until the end."""
        stream.write('{"cells": [')

    def add(self, cell: CellResult) -> None:
        """Write one cell."""
        self.stream.write(("," if self.count else "") + "\n " + json.dumps(cell.to_json()))
        self.count += 1
        if cell.scenario == SUMMARY_SCENARIO:
            self.summary.append(GridEntry.of(cell))

    def close(self, rate: float | None = None) -> None:
        """End the document with the "who talks to whom" summary."""
        tail = f', "who_talks_to_whom": {json.dumps(summary_json(summary_of(self.summary)))}'
        tail += "" if rate is None else f', "cells_per_second": {round(rate, 2)}'
        self.stream.write(f"\n]{tail}}}\n")


def anchor(cell: CellResult) -> str:
    """The HTML id of a cell's details."""
    raw = f"{cell.scenario}--{cell.initiator}--{cell.responder}"
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in raw)


_HEAD = ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>mpa-emu matrix"
         "</title><style>body{font-family:sans-serif}table{border-collapse:collapse;"
         "margin-bottom:1.5em}td,th{border:1px solid #999;padding:2px 6px;"
         "font-family:monospace}td.na{color:#888}td.est{background:#dfd}"
         "td.bad{background:#fdd}pre{background:#f6f6f6;padding:6px;overflow:auto}"
         "</style></head><body><h1>mpa-emu matrix</h1>")
# A link to a cell opens its details.
_TAIL = ("<script>function openCell(){var e=document.getElementById("
         "location.hash.slice(1));if(e){e.open=true;}}"
         "window.addEventListener('hashchange',openCell);openCell();</script></body></html>")


def page_head(out: IO[str]) -> None:
    """The start of the page: styles, title, legend."""
    out.write(_HEAD + f"\n<p>{escape(LEGEND)}</p>\n")


def page_tail(out: IO[str]) -> None:
    """The end of the page and the script that opens a linked cell."""
    out.write(_TAIL + "\n")


def write_section(out: IO[str], entries: Sequence[GridEntry], details: Iterable[str]) -> None:
    """One part of the page: the "who talks to whom" summary of its connect cells, the
    grids of ``entries``, then each cell's details (HTML pieces), each grid cell a link
    that opens them."""
    out.write(summary_html(summary_of(entries)))
    for scenario, inis, resps, by in _grids(entries):
        out.write(f"<h2>{escape(scenario)}</h2><table><tr><th>initiator \\ responder</th>"
                  + "".join(f"<th>{escape(r)}</th>" for r in resps) + "</tr>\n")
        for i in inis:
            row = [f"<tr><th>{escape(i)}</th>"]
            for r in resps:
                e = by.get((i, r))
                row.append("<td></td>" if e is None else
                           f"<td class='{e.css}'><a href='#{e.anchor}'>{escape(e.text)}</a></td>")
            out.write("".join(row) + "</tr>\n")
        out.write("</table>\n")
    for piece in details:
        out.write(piece + "\n")


def html_page(cells: Sequence[CellResult]) -> str:
    """The whole page of ``cells`` as a string."""
    buffer = io.StringIO()
    page_head(buffer)
    write_section(buffer, [GridEntry.of(c) for c in cells], (details(c) for c in cells))
    page_tail(buffer)
    return buffer.getvalue()


def details(cell: CellResult) -> str:
    """The HTML of one cell's details: outcome, events, upcalls, refusals, RTR,
    Terminate, capture and ladder."""
    rows = [("status", cell.status + (f": {cell.reason}" if cell.reason else "")),
            ("initiator's application", " ".join(
                filter(None, [cell.initiator_event or "no event",
                              status_text(cell.initiator_status)]))),
            ("initiator's rdma_cm events", ", ".join(cell.initiator_events) or "none"),
            ("responder's rdma_cm events", ", ".join(cell.responder_events) or "none"),
            ("initiator's iw_cm upcalls", ", ".join(cell.initiator_upcalls) or "none"),
            ("responder's iw_cm upcalls", ", ".join(cell.responder_upcalls) or "none"),
            ("initiator's refused verbs", "; ".join(cell.initiator_failures) or "none"),
            ("responder's refused verbs", "; ".join(cell.responder_failures) or "none"),
            ("refused by", cell.refused_by or "no rule of a side's own stack"),
            ("RTR", cell.rtr or "none"), ("Terminate", cell.terminate or "none"),
            ("capture", cell.capture or "not written")]
    body = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    text = cell.ladder_text()
    ladder = f"<pre>{escape(text)}</pre>" if text else ""
    return (f"<details id='{anchor(cell)}'><summary>{escape(cell.scenario)}: "
            f"{escape(cell.initiator)} &rarr; {escape(cell.responder)}: "
            f"{escape(cell_text(cell))}</summary><table>{body}</table>{ladder}</details>")
