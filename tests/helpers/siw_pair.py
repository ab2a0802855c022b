"""A siw host against a plain Linux-shaped TCP peer, both sans-IO, joined by a perfect
wire with a fixed latency: the peer's bytes are whatever the test writes, so a test can
split an MPA frame, stay silent, or send a wrong key."""

from __future__ import annotations

from dataclasses import dataclass, field

from mpa_emu.stacks.contract.events import Upcall
from mpa_emu.stacks.contract.trace import Trace

from mpa_emu.stacks.siw import SiwCore
from mpa_emu.stacks.tcp import LINUX, TcpEvent, TcpStack
from mpa_emu.wire import codec
from mpa_emu.wire.segment import Segment

SIW_MAC, PEER_MAC = b"\x02\x00\x00\x00\x00\x01", b"\x02\x00\x00\x00\x00\x02"
SIW_IP, PEER_IP = bytes([192, 0, 2, 1]), bytes([192, 0, 2, 2])
LATENCY = 10_000
KEY_REQ, KEY_REP = b"MPA ID Req Frame", b"MPA ID Rep Frame"


def frame(key: bytes, flags: int, rev: int, pdata: bytes, block: bytes | None = None) -> bytes:
    """An MPA request/reply written from RFC 5044 section 7.1 (and the RFC 6581 block)."""
    body = (block or b"") + pdata
    return key + bytes([flags, rev]) + len(body).to_bytes(2, "big") + body


@dataclass
class Pair:
    """``siw`` (a SiwCore) and ``peer`` (a TcpStack) on one wire."""

    params: dict[str, int | bool] = field(default_factory=dict)
    now: int = 0
    wire: list[tuple[int, str, Segment, str]] = field(default_factory=list)
    upcalls: list[Upcall] = field(default_factory=list)
    peer_events: list[TcpEvent] = field(default_factory=list)
    trace: Trace = field(default_factory=Trace)

    def __post_init__(self) -> None:
        self.siw = SiwCore("siw", SIW_MAC, self.params, seed=5, trace=self.trace)
        self.peer = TcpStack("peer", PEER_MAC, LINUX, seed=6)
        self.siw.add_address(SIW_IP)
        self.peer.add_address(PEER_IP)
        self.siw.set_neighbour(PEER_IP, PEER_MAC)
        self.peer.set_neighbour(SIW_IP, SIW_MAC)
        self._flight: list[tuple[int, str, Segment]] = []

    def _collect(self) -> None:
        for tx in self.siw.frames_to_send():
            codec.encode(tx.segment)
            self.wire.append((self.now, "siw", tx.segment, tx.comment))
            self._flight.append((self.now + LATENCY, "peer", tx.segment))
        for tx in self.peer.frames_to_send():
            self.wire.append((self.now, "peer", tx.segment, tx.comment))
            self._flight.append((self.now + LATENCY, "siw", tx.segment))
        while (up := self.siw.next_event()) is not None:
            self.upcalls.append(up)
        while (ev := self.peer.next_event()) is not None:
            self.peer_events.append(ev)

    def run(self, until: int) -> None:
        """Deliver segments and fire timers up to virtual time ``until``."""
        self._collect()
        while True:
            times = [t for t, _, _ in self._flight]
            for t in (self.siw.get_timer(), self.peer.get_timer()):
                if t is not None:
                    times.append(t)
            if not times or min(times) > until:
                break
            self.now = max(self.now, min(times))
            due = [f for f in self._flight if f[0] <= self.now]
            if due:
                first = min(due, key=lambda f: f[0])
                self._flight.remove(first)
                _, to, seg = first
                (self.siw if to == "siw" else self.peer).receive(seg, self.now)
            else:
                for host in (self.siw, self.peer):
                    t = host.get_timer()
                    if t is not None and t <= self.now:
                        host.handle_timer(self.now)
            self._collect()
        self.now = max(self.now, until)

    def sent_by(self, who: str) -> list[Segment]:
        """Segments ``who`` put on the wire, in order."""
        return [seg for _, w, seg, _ in self.wire if w == who]

    def peer_data(self) -> bytes:
        """Every byte the peer's sockets received."""
        return b"".join(e.data for e in self.peer_events if e.kind == "data")

    def kernel_log(self) -> list[str]:
        """The text of every kernel_log record."""
        return [r.fields["text"] for r in self.trace.of_kind("kernel_log")]
