"""FPDUs after the MPA exchange, and what RDMAP makes of them.

Each side's byte stream after its MPA frame is cut into FPDUs (RFC 5044 section 4.1:
ULPDU_LENGTH, ULPDU, PAD, CRC). The CRC is judged only where it was negotiated (RFC 5044
section 7.1: when either side set C); elsewhere an FPDU has no CRC verdict at all. The
ULPDU's DDP header (RFC 5041 section 4) gives QN, MSN and MO, or STag and TO; RDMAP
(RFC 5040 section 4) the opcode. From these come the RDMAP-level findings: Read Requests
never answered, MSN gaps, and each Terminate with its layer, type and code decoded
(RFC 5040 section 7.4; LLP codes from RFC 5044 section 8 and RFC 6581 section 9).
"""

from __future__ import annotations

import struct

from mpa_emu.views.inspection.mpa_exchange import Stream, bytes_at, frame_at
from mpa_emu.views.inspection.report import ConnectionReport, Direction, FpduInfo
from mpa_emu.wire.ddp import OPCODE_NAMES, DdpFormatError, Opcode, ReadRequest, TerminateHeader
from mpa_emu.wire.mpa import MpaFormatError, crc32c, unframe_fpdu

_TAGGED, _LAST = 0x80, 0x40
_UNTAGGED_HEADER = 18  # control (2), RsvdULP (4), QN, MSN, MO (4 each): RFC 5041 4.4
_TAGGED_HEADER = 14  # control (2), STag (4), TO (8): RFC 5041 section 4.3

TERM_LAYERS = {0: "RDMAP", 1: "DDP", 2: "LLP"}
"""Terminate Layer values (RFC 5040 section 4.8)."""

TERM_TYPES = {
    (0, 0): "Local Catastrophic Error",
    (0, 1): "Remote Protection Error",
    (0, 2): "Remote Operation Error",
    (1, 0): "Local Catastrophic Error",
    (1, 1): "Tagged Buffer Error",
    (1, 2): "Untagged Buffer Error",
    (1, 3): "reserved for the LLP",
    (2, 0): "MPA",
}
"""(Layer, EType) names (RFC 5040 section 7.4; LLP: RFC 5044 section 8)."""

TERM_CODES = {
    (0, 0, 0x00): "Unspecified Error",
    (0, 1, 0x00): "Invalid STag",
    (0, 1, 0x01): "Base or bounds violation",
    (0, 1, 0x02): "Access rights violation",
    (0, 1, 0x03): "STag not associated with RDMAP Stream",
    (0, 1, 0x04): "TO wrap",
    (0, 1, 0xFF): "Unspecified Error",
    (0, 2, 0x05): "Invalid RDMAP version",
    (0, 2, 0x06): "Unexpected OpCode",
    (0, 2, 0x07): "Catastrophic error, localized to RDMAP Stream",
    (0, 2, 0x08): "Catastrophic error, global",
    (0, 2, 0x09): "STag cannot be Invalidated",
    (0, 2, 0xFF): "Unspecified Error",
    (1, 0, 0x00): "Unspecified Error",
    (1, 1, 0x00): "Invalid STag",
    (1, 1, 0x01): "Base or bounds violation",
    (1, 1, 0x02): "STag not associated with DDP Stream",
    (1, 1, 0x03): "TO wrap",
    (1, 1, 0x04): "Invalid DDP version",
    (1, 2, 0x01): "Invalid QN",
    (1, 2, 0x02): "Invalid MSN - no buffer available",
    (1, 2, 0x03): "Invalid MSN - MSN range is not valid",
    (1, 2, 0x04): "Invalid MO",
    (1, 2, 0x05): "DDP Message too long for available buffer",
    (1, 2, 0x06): "Invalid DDP version",
    (2, 0, 0x01): "TCP connection closed, terminated or lost",
    (2, 0, 0x02): "MPA CRC error",
    (2, 0, 0x03): "MPA Marker and ULPDU_Length field mismatch",
    (2, 0, 0x04): "Invalid MPA Request or Reply frame",
    (2, 0, 0x05): "Local Catastrophic Error",
    (2, 0, 0x06): "Insufficient IRD resources",
    (2, 0, 0x07): "No matching RTR option",
}
"""(Layer, EType, Error Code) names (RFC 5040 section 7.4, RFC 5044 section 8, RFC 6581
section 9)."""


ZERO_READ = "zero-length RDMA Read Request"


