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
from dataclasses import dataclass

from mpa_emu.views.inspection.messages import (
    answered_fpdu,
    answered_text,
    group_messages,
)
from mpa_emu.views.inspection.messages import summary as message_summary
from mpa_emu.views.inspection.mpa_exchange import Stream, bytes_at, frame_at, stream_end
from mpa_emu.views.inspection.report import ConnectionReport, Direction, FpduInfo
from mpa_emu.wire.ddp import (
    DDP_VERSION,
    DDP_VERSION_MASK,
    OPCODE_NAMES,
    RDMAP_VERSION,
    DdpFormatError,
    Opcode,
    ReadRequest,
)
from mpa_emu.wire.mpa import MpaFormatError, crc32c, unframe_fpdu
from mpa_emu.wire.terminate_layouts import (  # noqa: F401 (names kept importable here)
    RFC,
    TERM_CODES,
    TERM_LAYERS,
    TERM_TYPES,
    read_terminate,
)

_TAGGED, _LAST = 0x80, 0x40
_UNTAGGED_HEADER = 18  # control (2), RsvdULP (4), QN, MSN, MO (4 each): RFC 5041 4.4
_TAGGED_HEADER = 14  # control (2), STag (4), TO (8): RFC 5041 section 4.3

ZERO_READ = "zero-length RDMA Read Request"


def terminate_words(body: bytes, peer_sent: bool = True) -> tuple[str, str]:
    """(``layer LLP (2), type MPA (0), code 0x02 MPA CRC error``, how the layout was
    chosen or "") of a Terminate body, read in RFC 5040's layout and in siw's
    (:mod:`mpa_emu.wire.terminate_layouts`); ``peer_sent`` whether an FPDU from the peer
    came before it."""
    read = read_terminate(body, peer_sent)
    text = read.reading.text()
    if read.other is not None and read.reading.layout != RFC:
        text += f" ({read.reading.layout} layout)"
    return text, read.why()


