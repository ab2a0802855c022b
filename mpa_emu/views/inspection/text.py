"""inspect's report as text and as JSON."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator

from mpa_emu.ulp.upper import ulp_lines
from mpa_emu.views.inspection.mpa_exchange import ird_ord_text
from mpa_emu.views.inspection.report import (
    CaptureReport,
    ConnectionReport,
    Finding,
    FpduInfo,
    MpaInfo,
)
from mpa_emu.wire import erdma_mpa

CHECKSUM_READINGS = {
    "strict": "checksums strict: every TCP checksum verified, offload artefacts are errors",
    "offload": "checksums offload: TX checksum offload artefacts are notes, not errors",
    "off": "checksums off: not verified",
}
"""The line every report opens with, naming the reading used (``--checksums``)."""


def _pdata_text(data: bytes) -> str:
    if not data:
        return "(0 bytes)"
    hexed = data.hex()
    shown = hexed if len(hexed) <= 96 else hexed[:96] + "..."
    text = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in data[:64])
    return f"({len(data)} bytes) {shown} \"{text}{'...' if len(data) > 64 else ''}\""



def _mpa_lines(label: str, m: MpaInfo) -> list[str]:
    verdict = "" if m.request else (", REJECT" if m.reject else ", accept")
    lines = [f"  {label:<12}frame {m.frame}: rev {m.rev}, flags 0x{m.flags:02x} "
             f"({m.flag_names()}), PD_Length {m.pd_length}{verdict}"]
    if m.has_block:
        bits = [n for ok, n in ((m.p2p, "P2P"),) if ok] + [f"{r} RTR" for r in m.rtr_names()]
        assert m.ird is not None and m.ord is not None
        lines.append(f"  {'':<12}IRD {ird_ord_text(m.ird)}, ORD {ird_ord_text(m.ord)}, "
                     f"{', '.join(bits) or 'no P2P, no RTR bits'}")
    if m.erdma_cookie is not None and m.erdma_cc is not None:
        cc = erdma_mpa.CC_NAMES.get(m.erdma_cc, "unnamed")
        lines.append(f"  {'':<12}erdma extension: cookie 0x{m.erdma_cookie:08x}, CC "
                     f"{m.erdma_cc} ({cc})")
    if m.private_data or m.pd_length:
        what = "reject reason" if m.reject else "private data"
        lines.append(f"  {'':<12}{what} {_pdata_text(m.private_data)}")
    if m.legacy is not None:
        lines.append(f"  {'':<12}= {m.legacy.text()}")
    return lines


def fpdu_line(f: FpduInfo) -> str:
    """``frame 8 client: zero-length RDMA Read Request, QN 1 MSN 1 MO 0, sink STag 0x1 TO
    0x0, source STag 0x2 TO 0x0, ULPDU_Length 46, L, CRC good``; no CRC word where CRC was
    not negotiated."""
    if f.qn is not None:
        where = f"QN {f.qn} MSN {f.msn} MO {f.mo}"
        if f.opcode == 1 and f.stag is not None:
            where += f", sink STag 0x{f.stag:x} TO 0x{f.to or 0:x}"
            if f.src_stag is not None:
                where += f", source STag 0x{f.src_stag:x} TO 0x{f.src_to or 0:x}"
    elif f.stag is not None:
        where = f"STag 0x{f.stag:x} TO 0x{f.to or 0:x}"
    else:
        where = "no DDP header"
    parts = [f"frame {f.frame} {f.side}: {f.what}", where,
             f"ULPDU_Length {f.ulpdu_length}", "L" if f.last else "not last"]
    if f.crc == "good":
        parts.append("CRC good")
    elif f.crc == "zero":
        parts.append("CRC zero (negotiated: wrong)")
    elif f.crc == "bad":
        parts.append(f"CRC bad 0x{f.crc_value:08x}, expected 0x{f.crc_expected or 0:08x}")
    if f.cut:
        parts.append("captured short (header only, not judged)")
    if f.answers is not None:
        parts.append(f"quotes the header of frame {f.answers}")
    return ", ".join(parts)


def shown_findings(c: ConnectionReport, hints: bool = False) -> list[Finding]:
    """The findings the text report lists (``hint`` ones only with ``hints``)."""
    return [f for f in c.findings if hints or f.severity != "hint"]


def format_connection(c: ConnectionReport, fpdus: bool = False, hints: bool = False) -> str:
    """One block of text for one connection; ``fpdus`` adds one line per FPDU, ``hints``
    the findings of severity ``hint`` (else one line counts them)."""
    vlan = f" VLAN {c.vlan}" if c.vlan is not None else ""
    lines = [f"Connection {c.index}: {c.client} -> {c.server}{vlan}  "
             f"(frames {c.first_frame}-{c.last_frame}, {c.frames} frames)"]
    for i, h in enumerate(c.handshake):
        lines.append(f"  {'handshake' if i == 0 else '':<12}{h}")
    if c.request is not None:
        lines += _mpa_lines("MPA request", c.request)
    if c.reply is not None:
        lines += _mpa_lines("MPA reply", c.reply)
    for i, n in enumerate(c.negotiated):
        lines.append(f"  {'negotiated' if i == 0 else '':<12}{n}")
    if c.rtr:
        lines.append(f"  {'RTR':<12}{c.rtr}")
    for i, fp in enumerate(c.fpdus):
        lines.append(f"  {'FPDUs' if i == 0 else '':<12}{fp}")
    if fpdus:
        lines += [f"  {'':<12}{fpdu_line(f)}" for f in c.fpdu_list]
    lines += ulp_lines(c.ulp, messages=fpdus)
    lines.append(f"  {'ended':<12}{c.ended}")
    for i, fp in enumerate(c.fingerprints):
        lines.append(f"  {'looks like' if i == 0 else '':<12}{fp}")
    for i, st in enumerate(c.stacks):
        lines.append(f"  {'stacks' if i == 0 else '':<12}{st.text()}")
    hidden = len(c.findings) - len(shown_findings(c, hints))
    if hidden:
        lines.append(f"  {'hints':<12}{hidden} note(s) on what stacks other than the "
                     "sides' own do (--verbose shows them)")
    for f in shown_findings(c, hints):
        where = f"frame {f.frame}: " if f.frame is not None else ""
        lines.append(f"  {f.severity.upper() if f.severity == 'error' else f.severity:<12}"
                     f"{where}{f.text}")
    return "\n".join(lines)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def report_head(report: CaptureReport, shown: int, errors: int) -> str:
    """The lines a report opens with: the header (frames, connections, errors; ``shown``
    of them selected out of ``shown + report.hidden``), the checksum reading and the
    frame-level problems; no final newline."""
    total = shown + report.hidden
    selection = f" ({shown} selected)" if report.hidden else ""
    out = [f"{report.path}: {_count(report.frames, 'frame')}, {report.tcp_frames} TCP, "
           f"{_count(total, 'connection')}{selection}, {_count(errors, 'error')}",
           f"  {CHECKSUM_READINGS.get(report.checksums, report.checksums)}"]
    out.extend(f"  {p}" for p in report.problems)
    return "\n".join(out)


def connection_block(c: ConnectionReport, comments: bool = False,
                     fpdus: bool = False, hints: bool = False) -> str:
    """One connection's part of the text report, starting with the blank line that
    separates it from what comes before; no final newline."""
    out = ["", format_connection(c, fpdus=fpdus, hints=hints)]
    if comments:
        out.extend(f"  {'comment' if i == 0 else '':<12}frame {n}: {t}"
                   for i, (n, t) in enumerate(c.comments))
    return "\n".join(out)


def format_report(report: CaptureReport, comments: bool = False,
                  fpdus: bool = False, hints: bool = False) -> str:
    """The whole report as text: a header line, the checksum reading, then one block per
    connection (``comments``: pcapng frame comments too; ``fpdus``: every FPDU)."""
    out = [report_head(report, len(report.connections), report.errors)]
    out.extend(connection_block(c, comments, fpdus, hints) for c in report.connections)
    return "\n".join(out) + "\n"


def connection_json(c: ConnectionReport) -> str:
    """One connection as it appears in :func:`report_json`'s ``connections`` list
    (indented for that place, no final newline)."""
    text = json.dumps(c.to_dict(), indent=2, sort_keys=True)
    return "\n".join("    " + line for line in text.splitlines())


def report_json_around(report: CaptureReport, entries: Iterable[str]) -> Iterator[str]:
    """:func:`report_json` in pieces, with ``entries`` (from :func:`connection_json`)
    as its connections, whatever ``report.connections`` holds: for writing a report
    whose connections were not kept in memory."""
    skeleton = dataclasses.replace(report, connections=[])
    head, _, tail = report_json(skeleton).partition('"connections": [],')
    yield head + '"connections": ['
    first = True
    for entry in entries:
        yield ("\n" if first else ",\n") + entry
        first = False
    yield ("]," if first else "\n  ],") + tail


def report_json(report: CaptureReport) -> str:
    """The report as indented JSON with sorted keys."""
    return json.dumps(report.to_dict(), indent=2, sort_keys=True) + "\n"
