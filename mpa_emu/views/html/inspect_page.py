"""The HTML report of ``mpa-emu inspect``: the capture's ladder with the frames that carry
errors highlighted (warnings in amber), and one section per connection: handshake, MPA
request and reply, negotiation, FPDUs, ending, findings and frame comments."""

from __future__ import annotations

import io
from typing import TextIO

from mpa_emu.capture.checksums import Mode
from mpa_emu.views.html.fpdu_fields import connection_rows
from mpa_emu.views.html.page import Page, Section, cell, frame_link, table
from mpa_emu.views.html.streamed import ParkedRows, streamed_fields
from mpa_emu.views.inspection import CaptureReport, ConnectionReport, format_connection
from mpa_emu.views.ladder import Row

_RANK = {"error": 2, "warning": 1}


def _connection(c: ConnectionReport) -> Section:
    findings = table(
        ["frame", "severity", "finding"],
        ([frame_link(f.frame), cell(f.severity), cell(f.text)] for f in c.findings))
    lines = format_connection(c, hints=True).splitlines()[1:]
    # The findings close the block, one line each; they get their own table below.
    story = "\n".join(lines[:len(lines) - len(c.findings)])
    comments = table(["frame", "comment"],
                     ([frame_link(n), cell(text)] for n, text in c.comments), cls="mono")
    body = (f"<p>frames {frame_link(c.first_frame)} to {frame_link(c.last_frame)}</p>"
            f'<pre class="mono">{cell(story)}</pre><h3>Findings</h3>{findings}'
            f"<h3>Frame comments</h3>{comments}")
    return Section(f"Connection {c.index}: {c.client} > {c.server}", body,
                   anchor=f"connection-{c.index}")


def inspect_page(report: CaptureReport) -> str:
    """The whole page for one inspected capture (its selected connections)."""
    out = io.StringIO()
    write_inspect_page(report, out)
    return out.getvalue()


def write_inspect_page(report: CaptureReport, out: TextIO) -> None:
    """Write the page into ``out`` as it is made: the ladder and the frames' fields are
    read from the capture while written (:mod:`mpa_emu.views.html.streamed`); what is
    held is the report itself."""
    mode = Mode(report.checksums)
    rank: dict[int, int] = {}
    for c in report.connections:
        for f in c.findings:
            if f.frame is not None and f.severity in _RANK:
                rank[f.frame] = max(rank.get(f.frame, 0), _RANK[f.severity])

    def mark(_index: int, row: Row) -> str | None:
        if row.frame is None or row.frame not in rank:
            return None
        return "hl" if rank[row.frame] == 2 else "rel"

    errors = report.errors
    verdict = (f"{report.frames} frames, {report.tcp_frames} TCP, "
               f"{len(report.connections)} connection(s) shown"
               + (f" ({report.hidden} hidden)" if report.hidden else "")
               + f", {errors} error(s)")
    sections = [_connection(c) for c in report.connections]
    if report.problems:
        sections.append(Section("Frames outside any connection",
                                "".join(f"<p>{cell(p)}</p>" for p in report.problems)))
    with ParkedRows(report.path, mode) as ladder:
        Page(title=f"mpa-emu inspect {report.path}", verdict=verdict, failed=bool(errors),
             ladder=ladder, marks=mark,
             frames=streamed_fields(report.path, mode, connection_rows(report.connections)),
             sections=sections).write(out)