def describe_ulpdu(frame: int, side: str, ulpdu: bytes, length: int | None = None) -> FpduInfo:
    """The DDP and RDMAP fields of one ULPDU (RFC 5041 section 4, RFC 5040 section 4);
    ``length`` its ULPDU_LENGTH when ``ulpdu`` is only the part a capture kept."""
    full = len(ulpdu) if length is None else length
    info = FpduInfo(frame=frame, side=side, ulpdu_length=full, opcode=None,
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
        size = full - _TAGGED_HEADER
        info.what = f"zero-length {name}" if size == 0 else f"{name} ({size} bytes)"
        return info
    if len(ulpdu) < _UNTAGGED_HEADER:
        return info
    info.qn, info.msn, info.mo = struct.unpack_from("!III", ulpdu, 6)
    body = ulpdu[_UNTAGGED_HEADER:]
    info.what = f"{name} ({full - _UNTAGGED_HEADER} bytes)"
    if len(ulpdu) < full and opcode in (Opcode.READ_REQUEST, Opcode.TERMINATE):
        info.what = f"{name} (cut by the snap length)"
        return info
    try:
        if opcode == Opcode.READ_REQUEST:
            rr = ReadRequest.from_bytes(body)
            info.stag, info.to, info.read_size = rr.sink_stag, rr.sink_to, rr.size
            info.src_stag, info.src_to = rr.src_stag, rr.src_to
            info.what = ("zero-length RDMA Read Request" if rr.size == 0
                         else f"{name} ({rr.size} bytes)")
        elif opcode == Opcode.TERMINATE:
            info.term_body = bytes(body)
            text, info.layout_note = terminate_words(body)
            info.what = f"{name}: {text}"
        elif full == _UNTAGGED_HEADER and opcode == Opcode.SEND:
            info.what = f"zero-length {name}"
    except (DdpFormatError, ValueError):
        info.what = f"short {name}"
    return info


def cut_fpdus(rep: ConnectionReport, d: Direction, stream: Stream, side: str, start: int,
              crc: bool, markers: bool, rtr: bool) -> None:
    """Cut ``side``'s stream after offset ``start`` into FPDUs: list them, group them into
    messages, judge CRCs where ``crc`` was negotiated; ``rtr`` when the first should be
    the RTR (MPA v2 with P2P set in both frames). An FPDU a frame captured short did not
    keep whole is listed from its header, marked ``cut`` and not judged; its length
    (ULPDU_LENGTH) places the next one (RFC 5044 section 4.1)."""
    end = stream_end(stream, d)
    if end <= start:
        if rtr and rep.reply is not None and not rep.reply.reject:
            rep.rtr = "no RTR from the initiator in the capture"
        return
    if markers:
        rep.fpdus.append(f"{side}: {end - start} bytes of FPDUs with markers (not checked)")
        return
    pos = start
    cut = 0
    while pos < end:
        frame = frame_at(stream, pos)
        head = bytes_at(stream, pos, 2)
        if len(head) < 2:
            resume = _resync(stream, pos)
            if resume is None:
                rep.add(frame, "note", f"{side}: the FPDU after frame {frame} begins in "
                        "bytes the capture did not keep (snap length): nothing after it "
                        "can be placed")
                break
            rep.add(frame_at(stream, resume), "note", f"{side}: the FPDU after frame "
                    f"{frame} begins in bytes the capture did not keep (snap length); "
                    f"read again from frame {frame_at(stream, resume)}, whose segment "
                    "begins with an FPDU header", rule="cut-capture")
            pos = resume
            continue
        length = struct.unpack("!H", head)[0]
        wire = 2 + length + (-(2 + length) % 4) + 4
        kept = bytes_at(stream, pos, wire)
        if len(kept) < wire:
            last = frame_at(stream, pos + max(len(kept) - 1, 0))
            if pos + wire > end and last not in d.short:
                rep.add(frame, "note", f"{side}: incomplete FPDU at the end of the capture")
                break
            info = describe_ulpdu(frame, side, kept[2:2 + length], length=length)
            info.cut = True
            cut += 1
            d.fpdus += 1
            rep.fpdu_list.append(info)
            _check_versions(rep, info, kept[2:2 + length])
        else:
            try:
                fpdu = unframe_fpdu(kept)
            except MpaFormatError:
                rep.add(frame, "note", f"{side}: incomplete FPDU at the end of the capture")
                break
            d.fpdus += 1
            info = describe_ulpdu(frame, side, fpdu.ulpdu)
            info.crc_value = fpdu.crc
            if crc:
                _judge_crc(rep, d, info, kept[:wire - 4], fpdu.crc)
            rep.fpdu_list.append(info)
            _check_versions(rep, info, fpdu.ulpdu)
        op = info.what.split(":")[0]
        d.opcodes[op] = d.opcodes.get(op, 0) + 1
        if rtr and d.fpdus == 1:
            if info.cut:
                rep.rtr = f"frame {info.frame}: {op}; not judged"
            else:
                _check_rtr(rep, info, op)
        pos += wire
    messages = group_messages(rep.fpdu_list, side)
    grouped = f" in {len(messages)} messages" if len(messages) != d.fpdus else ""
    bad = f", {d.bad_crc} with a bad CRC" if d.bad_crc else ""
    short = f", {cut} captured short (headers read, not judged)" if cut else ""
    rep.fpdus.append(f"{side}: {d.fpdus} FPDUs{grouped} ({message_summary(messages)})"
                     f"{bad}{short}")


def _resync(stream: Stream, pos: int) -> int | None:
    """The start of the first segment after ``pos`` that begins with what reads as an
    FPDU header: a ULPDU_LENGTH that holds a DDP header, DDP and RDMAP version 1."""
    for _, off, data in stream:
        if off <= pos or len(data) < 4:
            continue
        length = struct.unpack_from("!H", data)[0]
        if length >= _TAGGED_HEADER and data[2] & DDP_VERSION_MASK == DDP_VERSION \
                and data[3] >> 6 == RDMAP_VERSION:
            return off
    return None


def _check_versions(rep: ConnectionReport, info: FpduInfo, ulpdu: bytes) -> None:
    """DDP version 1 (RFC 5041 section 4.2) and RDMAP version 1 (RFC 5040 section 4.2);
    a receiver terminates any other (RFC 5041 section 7.2 "Invalid DDP version", RFC 5040
    section 7.2 "Invalid RDMAP version")."""
    if len(ulpdu) < 2:
        return
    dv, rv = ulpdu[0] & DDP_VERSION_MASK, ulpdu[1] >> 6
    if dv != DDP_VERSION:
        rep.add(info.frame, "error", f"{info.side} {info.what}: DDP version {dv}, RFC 5041 "
                "section 4.2 has only version 1 (a receiver terminates: Invalid DDP "
                "version)", rule="ddp-version")
    if rv != RDMAP_VERSION:
        rep.add(info.frame, "error", f"{info.side} {info.what}: RDMAP version {rv}, RFC 5040 "
                "section 4.2 has only version 1 (a receiver terminates: Invalid RDMAP "
                "version)", rule="rdmap-version")
    opcode = ulpdu[1] & 0x0F
    if opcode > Opcode.TERMINATE:
        # siw_get_hdr: an opcode above Terminate is "unknown packet type".
        rep.add(info.frame, "error", f"{info.side} FPDU with RDMAP opcode {opcode}: RFC "
                "5040 section 4.3 defines 0 to 7 (a receiver terminates: Unexpected "
                "OpCode)", rule="invalid-opcode")


VERSION_RULE = "has only version 1 (a receiver terminates: "
"""The words of a version finding, which :func:`version_reactions` completes."""


def version_reactions(rep: ConnectionReport, sides: dict[str, Direction]) -> None:
    """Complete each version finding with what the capture shows the receiver did after
    it: its Terminate, else its first FIN or RST, else nothing (``sides``: each side's
    stream); the rule says a receiver terminates, the capture may show otherwise."""
    ends = {side: min([(n, "FIN") for n, _ in d.fins[:1]] + [(n, "RST") for n in d.rsts[:1]],
                      default=None) for side, d in sides.items()}
    for f in rep.findings:
        if VERSION_RULE not in f.text or f.frame is None or not f.text.endswith("version)"):
            continue
        sender = f.text.split(" ", 1)[0]
        receiver = "server" if sender == "client" else "client"
        term = next((i for i in rep.fpdu_list if i.side == receiver and i.frame > f.frame
                     and i.opcode == Opcode.TERMINATE), None)
        end = ends.get(receiver)
        if term is not None:
            shown = f"the {receiver} sends a Terminate at frame {term.frame}"
        elif end is not None and end[0] > f.frame:
            shown = (f"the {receiver} sends no Terminate in the capture; its {end[1]} "
                     f"follows at frame {end[0]}")
        else:
            shown = f"the {receiver} sends no Terminate in the capture"
        f.text += f"; {shown}"


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
                f"expected 0x{want:08x}", rule="crc-mismatch")
        return
    info.crc = "bad"
    rep.add(info.frame, "error", f"{info.side} FPDU CRC32c 0x{value:08x} wrong, expected "
            f"0x{want:08x} (stored little-endian)", rule="crc-mismatch")