def terminate_text(term: TerminateHeader) -> str:
    """``layer LLP (2), type MPA (0), code 0x02 MPA CRC error``."""
    layer = TERM_LAYERS.get(term.layer, "unknown layer")
    etype = TERM_TYPES.get((term.layer, term.etype), "unknown type")
    code = TERM_CODES.get((term.layer, term.etype, term.error_code), "unknown code")
    return (f"layer {layer} ({term.layer}), type {etype} ({term.etype}), "
            f"code 0x{term.error_code:02x} {code}")


def describe_ulpdu(frame: int, side: str, ulpdu: bytes) -> FpduInfo:
    """The DDP and RDMAP fields of one ULPDU (RFC 5041 section 4, RFC 5040 section 4)."""
    info = FpduInfo(frame=frame, side=side, ulpdu_length=len(ulpdu), opcode=None,
                    what="short DDP segment")
    if len(ulpdu) < 2:
        return info
    opcode = ulpdu[1] & 0x0F
    info.opcode, info.last = opcode, bool(ulpdu[0] & _LAST)
    name = OPCODE_NAMES.get(opcode, f"RDMAP opcode {opcode}")
    if ulpdu[0] & _TAGGED:
        if len(ulpdu) < _TAGGED_HEADER:
            return info
        info.stag, info.to = struct.unpack_from("!IQ", ulpdu, 2)
        size = len(ulpdu) - _TAGGED_HEADER
        info.what = f"zero-length {name}" if size == 0 else f"{name} ({size} bytes)"
        return info
    if len(ulpdu) < _UNTAGGED_HEADER:
        return info
    info.qn, info.msn, info.mo = struct.unpack_from("!III", ulpdu, 6)
    body = ulpdu[_UNTAGGED_HEADER:]
    info.what = f"{name} ({len(body)} bytes)"
    try:
        if opcode == Opcode.READ_REQUEST:
            rr = ReadRequest.from_bytes(body)
            info.stag, info.to = rr.sink_stag, rr.sink_to
            info.what = ("zero-length RDMA Read Request" if rr.size == 0
                         else f"{name} ({rr.size} bytes)")
        elif opcode == Opcode.TERMINATE:
            info.terminate = TerminateHeader.from_bytes(body)
            info.what = f"{name}: {terminate_text(info.terminate)}"
        elif not body and opcode == Opcode.SEND:
            info.what = f"zero-length {name}"
    except DdpFormatError:
        info.what = f"short {name}"
    return info


def cut_fpdus(rep: ConnectionReport, d: Direction, stream: Stream, side: str, start: int,
              crc: bool, markers: bool, rtr: bool) -> None:
    """Cut ``side``'s stream after offset ``start`` into FPDUs: list them, count their
    opcodes, judge CRCs where ``crc`` was negotiated; ``rtr`` when the first is the RTR
    (MPA v2 with the RFC 6581 block on both frames)."""
    end = sum(len(x[2]) for x in stream)
    if end <= start:
        if rtr and rep.reply is not None and not rep.reply.reject:
            rep.rtr = "no RTR from the initiator in the capture"
        return
    if markers:
        rep.fpdus.append(f"{side}: {end - start} bytes of FPDUs with markers (not checked)")
        return
    data = bytes_at(stream, start, end - start)
    pos = 0
    while pos < len(data):
        frame = frame_at(stream, start + pos)
        try:
            fpdu = unframe_fpdu(data[pos:])
        except MpaFormatError:
            rep.add(frame, "note", f"{side}: incomplete FPDU at the end of the capture")
            break
        d.fpdus += 1
        info = describe_ulpdu(frame, side, fpdu.ulpdu)
        info.crc_value = fpdu.crc
        if crc:
            _judge_crc(rep, d, info, data[pos:pos + fpdu.wire_length - 4], fpdu.crc)
        rep.fpdu_list.append(info)
        op = info.what.split(":")[0]
        d.opcodes[op] = d.opcodes.get(op, 0) + 1
        if rtr and d.fpdus == 1:
            _check_rtr(rep, info, op)
        pos += fpdu.wire_length
    summary = ", ".join(f"{n} {op}" for op, n in d.opcodes.items())
    bad = f", {d.bad_crc} with a bad CRC" if d.bad_crc else ""
    rep.fpdus.append(f"{side}: {d.fpdus} FPDUs ({summary}){bad}")


