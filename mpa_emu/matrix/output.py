"""A matrix as a user reads it: a terminal table per scenario, the JSON contract, and an
HTML page where every cell opens its ladder."""

from __future__ import annotations

import errno
from collections.abc import Sequence
from html import escape
from typing import Any

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
          "stacks")


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
    if cell.status != "ran":
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
    return text


def table(cells: Sequence[CellResult]) -> str:
    """One grid per scenario: initiators down, responders across, what the initiator's
    application received in each cell."""
    out: list[str] = []
    scenarios = list(dict.fromkeys(c.scenario for c in cells))
    for scenario in scenarios:
        rows = [c for c in cells if c.scenario == scenario]
        inis = list(dict.fromkeys(c.initiator for c in rows))
        resps = list(dict.fromkeys(c.responder for c in rows))
        by = {(c.initiator, c.responder): cell_text(c) for c in rows}
        first = max(len("initiator \\ responder"), *(len(i) for i in inis))
        widths = [max(len(r), *(len(by.get((i, r), "")) for i in inis)) for r in resps]
        out.append(f"{scenario}")
        head = "initiator \\ responder".ljust(first)
        out.append("  " + "  ".join([head, *(r.ljust(w) for r, w in zip(resps, widths,
                                                                        strict=True))]).rstrip())
        for i in inis:
            line = [i.ljust(first), *(by.get((i, r), "").ljust(w)
                                      for r, w in zip(resps, widths, strict=True))]
            out.append("  " + "  ".join(line).rstrip())
        out.append("")
    out.append(LEGEND)
    return "\n".join(out) + "\n"


def to_json(cells: Sequence[CellResult], *, rate: float | None = None) -> dict[str, Any]:
    """The JSON contract: ``{"cells": [...]}`` in the order the cells were listed."""
    doc: dict[str, Any] = {"cells": [c.to_json() for c in cells]}
    if rate is not None:
        doc["cells_per_second"] = round(rate, 2)
    return doc


def _anchor(cell: CellResult) -> str:
    raw = f"{cell.scenario}--{cell.initiator}--{cell.responder}"
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in raw)


def html_page(cells: Sequence[CellResult]) -> str:
    """A self-contained page: the grids, each cell a link to its details and ladder."""
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>mpa-emu matrix"
             "</title><style>body{font-family:sans-serif}table{border-collapse:collapse;"
             "margin-bottom:1.5em}td,th{border:1px solid #999;padding:2px 6px;"
             "font-family:monospace}td.na{color:#888}td.est{background:#dfd}"
             "td.bad{background:#fdd}pre{background:#f6f6f6;padding:6px;overflow:auto}"
             "</style></head><body><h1>mpa-emu matrix</h1>",
             f"<p>{escape(LEGEND)}</p>"]
    scenarios = list(dict.fromkeys(c.scenario for c in cells))
    for scenario in scenarios:
        rows = [c for c in cells if c.scenario == scenario]
        inis = list(dict.fromkeys(c.initiator for c in rows))
        resps = list(dict.fromkeys(c.responder for c in rows))
        by = {(c.initiator, c.responder): c for c in rows}
        parts.append(f"<h2>{escape(scenario)}</h2><table><tr><th>initiator \\ responder"
                     "</th>" + "".join(f"<th>{escape(r)}</th>" for r in resps) + "</tr>")
        for i in inis:
            parts.append(f"<tr><th>{escape(i)}</th>")
            for r in resps:
                cell = by.get((i, r))
                if cell is None:
                    parts.append("<td></td>")
                    continue
                cls = ("na" if cell.status != "ran" else
                       "est" if cell.initiator_event == "RDMA_CM_EVENT_ESTABLISHED"
                       else "bad")
                parts.append(f"<td class='{cls}'><a href='#{_anchor(cell)}'>"
                             f"{escape(cell_text(cell))}</a></td>")
            parts.append("</tr>")
        parts.append("</table>")
    parts.append("<h2>Cells</h2>")
    for cell in cells:
        parts.append(_details(cell))
    # A link to a cell opens its details.
    parts.append("<script>function openCell(){var e=document.getElementById("
                 "location.hash.slice(1));if(e){e.open=true;}}"
                 "window.addEventListener('hashchange',openCell);openCell();</script>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _details(cell: CellResult) -> str:
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
            ("RTR", cell.rtr or "none"), ("Terminate", cell.terminate or "none"),
            ("capture", cell.capture or "not written")]
    body = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    ladder = f"<pre>{escape(cell.ladder)}</pre>" if cell.ladder else ""
    return (f"<details id='{_anchor(cell)}'><summary>{escape(cell.scenario)}: "
            f"{escape(cell.initiator)} &rarr; {escape(cell.responder)}: "
            f"{escape(cell_text(cell))}</summary><table>{body}</table>{ladder}</details>")