RTR_KINDS = {"read": ZERO_READ, "write": "zero-length RDMA Write", "send": "zero-length Send"}
"""What each RTR choice puts on the wire (RFC 6581 section 5): a zero-length message."""


def _check_rtr(rep: ConnectionReport, info: FpduInfo, op: str) -> None:
    # RFC 6581 section 5: the RTR is a zero-length RDMA Read, RDMA Write or Send; any
    # other first FPDU is not one, whatever the reply chose.
    chosen = rep.reply.rtr_names() if rep.reply is not None else []
    if op in RTR_KINDS.values():
        rep.rtr = f"frame {info.frame}: {op}"
    else:
        rep.rtr = (f"none: the first FPDU (frame {info.frame}) is a {op}, not a zero-length "
                   "RDMA Read, RDMA Write or Send")
    # A reply that chose several types (itself a finding of the negotiation) is answered
    # by any one of them.
    if chosen and op not in {RTR_KINDS.get(name) for name in chosen}:
        what = (f"the {chosen[0]} RTR" if len(chosen) == 1
                else f"the {' or '.join(chosen)} RTR")
        rep.add(info.frame, "error", f"first FPDU is {op}, but the reply chose {what} "
                "(RFC 6581 section 5)", rule="rtr-mismatch")


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
            _reread_terminate(rep, info)
            rep.add(info.frame, "warning", f"{info.side} sends a {info.what}")
            answered = answered_fpdu(rep, info)
            if answered is not None:
                info.answers = answered.frame
                rep.add(info.frame, "note", f"{info.side} Terminate quotes the DDP header "
                        f"of {answered_text(rep, answered)}")
            if info.layout_note:
                rep.add(info.frame, "note", f"{info.side} Terminate: {info.layout_note}")


@dataclass(slots=True)
class _OpenRead:
    """A Read Request still waiting for (the rest of) its Read Response."""

    request: FpduInfo
    size: int
    received: int = 0


def _reread_terminate(rep: ConnectionReport, info: FpduInfo) -> None:
    """Read a Terminate again knowing whether the peer had sent any FPDU before it
    (both sides' FPDUs are known only once both streams are cut)."""
    peer_sent = any(i.side != info.side and i.frame < info.frame for i in rep.fpdu_list)
    if peer_sent or not info.term_body:
        return
    text, info.layout_note = terminate_words(info.term_body, peer_sent=False)
    info.what = f"{OPCODE_NAMES[Opcode.TERMINATE]}: {text}"


