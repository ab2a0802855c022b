"""A hand-made TCP/MPA peer for the audit tests: one ``CmCore`` is driven with segments
built here from the byte layouts of RFC 5044 section 7.1, RFC 6581 section 5 and RFC 9293 section
3.1 (as irdma_form_ah_cm_frame and irdma_send_syn fill them), never
from the emulator's own builders, so the tests compare the core against the spec."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from mpa_emu.stacks.contract.events import Upcall
from mpa_emu.stacks.contract.trace import Trace
from mpa_emu.stacks.irdma.config import CmConfig
from mpa_emu.stacks.irdma.core import CmCore

from mpa_emu.wire.segment import ACK, SYN, Segment

MAC_H = bytes.fromhex("02000000aa01")
MAC_X = bytes.fromhex("02000000bb02")
IP_H = bytes([192, 168, 7, 1])
IP_X = bytes([192, 168, 7, 2])
IP6_H = bytes.fromhex("fd00000000000000000000000000aa01")
IP6_X = bytes.fromhex("fd00000000000000000000000000bb02")
LPORT = 4791
XPORT = 40000
MS = 1_000_000
S_NS = 1_000_000_000

KEY_REQ = b"MPA ID Req Frame"
KEY_REP = b"MPA ID Rep Frame"
SYN_OPTS_1460 = bytes.fromhex("020405b4") + bytes.fromhex("030302") + b"\x00"


def mpa_frame(*, key: bytes, rev: int, flags: int, pdata: bytes = b"",
              rtr: tuple[int, int] | None = None, pd_length: int | None = None) -> bytes:
    """An MPA request/reply laid out as RFC 5044 section 7.1: key, flags, rev, PD_Length (BE), then
    for v2 the two RTR words (BE) counted in PD_Length, then the private data."""
    block = b"" if rtr is None else struct.pack("!HH", *rtr)
    if pd_length is None:
        pd_length = len(block) + len(pdata)
    return key + struct.pack("!BBH", flags, rev, pd_length) + block + pdata


def v2_request(pdata: bytes = b"", *, ird: int = 16, ord_: int = 16, p2p: bool = True,
               read: bool = True, write: bool = True) -> bytes:
    """What an irdma-like initiator sends: flags C|S (0x50), P2P, both RTR bits."""
    ctrl_ird = ird | (0x8000 if p2p else 0)
    ctrl_ord = ord_ | (0x4000 if read else 0) | (0x8000 if write else 0)
    return mpa_frame(key=KEY_REQ, rev=2, flags=0x50, pdata=pdata, rtr=(ctrl_ird, ctrl_ord))


def v1_request(pdata: bytes = b"") -> bytes:
    return mpa_frame(key=KEY_REQ, rev=1, flags=0x40, pdata=pdata)


def v2_reply(pdata: bytes = b"", *, ird: int = 16, ord_: int = 16, read: bool = True,
             write: bool = False, reject: bool = False, p2p: bool = True) -> bytes:
    ctrl_ird = ird | (0x8000 if p2p else 0)
    ctrl_ord = ord_ | (0x4000 if read else 0) | (0x8000 if write else 0)
    return mpa_frame(key=KEY_REP, rev=2, flags=0x50 | (0x20 if reject else 0), pdata=pdata,
                     rtr=(ctrl_ird, ctrl_ord))


@dataclass
class Peer:
    """The emulated host ``core`` (address ``IP_H``) and a scripted remote ``IP_X``."""

    core: CmCore
    ipv6: bool = False
    now: int = 0
    sent: list[Segment] = field(default_factory=list)
    """Every frame the core put out, in order (drained after each step)."""
    ups: list[Upcall] = field(default_factory=list)

    @property
    def ip_h(self) -> bytes:
        return IP6_H if self.ipv6 else IP_H

    @property
    def ip_x(self) -> bytes:
        return IP6_X if self.ipv6 else IP_X

    def drain(self) -> list[Segment]:
        out = [tx.segment for tx in self.core.frames_to_send()]
        self.sent += out
        while (up := self.core.next_event()) is not None:
            self.ups.append(up)
        return out

    def seg(self, *, flags: int, seq: int, ack: int = 0, payload: bytes = b"",
            options: bytes = b"", window: int = 65535, sport: int = XPORT,
            dport: int = LPORT, vlan: int | None = None, tos: int = 0,
            pcp: int = 0) -> Segment:
        return Segment(src_mac=MAC_X, dst_mac=MAC_H, src_ip=self.ip_x, dst_ip=self.ip_h,
                       sport=sport, dport=dport, seq=seq & 0xFFFFFFFF,
                       ack=ack & 0xFFFFFFFF, flags=flags, window=window, options=options,
                       payload=payload, vlan=vlan, tos=tos, pcp=pcp)

    def send(self, seg: Segment) -> list[Segment]:
        """Deliver ``seg`` to the core now; return what the core sent in reaction."""
        self.core.receive(seg, self.now)
        return self.drain()

    def at(self, t_ns: int) -> list[tuple[int, Segment]]:
        """Fire the core's timers up to ``t_ns``; every frame with its send time."""
        out: list[tuple[int, Segment]] = []
        while (t := self.core.get_timer()) is not None and t <= t_ns:
            self.now = max(self.now, t)
            self.core.handle_timer(t)
            out += [(t, s) for s in self.drain()]
        self.now = max(self.now, t_ns)
        return out

    def run_out(self, limit_ns: int = 4000 * S_NS) -> list[tuple[int, Segment]]:
        return self.at(limit_ns)


