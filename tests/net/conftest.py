"""A small stand-in CM core for testing the wire and the scheduler on their own.

It speaks just enough TCP to exercise the network: connect sends a SYN (resent every
second until answered), a listener answers a SYN with a SYN-ACK and a CONNECT_REQUEST
upcall, the SYN-ACK is acknowledged and reported as CONNECT_REPLY(0). Frames to one of
its own addresses are marked loopback and handed to itself, as the real core does
(irdma_ipv4_is_lpb/irdma_ipv6_is_lpb): the network must only capture them.
"""

from __future__ import annotations

import errno
import random
from collections import deque
from typing import Any

import pytest
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.events import IwEvent, Transmit, Upcall
from mpa_emu.stacks.contract.trace import Trace, TraceRecord
from mpa_emu.stacks.irdma.config import CmConfig

from mpa_emu.net import Network
from mpa_emu.wire.segment import ACK, SYN, Segment

SECOND = 1_000_000_000
SYN_OPTIONS = bytes.fromhex("020405b4 030302 00".replace(" ", ""))


class FakeCore:
    """Handshake-only endpoint with the CmCore method names."""

    def __init__(self, name: str, mac: bytes, config: CmConfig | None = None, *, seed: int = 0,
                 trace: Trace | None = None) -> None:
        self.name = name
        self.mac = mac
        self.seed = seed
        self.trace = trace
        self.rng = random.Random(seed)
        self.addresses: dict[bytes, int | None] = {}
        self.neighbours: dict[bytes, bytes | None] = {}
        self.listeners: dict[int, int] = {}
        self.outbox: list[Transmit] = []
        self.upcalls: deque[Upcall] = deque()
        self.received: list[tuple[int, Segment]] = []
        self.pending: dict[int, tuple[int, Segment]] = {}  # conn -> (due, SYN to resend)
        self.conns_: dict[int, tuple[bytes, int, bytes, int]] = {}
        self.next_port = 40000

    def add_address(self, ip: bytes, *, vlan: int | None = None, now_ns: int = 0) -> None:
        self.addresses[ip] = vlan

    def remove_address(self, ip: bytes, *, now_ns: int) -> None:
        del self.addresses[ip]

    def link_down(self, *, now_ns: int) -> list[bytes]:
        removed = list(self.addresses)
        self.addresses.clear()
        return removed

    def set_neighbour(self, ip: bytes, mac: bytes | None) -> None:
        self.neighbours[ip] = mac

    def _send(self, seg: Segment, comment: str, now_ns: int, conn: int | None) -> None:
        loopback = seg.dst_ip in self.addresses
        self.outbox.append(Transmit(seg, comment, loopback=loopback, conn=conn))
        if self.trace is not None:
            self.trace.emit(TraceRecord(now_ns, self.name, "segment_sent", "fake_send",
                                        {"comment": comment}))
        if loopback:
            self.receive(seg, now_ns)

    def receive(self, frame: Segment, now_ns: int) -> None:
        self.received.append((now_ns, frame))
        if frame.flags == SYN and frame.dport in self.listeners.values():
            listener = next(k for k, v in self.listeners.items() if v == frame.dport)
            isn = self.rng.getrandbits(32)
            conn = len(self.conns_) + 1
            self.conns_[conn] = (frame.dst_ip, frame.dport, frame.src_ip, frame.sport)
            mac = self.neighbours.get(frame.src_ip) or frame.src_mac
            synack = Segment(self.mac, mac, frame.dst_ip, frame.src_ip, frame.dport,
                             frame.sport, isn, (frame.seq + 1) & 0xFFFFFFFF, SYN | ACK,
                             options=SYN_OPTIONS, vlan=frame.vlan)
            self._send(synack, "fake_send_syn: SYN_RCVD", now_ns, conn)
            self.upcalls.append(Upcall(IwEvent.CONNECT_REQUEST, conn, 0, now_ns, frame.dst_ip,
                                       frame.dport, frame.src_ip, frame.sport,
                                       listener=listener))
        elif frame.flags == SYN | ACK:
            for conn, (_, syn) in list(self.pending.items()):
                if syn.sport == frame.dport and frame.ack == (syn.seq + 1) & 0xFFFFFFFF:
                    del self.pending[conn]
                    ack = Segment(self.mac, frame.src_mac, syn.src_ip, syn.dst_ip, syn.sport,
                                  syn.dport, frame.ack, (frame.seq + 1) & 0xFFFFFFFF, ACK,
                                  vlan=syn.vlan)
                    self._send(ack, "fake_handle_synack: ESTABLISHED", now_ns, conn)
                    self.upcalls.append(Upcall(IwEvent.CONNECT_REPLY, conn, 0, now_ns,
                                               syn.src_ip, syn.sport, syn.dst_ip, syn.dport))

    def handle_timer(self, now_ns: int) -> None:
        for conn, (due, syn) in list(self.pending.items()):
            if due <= now_ns:
                self.pending[conn] = (now_ns + SECOND, syn)
                self._send(syn, "fake_timer_tick: retransmit SYN", now_ns, conn)

    def get_timer(self) -> int | None:
        return min((due for due, _ in self.pending.values()), default=None)

    def frames_to_send(self) -> list[Transmit]:
        out, self.outbox = self.outbox, []
        return out

    def next_event(self) -> Upcall | None:
        return self.upcalls.popleft() if self.upcalls else None

    def create_listen(self, ip: bytes | None, port: int, *, backlog: int = 16,
                      ipv6: bool = False, vlan: int | None = None, now_ns: int = 0) -> int:
        listener = len(self.listeners) + 1
        self.listeners[listener] = port
        return listener

    def destroy_listen(self, listener: int, *, now_ns: int) -> None:
        del self.listeners[listener]

    def connect(self, local_ip: bytes, remote_ip: bytes, remote_port: int, *,
                local_port: int | None = None, private_data: bytes = b"", ird: int = 16,
                ord: int = 16, now_ns: int) -> int:
        mac = self.mac if remote_ip in self.addresses else self.neighbours.get(remote_ip)
        if mac is None:
            raise CmError(errno.ENOMEM, "neighbour not resolved")
        self.next_port += 1
        conn = 1000 + len(self.conns_) + len(self.pending)
        syn = Segment(self.mac, mac, local_ip, remote_ip, local_port or self.next_port,
                      remote_port, self.rng.getrandbits(32), 0, SYN, options=SYN_OPTIONS,
                      vlan=self.addresses.get(local_ip))
        self.pending[conn] = (now_ns + SECOND, syn)
        self._send(syn, "fake_send_syn: SYN_SENT", now_ns, conn)
        return conn

    def accept(self, conn: int, *, private_data: bytes = b"", now_ns: int) -> None:
        if conn not in self.conns_:
            raise ValueError("no such connection")

    def reject(self, conn: int, *, private_data: bytes = b"", now_ns: int) -> None:
        if conn not in self.conns_:
            raise ValueError("no such connection")

    def close(self, conn: int, *, now_ns: int) -> None:
        self.pending.pop(conn, None)

    def disconnect(self, conn: int, *, graceful: bool, now_ns: int) -> None:
        self.pending.pop(conn, None)

    def node(self, conn: int) -> Any:
        return self.conns_.get(conn)

    def conns(self) -> list[int]:
        return sorted(self.conns_)


def fake_factory(name: str, mac: bytes, config: CmConfig, *, seed: int,
                 trace: Trace | None) -> FakeCore:
    return FakeCore(name, mac, config, seed=seed, trace=trace)


@pytest.fixture
def fake_net() -> Any:
    """Build a Network whose hosts run the FakeCore: ``fake_net(seed=..., **kwargs)``."""

    def make(seed: int = 0, **kwargs: Any) -> Network:
        return Network(seed, core_factory=fake_factory, **kwargs)

    return make
