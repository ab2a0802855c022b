"""The Send messages of one side's FPDU stream, reassembled from their DDP segments.

A Send (RDMAP opcodes 3 to 6, RFC 5040 section 4.2) travels on untagged queue 0 as one or
more DDP segments with the same MSN, placed at MO 0, 1st segment's length, ...; the last
has L set (RFC 5041 section 4.4 and 5.1). A message's length is the sum of its segments'
payloads; its opening bytes (the upper protocol's header) come from the MO 0 segment on.
The FPDUs are cut from the byte stream as RFC 5044 section 4.1 frames them
(ULPDU_LENGTH, ULPDU, pad to 4 bytes, CRC), once per connection inspect recognises an
upper protocol on.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from mpa_emu.wire.sends import sends_of_segments as sends_of_segments

HEAD_BYTES = 2048
"""How much of each message is kept for decoding (an NVMe connect capsule is 1,088)."""
SEND_OPCODES = frozenset({3, 4, 5, 6})
"""RDMAP Send, Send with Invalidate, Send with SE, Send with SE and Invalidate."""
INVALIDATE_OPCODES = frozenset({4, 6})
_UNTAGGED_HEADER = 18  # RFC 5041 section 4.4: control, RsvdULP, QN, MSN, MO
_TAGGED = 0x80
_LAST = 0x40

Stream = list[tuple[int, int, bytes]]
"""(frame, stream offset, bytes) as inspect keeps a side's payload."""


@dataclass(slots=True)
class SendMessage:
    """One Send message of one side: where it starts and ends, its MSN, opcode, length,
    segment count and opening bytes."""

    side: str
    frame: int
    last_frame: int
    msn: int
    opcode: int
    size: int
    segments: int
    head: bytes
    complete: bool


FIRST_FPDU_BYTES = 2 + 0xFFFF + 3 + 4
"""The most one FPDU can take (RFC 5044 section 4.1: a 16-bit ULPDU_LENGTH, pad, CRC)."""


def _fpdus(stream: Stream, start: int,
           cap: int | None = None) -> Iterator[tuple[int, bytes]]:
    """(frame of the FPDU's first byte, ULPDU) of each whole FPDU after ``start``
    (within the first ``cap`` bytes after it, when given)."""
    data = bytearray()
    frames: list[tuple[int, int]] = []  # (offset in data, frame)
    for frame, off, chunk in stream:
        end = off + len(chunk)
        if end <= start:
            continue
        if cap is not None and len(data) >= cap:
            break
        lo = max(start - off, 0)
        frames.append((len(data), frame))
        data += chunk[lo:]
    pos, index = 0, 0
    while pos + 2 <= len(data):
        (ulen,) = struct.unpack_from("!H", data, pos)
        wire = 2 + ulen + (-(2 + ulen) % 4) + 4
        if pos + wire > len(data):
            return
        while index + 1 < len(frames) and frames[index + 1][0] <= pos:
            index += 1
        yield frames[index][1], bytes(data[pos + 2:pos + 2 + ulen])
        pos += wire


def first_send(stream: Stream, start: int) -> bytes | None:
    """The opening bytes of ``stream``'s first Send after ``start`` (its first segment's
    payload, when the first Send segment is among the first FPDUs), read cheaply: only
    as many bytes as the first FPDU can take."""
    for _, ulpdu in _fpdus(stream, start, FIRST_FPDU_BYTES):
        if len(ulpdu) >= _UNTAGGED_HEADER and not ulpdu[0] & _TAGGED \
                and ulpdu[1] & 0x0F in SEND_OPCODES:
            return ulpdu[_UNTAGGED_HEADER:_UNTAGGED_HEADER + HEAD_BYTES]
    return None


def send_messages(stream: Stream, start: int, side: str) -> list[SendMessage]:
    """Every Send message of ``side`` whose segments follow ``start`` (the end of its
    MPA frame), in the order their first segments came."""
    out: list[SendMessage] = []
    open_: dict[int, SendMessage] = {}
    for frame, ulpdu in _fpdus(stream, start):
        if len(ulpdu) < _UNTAGGED_HEADER or ulpdu[0] & _TAGGED:
            continue
        opcode = ulpdu[1] & 0x0F
        if opcode not in SEND_OPCODES:
            continue
        qn, msn, mo = struct.unpack_from("!III", ulpdu, 6)
        if qn != 0:
            continue
        body = ulpdu[_UNTAGGED_HEADER:]
        msg = open_.get(msn)
        if msg is None:
            msg = SendMessage(side, frame, frame, msn, opcode, 0, 0, b"", False)
            open_[msn] = msg
            out.append(msg)
        msg.last_frame = frame
        msg.segments += 1
        msg.size = max(msg.size, mo + len(body))
        if mo <= len(msg.head) < HEAD_BYTES:
            msg.head = (msg.head[:mo] + body)[:HEAD_BYTES]
        if ulpdu[0] & _LAST:
            msg.complete = True
            del open_[msn]
    return out


