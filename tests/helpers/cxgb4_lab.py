"""A network for cxgb4 tests: cxgb4 hosts, irdma hosts, and raw peers (a Linux-shaped
TCP with no MPA logic, driven by the test) to feed a cxgb4 host hand-made MPA bytes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mpa_emu.stacks.contract.events import Upcall
from mpa_emu.stacks.contract.trace import Trace
from mpa_emu.stacks.irdma.config import CmConfig
from mpa_emu.stacks.irdma.core import CmCore

from mpa_emu.net.host import Host
from mpa_emu.net.network import Network
from mpa_emu.stacks.tcp.shape import LINUX
from mpa_emu.stacks.tcp.stack import TcpEvent, TcpStack
from mpa_emu.wire.segment import Segment, Transmit

IP_A = "192.0.2.1"
IP_B = "192.0.2.2"
IP_RAW = "192.0.2.9"
PORT = 31000
S = 1_000_000_000
KEY_REQ = b"MPA ID Req Frame"
KEY_REP = b"MPA ID Rep Frame"


class RawPeer:
    """Just enough of CoreApi for Network: a TCP whose bytes the test writes."""

    def __init__(self, name: str, mac: bytes, seed: int, trace: Trace | None) -> None:
        self.tcp = TcpStack(name, mac, LINUX, seed=seed, trace=trace)
        self.events: list[TcpEvent] = []
        self.received: dict[int, bytes] = {}

    def add_address(self, ip: bytes, *, vlan: int | None = None, now_ns: int = 0) -> None:
        self.tcp.add_address(ip, vlan)

    def set_neighbour(self, ip: bytes, mac: bytes | None) -> None:
        self.tcp.set_neighbour(ip, mac)

    def receive(self, frame: Segment, now_ns: int) -> None:
        self.tcp.receive(frame, now_ns)
        self._collect()

    def handle_timer(self, now_ns: int) -> None:
        self.tcp.handle_timer(now_ns)
        self._collect()

    def get_timer(self) -> int | None:
        return self.tcp.get_timer()

    def frames_to_send(self) -> list[Transmit]:
        return self.tcp.frames_to_send()

    def next_event(self) -> Upcall | None:
        return None

    def create_listen(self, ip: bytes | None, port: int, *, backlog: int = 16,
                      ipv6: bool = False, vlan: int | None = None, now_ns: int = 0) -> int:
        return self.tcp.listen(ip, port, backlog)

    def connect(self, local_ip: bytes, remote_ip: bytes, remote_port: int, *,
                local_port: int | None = None, private_data: bytes = b"", ird: int = 16,
                ord: int = 16, now_ns: int) -> int:
        return self.tcp.connect(local_ip, remote_ip, remote_port, local_port, now_ns)

    def _collect(self) -> None:
        while (ev := self.tcp.next_event()) is not None:
            self.events.append(ev)
            if ev.kind == "data":
                self.received[ev.sock] = self.received.get(ev.sock, b"") + ev.data

    def socks(self, kind: str) -> list[int]:
        """Sockets that had an event of ``kind``."""
        return [ev.sock for ev in self.events if ev.kind == kind]

    def __getattr__(self, name: str) -> Any:  # verbs a raw peer has no use for
        raise AttributeError(name)


def make_net(seed: int = 7) -> Network:
    """A network whose hosts named ``raw*`` are raw peers (irdma otherwise)."""
    def factory(name: str, mac: bytes, config: CmConfig, *, seed: int,
                trace: Trace | None) -> Any:
        if name.startswith("raw"):
            return RawPeer(name, mac, seed, trace)
        return CmCore(name, mac, config, seed=seed, trace=trace)
    return Network(seed=seed, core_factory=factory)


def cxgb4(net: Network, name: str, ip: str,
          params: Mapping[str, object] | None = None) -> Host:
    """Add a cxgb4 host."""
    return net.add_host(name, ip, stack="cxgb4", params=params)


def raw_send(net: Network, host: Host, sock: int, data: bytes) -> None:
    """Write ``data`` on a raw peer's socket now and put it on the wire."""
    core = host.core
    assert isinstance(core, RawPeer)
    core.tcp.send(sock, data, net.now_ns, "test: raw bytes")
    host.timer_stale = True
    net.pump()


def raw_close(net: Network, host: Host, sock: int) -> None:
    """FIN on a raw peer's socket."""
    core = host.core
    assert isinstance(core, RawPeer)
    core.tcp.shutdown(sock, net.now_ns, "test: FIN")
    host.timer_stale = True
    net.pump()


def raw_reset(net: Network, host: Host, sock: int) -> None:
    """RST on a raw peer's socket."""
    core = host.core
    assert isinstance(core, RawPeer)
    core.tcp.abort(sock, net.now_ns, "test: RST")
    host.timer_stale = True
    net.pump()


def mpa_frame(key: bytes, flags: int, rev: int, body: bytes,
              pd_length: int | None = None) -> bytes:
    """An MPA request/reply written field by field (RFC 5044 section 7.1)."""
    length = len(body) if pd_length is None else pd_length
    return key + bytes((flags, rev)) + length.to_bytes(2, "big") + body


def v2_words(ird: int, ord: int, *, a: bool = True, c: bool = False, d: bool = True) -> bytes:
    """The RFC 6581 block: A|B|IRD, C|D|ORD."""
    return ((0x8000 if a else 0) | ird).to_bytes(2, "big") + \
        ((0x8000 if c else 0) | (0x4000 if d else 0) | ord).to_bytes(2, "big")


def payloads(net: Network, sender: str) -> list[bytes]:
    """TCP payloads ``sender`` put on the wire, in order."""
    return [f.segment.payload for f in net.frames
            if f.sender == sender and f.segment is not None and f.segment.payload]


def flags_of(net: Network, sender: str) -> list[str]:
    """TCP flags of every frame ``sender`` sent."""
    return [f.segment.flag_text for f in net.frames if f.sender == sender and f.segment]


def kernel_log(net: Network, host: str) -> list[tuple[str, str, str]]:
    """(level, fn, text) of the host's kernel_log trace records."""
    assert net.trace is not None
    return [(r.fields["level"], r.fn, r.fields["text"]) for r in net.trace.records
            if r.kind == "kernel_log" and r.host == host]