def make_host(cfg: CmConfig | None = None, *, ipv6: bool = False, seed: int = 7,
              vlan: int | None = None) -> Peer:
    core = CmCore("H", MAC_H, cfg or CmConfig(), seed=seed, trace=Trace())
    peer = Peer(core, ipv6)
    core.add_address(peer.ip_h, vlan=vlan)
    core.set_neighbour(peer.ip_x, MAC_X)
    return peer


@dataclass
class Passive:
    """The host listening on ``LPORT``; the scripted peer opens from ``sport``."""

    p: Peer
    listener: int
    isn_x: int = 1000
    isn_h: int = 0
    sport: int = XPORT
    synack: Segment | None = None

    def syn(self, options: bytes = SYN_OPTS_1460, **kw: object) -> list[Segment]:
        out = self.p.send(self.p.seg(flags=SYN, seq=self.isn_x, options=options,
                                     sport=self.sport, **kw))  # type: ignore[arg-type]
        for s in out:
            if s.flags == SYN | ACK:
                self.synack = s
                self.isn_h = s.seq
        return out

    def ack(self, payload: bytes = b"", *, extra: int = 0, seq_off: int = 0,
            ack_off: int = 0, **kw: object) -> list[Segment]:
        """The third ACK (plus ``payload`` and ``extra`` flags)."""
        return self.p.send(self.p.seg(flags=ACK | extra, seq=self.isn_x + 1 + seq_off,
                                      ack=self.isn_h + 1 + ack_off, payload=payload,
                                      sport=self.sport, **kw))  # type: ignore[arg-type]

    def conn(self) -> int:
        """The connection id of the CONNECT_REQUEST upcall (the latest)."""
        return self.p.ups[-1].conn


def listen(p: Peer, *, backlog: int = 16, ip: bytes | None = None, port: int = LPORT) -> int:
    return p.core.create_listen(p.ip_h if ip is None else ip, port, backlog=backlog,
                                ipv6=p.ipv6, now_ns=p.now)


def handshake(p: Peer, request: bytes, *, sport: int = XPORT, backlog: int = 16,
              listener: int | None = None) -> Passive:
    """Listen (unless ``listener``), SYN, third ACK carrying ``request``."""
    lid = listen(p, backlog=backlog) if listener is None else listener
    pas = Passive(p, lid, sport=sport, isn_x=1000 if sport == XPORT else 1000 + sport)
    pas.syn()
    assert pas.synack is not None
    pas.ack(request)
    return pas


def listener_destroyed_gen1(ah_latency_ns: int = 5 * MS) -> tuple[Peer, int]:
    """GEN_1 with a qhash latency: a peer's SYN, then the listener destroyed before the
    qhash completion sends the SYN-ACK (irdma_form_ah_cm_frame, irdma_send_syn_cqp_callback). The
    host (the listener's RST not
    yet drained) and the node's conn."""
    p = make_host(CmConfig(gen=1, ah_latency_ns=ah_latency_ns))
    listen(p)
    Passive(p, 1).syn()
    [conn] = p.core.conns()
    p.core.destroy_listen(1, now_ns=p.now)
    return p, conn


def reject_request(p: Peer, conn: int) -> tuple[Segment, int]:
    """The application rejects ``conn`` (MPAREQ_RCVD -> FIN_WAIT1): the one segment that
    sends (ACK|FIN carrying the reject reply) and the sequence number after its FIN."""
    p.core.reject(conn, now_ns=p.now)
    [rej] = p.drain()
    return rej, rej.seq + len(rej.payload) + 1


@dataclass
class Active:
    """The host connecting to the scripted peer at ``IP_X:LPORT``."""

    p: Peer
    conn: int
    isn_h: int
    syn_seg: Segment
    isn_x: int = 5000

    def synack(self, options: bytes = SYN_OPTS_1460, ack_off: int = 0) -> list[Segment]:
        s = self.syn_seg
        return self.p.send(self.p.seg(flags=SYN | ACK, seq=self.isn_x,
                                      ack=self.isn_h + 1 + ack_off, options=options,
                                      sport=s.dport, dport=s.sport))

    def to_core(self, *, flags: int, seq_off: int = 1, ack: int, payload: bytes = b"",
                options: bytes = b"") -> list[Segment]:
        s = self.syn_seg
        return self.p.send(self.p.seg(flags=flags, seq=self.isn_x + seq_off, ack=ack,
                                      payload=payload, options=options, sport=s.dport,
                                      dport=s.sport))


def connect(p: Peer, pdata: bytes = b"", *, ird: int = 16, ord_: int = 16) -> Active:
    conn = p.core.connect(p.ip_h, p.ip_x, LPORT, private_data=pdata, ird=ird, ord=ord_,
                          now_ns=p.now)
    [syn] = p.drain()
    assert syn.flags == SYN
    return Active(p, conn, syn.seq, syn)


def to_mpareq_sent(p: Peer, pdata: bytes = b"", **kw: int) -> tuple[Active, Segment]:
    """connect + SYN-ACK; returns the MPA request the core sent."""
    a = connect(p, pdata, **kw)
    out = a.synack()
    assert [s.flags for s in out] == [ACK, ACK]
    return a, out[1]