def _judge_crc(rep: ConnectionReport, d: Direction, info: FpduInfo, body: bytes,
               value: int) -> None:
    want = crc32c(body)
    info.crc_expected = want
    if value == want:
        info.crc = "good"
        return
    d.bad_crc += 1
    if value == 0:
        info.crc = "zero"
        rep.add(info.frame, "error", f"{info.side} FPDU CRC field is zero, but CRC was "
                f"negotiated (C set in the request or reply, RFC 5044 section 7.1): "
                f"expected 0x{want:08x}")
        return
    info.crc = "bad"
    rep.add(info.frame, "error", f"{info.side} FPDU CRC32c 0x{value:08x} wrong, expected "
            f"0x{want:08x} (stored little-endian)")


def _check_rtr(rep: ConnectionReport, info: FpduInfo, op: str) -> None:
    rep.rtr = f"frame {info.frame}: {op}"
    if rep.reply is None:
        return
    chosen = rep.reply.rtr_names()
    expect = {"read": "zero-length RDMA Read Request",
              "write": "zero-length RDMA Write", "send": "zero-length Send"}
    if chosen and op != expect.get(chosen[0]):
        rep.add(info.frame, "error", f"first FPDU is {op}, but the reply chose the "
                f"{chosen[0]} RTR (RFC 6581 section 5)")


def rdmap_findings(rep: ConnectionReport, from_start: dict[str, bool]) -> None:
    """Read Requests never answered, MSN gaps and Terminates, from ``rep.fpdu_list``.
    ``from_start[side]`` is true when that side's stream was seen from its MPA frame on,
    so its first MSN on each queue must be 1 (RFC 5041 section 5.1)."""
    first = _first_of(rep, "client")
    if not rep.rtr and first is not None and first.what == ZERO_READ:
        rep.add(first.frame, "note", "first client FPDU is a zero-length RDMA Read Request: "
                "MPA v1 has no RTR, but an irdma initiator sends this one after any reply "
                "(irdma_cm_event_connected, irdma_sc_send_rtt)")
    _unanswered_reads(rep)
    for side in ("client", "server"):
        _msn_gaps(rep, side, from_start.get(side, False))
    for info in rep.fpdu_list:
        if info.opcode == Opcode.TERMINATE:
            rep.add(info.frame, "warning", f"{info.side} sends a {info.what}")


def _unanswered_reads(rep: ConnectionReport) -> None:
    # A Read Response is tagged with the Request's Data Sink STag (RFC 5040 section
    # 4.5/4.6); its last segment (L) completes the oldest open Request with that STag.
    pending: dict[str, list[FpduInfo]] = {"client": [], "server": []}
    for info in rep.fpdu_list:
        other = "server" if info.side == "client" else "client"
        if info.opcode == Opcode.READ_REQUEST and info.qn is not None:
            pending[info.side].append(info)
        elif info.opcode == Opcode.READ_RESPONSE and info.last and info.stag is not None:
            for req in pending[other]:
                if req.stag == info.stag:
                    pending[other].remove(req)
                    break
    for side, requests in pending.items():
        for req in requests:
            if side == "client" and req is _first_of(rep, side) \
                    and req.what == ZERO_READ:
                continue  # irdma's RTR (also after a v1 reply): answering it is optional
            rep.add(req.frame, "warning", f"{side} {req.what} (MSN {req.msn}) never "
                    "answered by a Read Response in the capture")


def _first_of(rep: ConnectionReport, side: str) -> FpduInfo | None:
    return next((i for i in rep.fpdu_list if i.side == side), None)


def _msn_gaps(rep: ConnectionReport, side: str, from_start: bool) -> None:
    # RFC 5041 section 5.1: MSN starts at 1 on each queue and rises by one per message;
    # every segment of a message carries its MSN.
    last: dict[int, tuple[int, bool]] = {}  # qn -> (msn, last segment seen)
    for info in rep.fpdu_list:
        if info.side != side or info.qn is None or info.msn is None:
            continue
        prev = last.get(info.qn)
        if prev is None:
            if from_start and info.msn != 1:
                rep.add(info.frame, "warning", f"{side} QN {info.qn} starts at MSN "
                        f"{info.msn}, not 1 (RFC 5041 section 5.1)")
        else:
            msn, done = prev
            want = (msn + 1) & 0xFFFFFFFF if done else msn
            if info.msn != want:
                missing = (info.msn - want) & 0xFFFFFFFF
                gap = (f"{missing} message{'s' if missing > 1 else ''} missing"
                       if done and 0 < missing < 0x80000000 else "out of order")
                rep.add(info.frame, "warning", f"{side} QN {info.qn} MSN {info.msn} "
                        f"after MSN {msn}: {gap} (RFC 5041 section 5.1)")
        last[info.qn] = (info.msn, bool(info.last))
