"""The small records an :class:`~mpa_emu.offload.qp.OffloadedQp` keeps: a segment
waiting for its ACK, an AEQE, and the busy part of the QP that exists only while the
connection has something queued, in flight, buffered or unread."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from mpa_emu.offload.states import Ae, IwarpState, TcpState
from mpa_emu.wire.segment import FIN, SYN


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

