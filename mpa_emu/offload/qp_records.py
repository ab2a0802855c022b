"""The small records an :class:`~mpa_emu.offload.qp.OffloadedQp` keeps: a segment
waiting for its ACK, an AEQE, the counters of its untagged queues and of what it sent
(shared by every QP with the same values), and the busy part of the QP that exists only
while the connection has something queued, in flight, buffered or unread."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import NamedTuple

from mpa_emu.offload.states import Ae, IwarpState, TcpState
from mpa_emu.wire.interning import shared
from mpa_emu.wire.segment import FIN, SYN

MSN_MOD = 1 << 32
"""MSNs and message offsets are 32-bit and wrap (RFC 5041 section 5.1)."""


@dataclass(slots=True)
class Unacked:
    """One transmitted segment still waiting for its acknowledgement."""

    seq: int
    flags: int
    payload: bytes
    comment: str

    @property
    def seq_len(self) -> int:
        """Sequence space the segment takes (SYN and FIN count one)."""
        return len(self.payload) + (1 if self.flags & (FIN | SYN) else 0)


class AeRecord:
    """One AEQE: the AE, the TCP and iWARP states reported with it, the q2 frame. An
    object rather than a tuple so that the compiled build keeps a reference to a
    shared record in the QP, not the four fields unboxed."""

    __slots__ = ("ae", "frame", "iwarp", "tcp")

    def __init__(self, ae: Ae | None, tcp: TcpState, iwarp: IwarpState,
                 frame: bytes | None) -> None:
        self.ae = ae
        self.tcp = tcp
        self.iwarp = iwarp
        self.frame = frame


NO_AE = AeRecord(None, TcpState.ESTABLISHED, IwarpState.RTS, None)
"""The AE record before any AE: the states a QP starts in."""
RTS_AE = AeRecord(Ae.RTS, TcpState.ESTABLISHED, IwarpState.RTS, None)
"""The record of the RTS AE of an established QP, the last AE of most QPs: shared."""


class Busy:
    """The part of a QP that holds something only while the connection is busy: sends
    waiting for the window, segments waiting for their ACK and their retransmission
    timer, bytes of an incomplete FPDU, AEs the driver has not taken yet, Read
    Responses to send with the next ACK. An idle established QP has none of these, so
    the QP keeps this record only while one of them is set (``OffloadedQp._busy``)."""

    __slots__ = ("aes", "pending", "read_responses", "retries", "rexmit_at", "rx_buffer",
                 "unacked")

    def __init__(self) -> None:
        self.pending: deque[tuple[bytes, str]] | None = None
        self.unacked: deque[Unacked] | None = None
        # The RTO is the initial RTO << retries: it doubles with each retransmission.
        # Both are meaningful only while ``unacked`` holds a segment.
        self.retries = 0
        self.rexmit_at = 0
        self.rx_buffer: bytearray | None = None
        self.aes: deque[AeRecord] | None = None
        self.read_responses = 0

    def idle(self) -> bool:
        """Nothing queued, unacknowledged, buffered or unread: the QP can drop it."""
        return (self.unacked is None and self.pending is None and self.aes is None
                and self.rx_buffer is None and not self.read_responses)



class RecvExpect(NamedTuple):
    """What each untagged queue (Send, Read Request, Terminate: RFC 5041 section 5.1)
    expects next: the MSN of the next message and the offset within it. One shared
    record, replaced on each message by another shared one, so that the many QPs that
    received the same messages share it."""

    msn: tuple[int, int, int]
    mo: tuple[int, int, int]

    def after(self, qn: int, last: bool, length: int) -> RecvExpect:
        """The record after a segment of ``length`` bytes on queue ``qn``: the next
        message from offset 0 when it was the ``last`` of its message, else the same
        message further on."""
        msn, mo = list(self.msn), list(self.mo)
        if last:
            msn[qn] = (msn[qn] + 1) % MSN_MOD
            mo[qn] = 0
        else:
            mo[qn] = (mo[qn] + length) % MSN_MOD
        return shared(RecvExpect((msn[0], msn[1], msn[2]), (mo[0], mo[1], mo[2])))


FIRST_RECV = RecvExpect((1, 1, 1), (0, 0, 0))
"""Before any message: the first message on each queue has MSN 1 (RFC 5041 section
5.1), at offset 0."""


class SendCounts(NamedTuple):
    """The last MSN the QP sent on its Send queue (RFC 5041 section 5.1) and how many
    segments it retransmitted: shared by every QP with the same counts."""

    msn: int
    retransmissions: int

    def next_message(self) -> SendCounts:
        """The counts after one more Send message (its MSN is the new ``msn``)."""
        return shared(SendCounts((self.msn + 1) % MSN_MOD, self.retransmissions))

    def retransmitted(self) -> SendCounts:
        """The counts after one more retransmission."""
        return shared(SendCounts(self.msn, self.retransmissions + 1))


NO_SENDS = SendCounts(0, 0)
"""A new QP's counts."""
