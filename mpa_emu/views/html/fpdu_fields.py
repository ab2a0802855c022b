"""The FPDU rows of the HTML frame panel, from the decoder ``inspect --fpdus`` prints
(:mod:`mpa_emu.views.inspection.fpdus`): DDP's QN, MSN and MO or STag and TO (RFC 5041
section 4), a Read Request's sink and source STag and TO (RFC 5040 section 4.4), a
Terminate's layer, type and code in the layout inspect keeps (RFC 5040 section 4.8, or
siw's), and the CRC verdict where CRC was negotiated (RFC 5044 section 7.1).

Each side's byte stream is cut into FPDUs as inspect cuts it, so an FPDU split over
segments is shown at the frame it starts in, as ``inspect --fpdus`` lists it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from mpa_emu.capture.checksums import Mode, mode_name
from mpa_emu.views.inspection import CaptureReport, stream_capture
from mpa_emu.views.inspection.report import ConnectionReport, FpduInfo
from mpa_emu.wire.ddp import Opcode
from mpa_emu.wire.terminate_layouts import (
    RFC,
    TERM_CODES,
    TERM_LAYERS,
    TERM_TYPES,
    read_terminate,
)

Fields = list[tuple[str, str]]

FpduRows = Mapping[int, Sequence[Fields]]
"""Frame number -> the rows of each FPDU starting in that frame."""


def fpdu_rows(info: FpduInfo, peer_sent: bool = True) -> Fields:
    """One FPDU as panel rows, the words of ``inspect --fpdus``; ``peer_sent`` whether
    the peer had sent an FPDU before it (what decides a Terminate's layout)."""
    out: Fields = [("FPDU", f"{info.side}: {info.what}")]
    if info.qn is not None:
        out.append(("DDP", f"untagged, QN {info.qn} MSN {info.msn} MO {info.mo}"))
    elif info.stag is not None:
        out.append(("DDP", f"tagged, STag 0x{info.stag:x} TO 0x{info.to or 0:x}"))
    else:
        out.append(("DDP", "no DDP header"))
    if info.opcode == Opcode.READ_REQUEST and info.qn is not None and info.stag is not None:
        out.append(("Read sink", f"STag 0x{info.stag:x} TO 0x{info.to or 0:x}"))
        out.append(("Read size", f"{info.read_size or 0} bytes"))
        if info.src_stag is not None:
            out.append(("Read source", f"STag 0x{info.src_stag:x} TO 0x{info.src_to or 0:x}"))
    if info.opcode == Opcode.TERMINATE and info.term_body:
        read = read_terminate(info.term_body, peer_sent)
        r = read.reading
        out.append(("Terminate layer", f"{TERM_LAYERS.get(r.layer, 'unknown layer')} "
                                       f"({r.layer})"))
        out.append(("Terminate type", f"{TERM_TYPES.get((r.layer, r.etype), 'unknown type')}"
                                      f" ({r.etype})"))
        out.append(("Terminate code", f"0x{r.error_code:02x} "
                    + TERM_CODES.get((r.layer, r.etype, r.error_code), "unknown code")))
        out.append(("Terminate flags", r.flag_names()
                    + (f"; {read.quoted} bytes quoted" if read.quoted else "")))
        if read.other is not None and r.layout != RFC:
            out.append(("Terminate layout", r.layout))
        if info.layout_note:
            out.append(("Terminate layout", info.layout_note))
    out.append(("ULPDU_Length", str(info.ulpdu_length)))
    out.append(("DDP L", "last segment" if info.last else "not last"))
    if info.crc == "good":
        out.append(("MPA CRC", "good"))
    elif info.crc == "zero":
        out.append(("MPA CRC", "zero (negotiated: wrong)"))
    elif info.crc == "bad":
        out.append(("MPA CRC", f"bad 0x{info.crc_value:08x}, expected "
                               f"0x{info.crc_expected or 0:08x}"))
    return out


def connection_rows(connections: Iterable[ConnectionReport]) -> dict[int, list[Fields]]:
    """The FPDU rows of every connection's FPDUs, by the frame each starts in."""
    out: dict[int, list[Fields]] = {}
    for c in connections:
        for info in c.fpdu_list:
            peer_sent = any(i.side != info.side and i.frame < info.frame
                            for i in c.fpdu_list) if info.term_body else True
            out.setdefault(info.frame, []).append(fpdu_rows(info, peer_sent))
    return out


def capture_rows(path: str | Path, checksums: Mode = Mode.OFFLOAD) -> dict[int, list[Fields]]:
    """:func:`connection_rows` of a capture read again as inspect reads it."""
    report = CaptureReport(path=str(path), checksums=mode_name(checksums))
    return connection_rows(stream_capture(path, report, checksums))
