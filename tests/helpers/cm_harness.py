"""Test harness: two CM cores joined by a tiny in-test wire (no net module): frames are delivered at
the current virtual time, optionally dropped or rewritten by a test hook."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from mpa_emu.stacks.contract.events import Transmit, Upcall
from mpa_emu.stacks.contract.trace import Trace
from mpa_emu.stacks.irdma.config import CmConfig
from mpa_emu.stacks.irdma.core import CmCore

from mpa_emu.wire.segment import SYN, Segment

MAC_A = bytes.fromhex("020000000001")
MAC_P = bytes.fromhex("020000000002")
IP_A = bytes([10, 0, 0, 1])
IP_P = bytes([10, 0, 0, 2])
IP6_A = bytes.fromhex("fd000000000000000000000000000001")
IP6_P = bytes.fromhex("fd000000000000000000000000000002")
PORT = 4791
MS = 1_000_000
S_NS = 1_000_000_000


@dataclass
class Sent:
    """One frame put on the test wire."""

    src: str
    time_ns: int
    tx: Transmit
    delivered: bool

    @property
    def seg(self) -> Segment:
        return self.tx.segment


@dataclass
class Pair:
    """An active host A and a passive host P on one wire."""

    a: CmCore
    p: CmCore
    now: int = 0
    log: list[Sent] = field(default_factory=list)
    drop: Callable[[Sent], bool] | None = None
    upcalls: dict[str, list[Upcall]] = field(default_factory=lambda: {"A": [], "P": []})

    def core(self, name: str) -> CmCore:
        return self.a if name == "A" else self.p

    def pump(self) -> None:
        """Deliver everything both hosts want to send, until both are quiet."""
        moved = True
        while moved:
            moved = False
            for name, src, dst in (("A", self.a, self.p), ("P", self.p, self.a)):
                for tx in src.frames_to_send():
                    moved = True
                    sent = Sent(name, self.now, tx, not tx.loopback)
                    if tx.loopback:
                        self.log.append(sent)
                        continue
                    if self.drop is not None and self.drop(sent):
                        sent.delivered = False
                    self.log.append(sent)
                    if sent.delivered:
                        dst.receive(tx.segment, self.now)
        for name in ("A", "P"):
            core = self.core(name)
            while (up := core.next_event()) is not None:
                self.upcalls[name].append(up)

    def at(self, t_ns: int) -> None:
        """Advance to ``t_ns`` firing every timer on the way."""
        while True:
            due = [t for t in (self.a.get_timer(), self.p.get_timer()) if t is not None]
            if not due or min(due) > t_ns:
                break
            self.now = max(self.now, min(due))
            self.a.handle_timer(self.now)
            self.p.handle_timer(self.now)
            self.pump()
        self.now = max(self.now, t_ns)

    def run_out(self, limit_ns: int = 2000 * S_NS) -> None:
        """Run until no timer is left (or the limit)."""
        self.at(limit_ns)

    def frames(self, src: str | None = None) -> list[Sent]:
        return [s for s in self.log if src is None or s.src == src]

    def events(self, name: str) -> list[Upcall]:
        return self.upcalls[name]


def make_pair(cfg_a: CmConfig | None = None, cfg_p: CmConfig | None = None, *,
              ipv6: bool = False, vlan: int | None = None, seed_a: int = 1,
              seed_p: int = 2) -> Pair:
    a = CmCore("A", MAC_A, cfg_a or CmConfig(), seed=seed_a, trace=Trace())
    p = CmCore("P", MAC_P, cfg_p or CmConfig(), seed=seed_p, trace=Trace())
    ia, ip_ = (IP6_A, IP6_P) if ipv6 else (IP_A, IP_P)
    a.add_address(ia, vlan=vlan)
    p.add_address(ip_, vlan=vlan)
    a.set_neighbour(ip_, MAC_P)
    p.set_neighbour(ia, MAC_A)
    return Pair(a, p)


def addrs(ipv6: bool = False) -> tuple[bytes, bytes]:
    return (IP6_A, IP6_P) if ipv6 else (IP_A, IP_P)



def answer(seg: Segment, *, flags: int, seq: int, ack: int, payload: bytes = b"",
           options: bytes = b"", window: int = 65535) -> Segment:
    """A segment from the receiver of ``seg`` back to its sender (a hand-made peer)."""
    return Segment(src_mac=seg.dst_mac, dst_mac=seg.src_mac, src_ip=seg.dst_ip,
                   dst_ip=seg.src_ip, sport=seg.dport, dport=seg.sport, seq=seq & 0xFFFFFFFF,
                   ack=ack & 0xFFFFFFFF, flags=flags, window=window, options=options,
                   payload=payload, vlan=seg.vlan)


def syn_rcvd(cfg: CmConfig | None = None, *, seed: int) -> tuple[CmCore, Segment]:
    """A passive core P listening on ``IP_P:PORT`` after a hand-made peer at ``IP_A``
    sent its SYN from port 5000 with seq 100: the core and the SYN-ACK it answered."""
    core = CmCore("P", MAC_P, cfg or CmConfig(), seed=seed, trace=Trace())
    core.add_address(IP_P)
    core.set_neighbour(IP_A, MAC_A)
    core.create_listen(IP_P, PORT)
    core.receive(to_host(MAC_P, IP_A, IP_P, 5000, PORT, flags=SYN, seq=100,
                         src_mac=MAC_A), 0)
    [synack] = core.frames_to_send()
    return core, synack.segment


def to_host(dst_mac: bytes, src_ip: bytes, dst_ip: bytes, sport: int, dport: int, *,
            flags: int, seq: int = 1000, ack: int = 0, payload: bytes = b"",
            options: bytes = b"", window: int = 65535, vlan: int | None = None,
            src_mac: bytes = bytes.fromhex("02000000ee01")) -> Segment:
    """A segment from a hand-made peer to a host."""
    return Segment(src_mac=src_mac, dst_mac=dst_mac, src_ip=src_ip, dst_ip=dst_ip,
                   sport=sport, dport=dport, seq=seq & 0xFFFFFFFF, ack=ack & 0xFFFFFFFF,
                   flags=flags, window=window, options=options, payload=payload, vlan=vlan)
