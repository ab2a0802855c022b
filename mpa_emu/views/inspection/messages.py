"""FPDUs grouped into the messages they carry, and the FPDU a Terminate answers.

A message is what the application posted: an untagged one is every DDP segment with the
same QN and MSN up to the one with L set (RFC 5041 section 5.1, MO the offset of each
segment's payload); a tagged one the segments to one STag whose TO continues the last, up
to L (section 5.2). A Terminate quotes the DDP header of the segment it answers
(RFC 5040 section 4.8: the DDP Segment Length, then the header, when D is set), which
names that segment: untagged by QN, MSN and MO, tagged by STag and TO.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from mpa_emu.views.inspection.report import ConnectionReport, FpduInfo, MessageInfo
from mpa_emu.wire.ddp import OPCODE_NAMES

UNTAGGED_HEADER = 18  # control (2), RsvdULP (4), QN, MSN, MO: RFC 5041 section 4.4
TAGGED_HEADER = 14  # control (2), STag (4), TO (8): RFC 5041 section 4.3
_TAGGED = 0x80


def payload_length(info: FpduInfo) -> int:
    """The bytes of ULP payload a DDP segment carries (its ULPDU less its DDP header)."""
    header = UNTAGGED_HEADER if info.qn is not None else TAGGED_HEADER
    return max(info.ulpdu_length - header, 0)


def group_messages(fpdus: list[FpduInfo], side: str) -> list[MessageInfo]:
    """``side``'s FPDUs (in frame order) as messages, in the order they began."""
    out: list[MessageInfo] = []
    open_: dict[tuple[object, ...], MessageInfo] = {}
    for info in fpdus:
        if info.side != side:
            continue
        name = OPCODE_NAMES.get(info.opcode or 0, f"RDMAP opcode {info.opcode}") \
            if info.opcode is not None else "short DDP segment"
        key: tuple[object, ...] | None
        if info.qn is not None and info.msn is not None:
            key = ("untagged", info.qn, info.msn)
        elif info.stag is not None and info.to is not None:
            key = ("tagged", info.stag, info.opcode)
        else:
            key = None
        msg = open_.get(key) if key is not None else None
        if msg is not None and key is not None and key[0] == "tagged" \
                and info.to != msg.next_offset:
            msg = None  # a new message to the same STag, not this one's next bytes
        if msg is None:
            msg = MessageInfo(side=side, opcode=info.opcode, name=name,
                              label=info.what.split(":")[0], qn=info.qn, msn=info.msn,
                              stag=info.stag, first_frame=info.frame,
                              last_frame=info.frame, bytes=0, segments=0,
                              next_offset=info.to or 0)
            out.append(msg)
            if key is not None:
                open_[key] = msg
        msg.segments += 1
        msg.frames.append(info.frame)
        msg.last_frame = info.frame
        msg.bytes += payload_length(info)
        msg.cut = msg.cut or info.cut
        if info.stag is not None and info.qn is None and info.to is not None:
            msg.next_offset = info.to + payload_length(info)
        if info.last:
            msg.complete = True
            if key is not None:
                open_.pop(key, None)
    return out


def message_label(m: MessageInfo) -> str:
    """How the summary names a message: a one-segment message as its FPDU reads
    (``Send (120 bytes)``), a longer one with its size and segment count."""
    if m.segments == 1 and m.complete:
        return m.label
    tail = "" if m.complete else ", no last segment in the capture"
    return f"{m.name} ({m.bytes} bytes in {m.segments} segment{'s' * (m.segments > 1)}{tail})"


def summary(messages: list[MessageInfo]) -> str:
    """``23 Send (120 bytes), 1 Send (7736 bytes in 6 segments)``: equal labels counted."""
    counts: dict[str, int] = {}
    for m in messages:
        label = message_label(m)
        counts[label] = counts.get(label, 0) + 1
    return ", ".join(f"{n} {label}" for label, n in counts.items())


@dataclass(frozen=True, slots=True)
class Quoted:
    """The DDP header a Terminate quotes."""

    tagged: bool
    qn: int | None = None
    msn: int | None = None
    mo: int | None = None
    stag: int | None = None
    to: int | None = None

    def text(self) -> str:
        """``QN 0 MSN 25 MO 7120`` or ``STag 0x5a5a TO 0x10000``."""
        if self.tagged:
            return f"STag 0x{self.stag or 0:x} TO 0x{self.to or 0:x}"
        return f"QN {self.qn} MSN {self.msn} MO {self.mo}"


def quoted_header(term_body: bytes) -> Quoted | None:
    """The DDP header quoted after a Terminate's control word (RFC 5040 section 4.8:
    DDP Segment Length, 2 bytes, then the header), or None when none is quoted."""
    quoted = term_body[4:]
    if len(quoted) < 2 + TAGGED_HEADER:
        return None
    header = quoted[2:]
    if header[0] & _TAGGED:
        stag, to = struct.unpack_from("!IQ", header, 2)
        return Quoted(True, stag=stag, to=to)
    if len(header) < UNTAGGED_HEADER:
        return None
    qn, msn, mo = struct.unpack_from("!III", header, 6)
    return Quoted(False, qn=qn, msn=msn, mo=mo)


def answered_fpdu(rep: ConnectionReport, term: FpduInfo) -> FpduInfo | None:
    """The peer's FPDU, before the Terminate, whose DDP header the Terminate quotes (the
    latest one when a header repeats)."""
    q = quoted_header(term.term_body)
    if q is None:
        return None
    for info in reversed(rep.fpdu_list):
        if info.side == term.side or info.frame > term.frame:
            continue
        if q.tagged and info.qn is None and (info.stag, info.to) == (q.stag, q.to):
            return info
        if not q.tagged and (info.qn, info.msn, info.mo) == (q.qn, q.msn, q.mo):
            return info
    return None


def message_of(rep: ConnectionReport, info: FpduInfo) -> tuple[MessageInfo, int] | None:
    """The message ``info`` belongs to and its place in it (1 for the first segment)."""
    for m in rep.messages:
        if m.side == info.side and info.frame in m.frames \
                and (m.qn, m.msn) == (info.qn, info.msn) \
                and (info.qn is not None or m.stag == info.stag):
            return m, m.frames.index(info.frame) + 1
    return None


def answered_text(rep: ConnectionReport, info: FpduInfo) -> str:
    """``frame 82 (the client's Send, QN 0 MSN 25 MO 7120: segment 6 of 12 of a 16520-byte
    Send that began at frame 77)``."""
    where = (f"QN {info.qn} MSN {info.msn} MO {info.mo}" if info.qn is not None
             else f"STag 0x{info.stag or 0:x} TO 0x{info.to or 0:x}")
    name = OPCODE_NAMES.get(info.opcode or 0, "FPDU") if info.opcode is not None else "FPDU"
    found = message_of(rep, info)
    if found is None or found[0].segments == 1:
        return f"frame {info.frame} (the {info.side}'s {name}, {where})"
    m, place = found
    return (f"frame {info.frame} (the {info.side}'s {name}, {where}: segment {place} of "
            f"{m.segments} of a {m.bytes}-byte {m.name} that began at frame {m.first_frame})")

