"""The small records an :class:`~mpa_emu.stacks.irdma.offload.qp.OffloadedQp` keeps: the context it
is made from (:class:`QpInit`) and the part of it connections share (:class:`QpLink`),
a segment waiting for its ACK, an AEQE, the counters of its untagged queues and of what it sent
(shared by every QP with the same values), and the busy part of the QP that exists only
while the connection has something queued, in flight, buffered or unread."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Final, NamedTuple

from mpa_emu.stacks.irdma.offload.states import (
    AE_RTS,
    QPS_RTS,
    TCP_ESTABLISHED,
    Ae,
    IwarpState,
    TcpState,
)
from mpa_emu.wire.interning import shared
from mpa_emu.wire.segment import FIN, SYN

MSN_MOD: Final = 1 << 32
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


NO_AE: Final = AeRecord(None, TCP_ESTABLISHED, QPS_RTS, None)
"""The AE record before any AE: the states a QP starts in."""
RTS_AE: Final = AeRecord(AE_RTS, TCP_ESTABLISHED, QPS_RTS, None)
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


FIRST_RECV: Final = RecvExpect((1, 1, 1), (0, 0, 0))
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


NO_SENDS: Final = SendCounts(0, 0)
"""A new QP's counts."""


@dataclass(slots=True, unsafe_hash=True)
class QpInit:
    """What ``irdma_init_tcp_ctx`` and ``irdma_cm_init_tsa_conn`` put into the
    QP context: the hardware continues from exactly these numbers."""

    conn: int
    active: bool
    gen: int
    local_mac: bytes
    remote_mac: bytes
    local_ip: bytes
    remote_ip: bytes
    local_port: int
    remote_port: int
    vlan: int | None
    pcp: int
    tos: int
    ttl: int
    snd_nxt: int
    rcv_nxt: int
    snd_wnd: int
    snd_wscale: int
    rcv_wscale: int
    mss: int
    rtr_op: str
    ird: int
    ord: int
    mpa_rev: int
    crc: bool
    snd_markers: bool
    rcv_markers: bool

    def __init__(self, conn: int, active: bool, gen: int, local_mac: bytes, remote_mac: bytes,
                 local_ip: bytes, remote_ip: bytes, local_port: int, remote_port: int,
                 vlan: int | None, pcp: int, tos: int, ttl: int, snd_nxt: int, rcv_nxt: int,
                 snd_wnd: int, snd_wscale: int, rcv_wscale: int, mss: int, rtr_op: str, ird: int,
                 ord: int, mpa_rev: int, crc: bool, snd_markers: bool, rcv_markers: bool) -> None:
        self.conn = conn
        self.active = active
        self.gen = gen
        self.local_mac = local_mac
        self.remote_mac = remote_mac
        self.local_ip = local_ip
        self.remote_ip = remote_ip
        self.local_port = local_port
        self.remote_port = remote_port
        self.vlan = vlan
        self.pcp = pcp
        self.tos = tos
        self.ttl = ttl
        self.snd_nxt = snd_nxt
        self.rcv_nxt = rcv_nxt
        self.snd_wnd = snd_wnd
        self.snd_wscale = snd_wscale
        self.rcv_wscale = rcv_wscale
        self.mss = mss
        self.rtr_op = rtr_op
        self.ird = ird
        self.ord = ord
        self.mpa_rev = mpa_rev
        self.crc = crc
        self.snd_markers = snd_markers
        self.rcv_markers = rcv_markers


@dataclass(slots=True, unsafe_hash=True)
class QpLink:
    """The part of a QP's context (:class:`QpInit`) that connections between the same two
    addresses with the same settings have in common: one shared record for all of them
    (:func:`shared_link`), so that 100,000 QPs between two hosts hold one copy. A value,
    never changed once made."""

    gen: int
    local_mac: bytes
    remote_mac: bytes
    local_ip: bytes
    remote_ip: bytes
    vlan: int | None
    pcp: int
    tos: int
    ttl: int
    snd_wnd: int
    snd_wscale: int
    rcv_wscale: int
    mss: int
    rtr_op: str
    ird: int
    ord: int
    mpa_rev: int
    crc: bool
    snd_markers: bool
    rcv_markers: bool

    def __init__(self, gen: int, local_mac: bytes, remote_mac: bytes, local_ip: bytes,
                 remote_ip: bytes, vlan: int | None, pcp: int, tos: int, ttl: int,
                 snd_wnd: int, snd_wscale: int, rcv_wscale: int, mss: int, rtr_op: str,
                 ird: int, ord: int, mpa_rev: int, crc: bool, snd_markers: bool,
                 rcv_markers: bool) -> None:
        self.gen = gen
        self.local_mac = local_mac
        self.remote_mac = remote_mac
        self.local_ip = local_ip
        self.remote_ip = remote_ip
        self.vlan = vlan
        self.pcp = pcp
        self.tos = tos
        self.ttl = ttl
        self.snd_wnd = snd_wnd
        self.snd_wscale = snd_wscale
        self.rcv_wscale = rcv_wscale
        self.mss = mss
        self.rtr_op = rtr_op
        self.ird = ird
        self.ord = ord
        self.mpa_rev = mpa_rev
        self.crc = crc
        self.snd_markers = snd_markers
        self.rcv_markers = rcv_markers


_LINKS: Final[dict[tuple[object, ...], QpLink]] = {}
_LINKS_MAX: Final = 4096
"""Distinct links kept for reuse; past this many the table starts over."""


def shared_link(init: QpInit) -> QpLink:
    """The shared :class:`QpLink` of ``init``: found by its values (a plain tuple hashes
    and compares in C, the record's dataclass methods would run interpreted), made on
    the first QP that has them."""
    values = (init.gen, init.local_mac, init.remote_mac, init.local_ip, init.remote_ip,
              init.vlan, init.pcp, init.tos, init.ttl, init.snd_wnd, init.snd_wscale,
              init.rcv_wscale, init.mss, init.rtr_op, init.ird, init.ord, init.mpa_rev, init.crc,
              init.snd_markers, init.rcv_markers)
    link = _LINKS.get(values)
    if link is None:
        if len(_LINKS) >= _LINKS_MAX:
            _LINKS.clear()
        link = _LINKS[values] = QpLink(*values)
    return link
