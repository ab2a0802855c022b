"""RDMA Sends on DDP's untagged buffer model, as the RFCs lay them out: cutting a Send
into DDP segments whose FPDUs each fit one TCP segment (RFC 5044 section 4.1, RFC 5041
sections 4.4 and 5.1), and placing the segments of received Sends into the posted
receive buffers in MSN order (RFC 5041 sections 5.3 and 7.2, RFC 5040 section 5.1).

For stacks whose adapter or device moves the data and whose driver shows no more of it
than the RFC rules (qedr's firmware, erdma's device). A stack that has its own rules
(siw's receive path, cxgb4's firmware checks) keeps them.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from mpa_emu.wire import ddp

FPDU_OVERHEAD = 2 + ddp.UNTAGGED_HEADER_LEN + 4
"""ULPDU_Length, the untagged DDP/RDMAP header and the CRC field of a Send's FPDU."""

SEND_OPCODES = frozenset({ddp.Opcode.SEND, ddp.Opcode.SEND_INVALIDATE, ddp.Opcode.SEND_SE,
                          ddp.Opcode.SEND_SE_INVALIDATE})

# RFC 5041 section 7.2, untagged buffer errors (EType 2).
INVALID_QN = 0x01
INVALID_MSN_NO_BUFFER = 0x02
INVALID_MSN_RANGE = 0x03
INVALID_MO = 0x04
MESSAGE_TOO_LONG = 0x05

ERROR_NAMES = {INVALID_QN: "invalid QN", INVALID_MSN_NO_BUFFER: "invalid MSN - no buffer "
               "available", INVALID_MSN_RANGE: "invalid MSN - MSN range",
               INVALID_MO: "invalid MO", MESSAGE_TOO_LONG: "DDP message too long for "
               "available buffer"}
"""The untagged buffer error codes of RFC 5041 section 7.2, by their RFC wording."""


def send_room(mss: int) -> int:
    """Payload bytes per Send segment so that its FPDU fills at most one TCP segment of
    ``mss`` bytes: ``mss`` less :data:`FPDU_OVERHEAD`, rounded down to a multiple of 4
    (then 2 + 18 + payload needs no pad, RFC 5044 section 4.1); at least 4."""
    room = max(4, mss - FPDU_OVERHEAD)
    return room - room % 4


def send_segments(payload: bytes, msn: int, room: int) -> list[bytes]:
    """The DDP segments (ULPDUs) of one Send message: QN 0, the message's MSN, MO the
    offset of each piece, L on the last (RFC 5041 section 4.4); a zero-length Send is one
    segment."""
    if room <= 0:
        raise ddp.DdpFormatError(f"a Send segment needs room for data, got {room}")
    out = []
    pos = 0
    while True:
        piece = payload[pos:pos + room]
        last = pos + room >= len(payload)
        out.append(ddp.send(piece, msn, pos, last=last))
        pos += len(piece)
        if last:
            return out


@dataclass(frozen=True, slots=True)
class Placement:
    """What one Send segment did: ``message`` is the whole Send once its last segment is
    placed (None before); ``error`` the RFC 5041 section 7.2 code of a segment that could
    not be placed (0: placed)."""

    message: bytes | None = None
    error: int = 0

    @property
    def reason(self) -> str:
        """The error in the RFC's words ("" when placed)."""
        return ERROR_NAMES.get(self.error, "")


@dataclass(slots=True)
class SendReceiver:
    """Queue 0 of an untagged receiver: the posted receive buffers (their lengths, oldest
    first), the MSN the next Send must carry (1 for the first, RFC 5041 section 5.1) and
    the Send being placed."""

    recvq: deque[int] = field(default_factory=deque)
    msn: int = 1
    partial: bytearray | None = None
    room: int = 0

    def place(self, head: ddp.UntaggedHeader, payload: bytes) -> Placement:
        """Place one Send segment: a new message takes the oldest posted buffer; the
        segment's QN, MSN and MO must be the ones expected and its data must fit."""
        if head.qn != ddp.QN_SEND:
            return Placement(error=INVALID_QN)
        if head.msn != self.msn:
            return Placement(error=INVALID_MSN_RANGE)
        if self.partial is None:
            if not self.recvq:
                return Placement(error=INVALID_MSN_NO_BUFFER)
            if head.mo != 0:
                return Placement(error=INVALID_MO)
            self.room = self.recvq.popleft()
            self.partial = bytearray()
        elif head.mo != len(self.partial):
            return Placement(error=INVALID_MO)
        if len(self.partial) + len(payload) > self.room:
            return Placement(error=MESSAGE_TOO_LONG)
        self.partial += payload
        if not head.last:
            return Placement()
        message, self.partial = bytes(self.partial), None
        self.msn += 1
        return Placement(message=message)