def _unanswered_reads(rep: ConnectionReport) -> None:
    # RFC 5040 section 4.4/4.5: a Read Response is tagged with the Request's Data Sink
    # STag and TO; its segments place the Read's bytes at TO, TO + 1st length, ... and the
    # last one (L) completes the Request. Requests are answered in order (section 5.2), so
    # each Response segment goes to the oldest open Request of the other side whose sink
    # range it continues. Frame order, not side order: either side may read.
    pending: dict[str, list[_OpenRead]] = {"client": [], "server": []}
    for info in sorted(rep.fpdu_list, key=lambda i: i.frame):
        if info.opcode == Opcode.READ_REQUEST and info.qn is not None:
            pending[info.side].append(_OpenRead(info, info.read_size or 0))
        elif info.opcode == Opcode.READ_RESPONSE and info.stag is not None \
                and info.to is not None:
            other = "server" if info.side == "client" else "client"
            length = info.ulpdu_length - _TAGGED_HEADER
            for open_read in pending[other]:
                if _continues(open_read, info.stag, info.to, length):
                    open_read.received += length
                    if info.last:
                        pending[other].remove(open_read)
                        _short_response(rep, info, open_read)
                    break
    for side, requests in pending.items():
        for open_read in requests:
            req = open_read.request
            if side == "client" and req is _first_of(rep, side) \
                    and req.what == ZERO_READ:
                continue  # irdma's RTR (also after a v1 reply): answering it is optional
            got = (f" ({open_read.received} of {open_read.size} bytes answered)"
                   if open_read.received else "")
            rep.add(req.frame, "warning", f"{side} {req.what} (MSN {req.msn}, sink STag "
                    f"0x{req.stag or 0:x} TO 0x{req.to or 0:x}) never answered by a Read "
                    f"Response in the capture{got}")


def _continues(open_read: _OpenRead, stag: int, to: int, length: int) -> bool:
    """Does a Read Response segment (``stag``, ``to``, ``length`` bytes) carry the next
    bytes of this Read's sink buffer?"""
    req = open_read.request
    start = (req.to or 0) + open_read.received
    return (req.stag == stag and to == start
            and open_read.received + length <= open_read.size)


def _short_response(rep: ConnectionReport, last: FpduInfo, open_read: _OpenRead) -> None:
    if open_read.received != open_read.size:
        rep.add(last.frame, "warning", f"{last.side} Read Response for the Read Request "
                f"of frame {open_read.request.frame} ends after {open_read.received} of "
                f"{open_read.size} bytes (RFC 5040 section 4.5)")


def _first_of(rep: ConnectionReport, side: str) -> FpduInfo | None:
    return next((i for i in rep.fpdu_list if i.side == side), None)


def _msn_gaps(rep: ConnectionReport, side: str, from_start: bool) -> None:
    # RFC 5041 section 5.1: MSN starts at 1 on each queue and rises by one per message;
    # every segment of a message carries its MSN.
    last: dict[int, tuple[int, bool]] = {}  # qn -> (msn, last segment seen)
    next_mo: dict[int, int] = {}  # qn -> the MO the next segment of the message has
    prev_frame: dict[int, int] = {}  # qn -> the frame of the last segment seen
    for info in rep.fpdu_list:
        if info.side != side or info.qn is None or info.msn is None:
            continue
        prev = last.get(info.qn)
        if prev is not None and _resynced_before(rep, side, info.frame, prev_frame[info.qn]):
            prev = None  # messages may lie in the bytes the cut hid: no gap can be told
            from_start = False
        prev_frame[info.qn] = info.frame
        if prev is None:
            if from_start and info.msn != 1:
                rep.add(info.frame, "warning", f"{side} QN {info.qn} starts at MSN "
                        f"{info.msn}, not 1 (RFC 5041 section 5.1)", rule="msn-error")
        else:
            msn, done = prev
            want = (msn + 1) & 0xFFFFFFFF if done else msn
            if info.msn != want:
                missing = (info.msn - want) & 0xFFFFFFFF
                gap = (f"{missing} message{'s' if missing > 1 else ''} missing"
                       if done and 0 < missing < 0x80000000 else "out of order")
                rep.add(info.frame, "warning", f"{side} QN {info.qn} MSN {info.msn} "
                        f"after MSN {msn}: {gap} (RFC 5041 section 5.1)", rule="msn-error")
            elif not done and info.mo is not None and info.mo != next_mo.get(info.qn):
                # RFC 5041 section 4.4: MO is the offset of this segment's payload in
                # the message, so each segment continues where the last one ended.
                rep.add(info.frame, "warning", f"{side} QN {info.qn} MSN {info.msn} MO "
                        f"{info.mo}, expected {next_mo.get(info.qn)} after the previous "
                        "segment (RFC 5041 section 4.4)", rule="msn-error")
        last[info.qn] = (info.msn, bool(info.last))
        next_mo[info.qn] = (info.mo or 0) + max(info.ulpdu_length - _UNTAGGED_HEADER, 0)


def _resynced_before(rep: ConnectionReport, side: str, frame: int, prev: int) -> bool:
    """Whether ``side``'s FPDUs were read again after a cut between ``prev`` and
    ``frame`` (:func:`cut_fpdus`: what lay in the cut bytes is not known)."""
    return any(f.rule == "cut-capture" and f.text.startswith(f"{side}: the FPDU after")
               and f.frame is not None and prev < f.frame <= frame for f in rep.findings)
