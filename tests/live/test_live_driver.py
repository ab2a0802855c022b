"""The live driver's own duties (no root needed): a datagram socket pair stands in for
the TAP and a scripted core records what the driver hands it. The CM itself is tested
against the real kernel in tests/live."""

from __future__ import annotations

import errno
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from helpers.pair_tap import PairTap
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.events import IwEvent, Transmit, Upcall
from mpa_emu.stacks.contract.trace import Trace
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import ARP, Dot1Q, Ether

from mpa_emu.live.driver import RX, TX, Accept, DropMatching, LiveHost, Reject, VerbFailure
from mpa_emu.live.sinks import MemorySink
from mpa_emu.ulp.iwcm import IwCmState
from mpa_emu.wire import codec
from mpa_emu.wire.addr import ip_bytes, mac_bytes
from mpa_emu.wire.segment import ACK, SYN, Segment

OUR_MAC = mac_bytes("02:00:00:00:00:02")
PEER_MAC = mac_bytes("5a:11:22:33:44:55")
OUR_IP, PEER_IP = ip_bytes("192.0.2.2"), ip_bytes("192.0.2.1")


@dataclass
class StateName:
    name: str


@dataclass
class NodeStub:
    state: StateName


@dataclass
class ScriptedCore:
    """Records every call; emits what the test queues."""

    calls: list[tuple[str, Any]] = field(default_factory=list)
    outbox: list[Transmit] = field(default_factory=list)
    events: list[Upcall] = field(default_factory=list)
    timer: int | None = None
    states: dict[int, str] = field(default_factory=dict)

    def add_address(self, ip: bytes, *, vlan: int | None = None, now_ns: int = 0) -> None:
        self.calls.append(("add_address", ip))

    def remove_address(self, ip: bytes, *, now_ns: int) -> None:
        self.calls.append(("remove_address", ip))

    def set_neighbour(self, ip: bytes, mac: bytes | None) -> None:
        self.calls.append(("set_neighbour", (ip, mac)))

    def receive(self, frame: Segment, now_ns: int) -> None:
        self.calls.append(("receive", frame))

    def handle_timer(self, now_ns: int) -> None:
        self.calls.append(("handle_timer", now_ns))
        self.timer = None

    def get_timer(self) -> int | None:
        return self.timer

    def frames_to_send(self) -> list[Transmit]:
        out, self.outbox = self.outbox, []
        return out

    def next_event(self) -> Upcall | None:
        return self.events.pop(0) if self.events else None

    def create_listen(self, ip: bytes | None, port: int, *, backlog: int = 16,
                      ipv6: bool = False, vlan: int | None = None, now_ns: int = 0) -> int:
        self.calls.append(("create_listen", port))
        return 7

    def connect(self, local_ip: bytes, remote_ip: bytes, remote_port: int, *,
                local_port: int | None = None, private_data: bytes = b"", ird: int = 16,
                ord: int = 16, now_ns: int) -> int:
        self.calls.append(("connect", (local_ip, remote_ip, remote_port)))
        return 1

    def accept(self, conn: int, *, private_data: bytes = b"", now_ns: int) -> None:
        self.calls.append(("accept", (conn, private_data)))

    def reject(self, conn: int, *, private_data: bytes = b"", now_ns: int) -> None:
        self.calls.append(("reject", (conn, private_data)))

    def close(self, conn: int, *, now_ns: int) -> None:
        self.calls.append(("close", conn))
        self.states.pop(conn, None)

    def disconnect(self, conn: int, *, graceful: bool, now_ns: int) -> None:
        self.calls.append(("disconnect", (conn, graceful)))
        self.states.pop(conn, None)

    def device_reset(self, *, now_ns: int) -> list[int]:
        self.calls.append(("device_reset", now_ns))
        closed, self.states = list(self.states), {}
        return closed

    def teardown_connections(self, ip: bytes | None = None, *, vlan: int | None = None,
                             disconnect_all: bool = False, now_ns: int) -> list[int]:
        self.calls.append(("teardown_connections", (ip, vlan, disconnect_all)))
        return []

    def node(self, conn: int) -> Any:
        return NodeStub(StateName(self.states[conn])) if conn in self.states else None

    def conns(self) -> list[int]:
        return list(self.states)

    def called(self, name: str) -> list[Any]:
        return [arg for n, arg in self.calls if n == name]


@dataclass
class Rig:
    host: LiveHost
    core: ScriptedCore
    wire: socket.socket
    capture: MemorySink
    trace: Trace

    def frames_from_host(self) -> list[bytes]:
        out = []
        while True:
            try:
                out.append(self.wire.recv(65536))
            except BlockingIOError:
                return out


@pytest.fixture
def rig() -> Iterator[Rig]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    theirs.setblocking(False)
    core, capture, trace = ScriptedCore(), MemorySink(), Trace()
    host = LiveHost(PairTap(ours), core, OUR_MAC, trace=trace, capture=capture)
    host.add_address(OUR_IP)
    yield Rig(host, core, theirs, capture, trace)
    ours.close()
    theirs.close()


def syn_to_us(dport: int = 4791) -> bytes:
    return bytes(Ether(src="5a:11:22:33:44:55", dst="02:00:00:00:00:02")
                 / IP(src="192.0.2.1", dst="192.0.2.2") / TCP(sport=40000, dport=dport,
                                                              flags="S", seq=1000))


def our_segment(flags: int = SYN) -> Segment:
    return Segment(src_mac=OUR_MAC, dst_mac=PEER_MAC, src_ip=OUR_IP, dst_ip=PEER_IP,
                   sport=4791, dport=40000, seq=5, ack=0, flags=flags)


def test_tcp_frame_reaches_the_core_decoded_and_is_captured(rig: Rig) -> None:
    rig.wire.send(syn_to_us())
    rig.host.poll(0.5)
    (seg,) = rig.core.called("receive")
    assert (seg.sport, seg.dport, seg.flags, seg.seq) == (40000, 4791, SYN, 1000)
    assert [f.comment for f in rig.capture.frames] == ["received"]


def test_arp_request_is_answered_and_the_neighbour_given_to_the_core(rig: Rig) -> None:
    rig.wire.send(bytes(Ether(src="5a:11:22:33:44:55", dst="ff:ff:ff:ff:ff:ff")
                        / ARP(op=1, hwsrc="5a:11:22:33:44:55", psrc="192.0.2.1",
                              pdst="192.0.2.2")))
    rig.host.poll(0.5)
    assert rig.core.called("set_neighbour") == [(PEER_IP, PEER_MAC)]
    (reply,) = rig.frames_from_host()
    assert Ether(reply)[ARP].op == 2 and Ether(reply)[ARP].psrc == "192.0.2.2"
    assert rig.core.called("receive") == []


def test_frame_for_another_mac_never_reaches_the_core(rig: Rig) -> None:
    rig.wire.send(bytes(Ether(src="5a:11:22:33:44:55", dst="02:00:00:00:00:99")
                        / IP(src="192.0.2.1", dst="192.0.2.2") / TCP(flags="S")))
    rig.host.poll(0.5)
    assert rig.core.called("receive") == []
    assert rig.capture.frames[0].comment == (
        "received: dropped by the NIC: destination MAC 02:00:00:00:00:99 is not ours")


def test_frame_on_an_unconfigured_vlan_never_reaches_the_core(rig: Rig) -> None:
    rig.wire.send(bytes(Ether(src="5a:11:22:33:44:55", dst="02:00:00:00:00:02")
                        / Dot1Q(vlan=7) / IP(src="192.0.2.1", dst="192.0.2.2")
                        / TCP(flags="S")))
    rig.host.poll(0.5)
    assert rig.core.called("receive") == []
    assert rig.capture.frames[0].comment == "received: dropped by the NIC: VLAN 7 is not configured"


def test_vlan_address_answers_tagged_arp_and_receives_tagged_segments(rig: Rig) -> None:
    rig.host.add_address(ip_bytes("192.0.2.66"), vlan=100)
    rig.wire.send(bytes(Ether(src="5a:11:22:33:44:55", dst="ff:ff:ff:ff:ff:ff") / Dot1Q(vlan=100)
                        / ARP(op=1, hwsrc="5a:11:22:33:44:55", psrc="192.0.2.65",
                              pdst="192.0.2.66")))
    rig.wire.send(bytes(Ether(src="5a:11:22:33:44:55", dst="02:00:00:00:00:02") / Dot1Q(vlan=100)
                        / IP(src="192.0.2.65", dst="192.0.2.66") / TCP(flags="S")))
    rig.host.poll(0.5)
    (reply,) = rig.frames_from_host()
    assert Ether(reply)[Dot1Q].vlan == 100 and Ether(reply)[ARP].psrc == "192.0.2.66"
    (seg,) = rig.core.called("receive")
    assert seg.vlan == 100
    assert ("add_address", ip_bytes("192.0.2.66")) in rig.core.calls


def test_core_frames_are_encoded_written_and_captured_with_their_comment(rig: Rig) -> None:
    rig.core.outbox.append(Transmit(our_segment(), "irdma_send_syn: SYN_SENT"))
    rig.host.poll(0)
    (frame,) = rig.frames_from_host()
    assert codec.decode(frame) == codec.decode(codec.encode(our_segment()))
    assert rig.capture.frames[-1].comment == "irdma_send_syn: SYN_SENT"
    assert rig.capture.frames[-1].data == frame


def test_fault_hook_drops_outgoing_frame_before_the_tap(rig: Rig) -> None:
    rig.host.fault = DropMatching(TX, lambda seg: bool(seg.flags & SYN))
    rig.core.outbox += [Transmit(our_segment(SYN), "first"), Transmit(our_segment(ACK), "ack")]
    rig.host.poll(0)
    frames = rig.frames_from_host()
    assert [codec.decode(f).flags for f in frames] == [ACK]
    assert [r.fields["comment"] for r in rig.trace.of_kind("fault")] == ["first"]


def test_fault_hook_drops_incoming_frame_after_the_capture(rig: Rig) -> None:
    hook = DropMatching(RX, lambda seg: True, nth=1)
    rig.host.fault = hook
    rig.wire.send(syn_to_us())
    rig.wire.send(syn_to_us())
    rig.host.poll(0.5)
    assert len(rig.core.called("receive")) == 1 and len(hook.dropped) == 1
    assert [f.comment for f in rig.capture.frames] == [
        "received: dropped by the fault hook", "received"]


def test_due_timer_fires_with_the_current_core_time(rig: Rig) -> None:
    rig.core.timer = rig.host.now_ns + 20_000_000
    assert rig.host.run_until(lambda: bool(rig.core.called("handle_timer")), 2)
    (fired_at,) = rig.core.called("handle_timer")
    assert fired_at >= 20_000_000


@pytest.mark.parametrize(("policy", "verb"), [(Accept(b"yes"), "accept"),
                                              (Reject(b"no"), "reject")])
def test_connect_request_gets_the_listener_policy(rig: Rig, policy: Accept | Reject,
                                                  verb: str) -> None:
    listener = rig.host.listen(4791, policy=policy)
    rig.core.events.append(Upcall(IwEvent.CONNECT_REQUEST, 3, 0, 0, OUR_IP, 4791, PEER_IP,
                                  40000, listener=listener))
    rig.host.poll(0)
    assert rig.core.called(verb) == [(3, policy.private_data)]
    assert [u.event for u in rig.host.upcalls] == [IwEvent.CONNECT_REQUEST]


def test_connect_resolves_the_neighbour_first(rig: Rig) -> None:
    rig.wire.send(bytes(Ether(src="5a:11:22:33:44:55", dst="02:00:00:00:00:02")
                        / ARP(op=2, hwsrc="5a:11:22:33:44:55", psrc="192.0.2.1",
                              hwdst="02:00:00:00:00:02", pdst="192.0.2.2")))
    assert rig.host.connect(PEER_IP, 4000) == 1
    assert rig.core.called("set_neighbour") == [(PEER_IP, PEER_MAC)]
    assert rig.core.called("connect") == [(OUR_IP, PEER_IP, 4000)]
    (solicit,) = rig.frames_from_host()
    assert Ether(solicit)[ARP].pdst == "192.0.2.1"


def test_unanswered_resolution_is_a_clear_error(rig: Rig) -> None:
    from mpa_emu.live.driver import LiveError

    with pytest.raises(LiveError, match="did not answer ARP"):
        rig.host.connect(PEER_IP, 4000, resolve_timeout_s=0.2)
    assert rig.core.called("connect") == []


def test_shutdown_disconnects_offloaded_and_closes_the_rest(rig: Rig) -> None:
    rig.core.states.update({1: "OFFLOADED", 2: "SYN_SENT"})
    rig.host.shutdown(grace_s=0.2)
    assert rig.core.called("disconnect") == [(1, True)]
    assert rig.core.called("close") == [2]
    assert rig.capture.closed


def test_delayed_accept_runs_after_its_delay_in_the_loop(rig: Rig) -> None:
    listener = rig.host.listen(4791, policy=Accept(b"later", delay_ns=30_000_000))
    rig.core.events.append(Upcall(IwEvent.CONNECT_REQUEST, 4, 0, 0, OUR_IP, 4791, PEER_IP,
                                  40000, listener=listener))
    rig.host.poll(0)
    assert rig.core.called("accept") == []
    start = rig.host.now_ns
    assert rig.host.run_until(lambda: bool(rig.core.called("accept")), 2)
    assert rig.core.called("accept") == [(4, b"later")]
    assert rig.host.now_ns - start >= 30_000_000


def test_callback_policy_sees_the_request(rig: Rig) -> None:
    seen: list[int] = []
    listener = rig.host.listen(4791, policy=lambda host, upcall: seen.append(upcall.conn))
    rig.core.events.append(Upcall(IwEvent.CONNECT_REQUEST, 5, 0, 0, OUR_IP, 4791, PEER_IP,
                                  40000, listener=listener))
    rig.host.poll(0)
    assert seen == [5] and rig.core.called("accept") == [] == rig.core.called("reject")


def test_refused_policy_verb_is_recorded_and_reported(rig: Rig) -> None:
    def refuse(conn: int, *, private_data: bytes = b"", now_ns: int) -> None:
        raise CmError(errno.ECONNRESET, "the peer reset before the accept")

    rig.core.accept = refuse  # type: ignore[method-assign]
    seen: list[VerbFailure] = []
    rig.host.on_failure(lambda host, failure: seen.append(failure))
    listener = rig.host.listen(4791)
    rig.core.events.append(Upcall(IwEvent.CONNECT_REQUEST, 6, 0, 0, OUR_IP, 4791, PEER_IP,
                                  40000, listener=listener))
    rig.host.poll(0)
    assert [(f.verb, f.errno) for f in seen] == [("accept", errno.ECONNRESET)]
    assert rig.host.failures == seen



def test_upcalls_give_the_applications_rdma_cm_events(rig: Rig) -> None:
    """LiveHost.cm_events as Host.cm_events: iw_conn_req_handler's CONNECT_REQUEST, then
    after the policy's reject (iw_cm_reject: CONN_RECV -> IDLE) nothing more for it; an
    active CONNECT_REPLY(-ECONNREFUSED) is REJECTED (cma_iw_handler). Each has its trace
    record."""
    listener = rig.host.listen(4791, policy=Reject(b"no"))
    rig.core.events += [
        Upcall(IwEvent.CONNECT_REQUEST, 3, 0, 0, OUR_IP, 4791, PEER_IP, 40000,
               listener=listener),
        Upcall(IwEvent.CONNECT_REPLY, 4, -errno.ECONNREFUSED, 0, OUR_IP, 40001, PEER_IP,
               4791)]
    rig.host.poll(0)
    assert [(e.name, e.status, e.conn) for e in rig.host.cm_events] == [
        ("RDMA_CM_EVENT_CONNECT_REQUEST", 0, 3), ("RDMA_CM_EVENT_REJECTED", -111, 4)]
    assert rig.host.rdma_cm.state(3) == IwCmState.IDLE
    assert [r.fields["event"] for r in rig.trace.of_kind("rdma_cm_event")] == [
        "RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_REJECTED"]


def test_device_reset_reaches_the_core_and_flushes_its_frames(rig: Rig) -> None:
    rig.core.states = {1: "OFFLOADED", 2: "SYN_SENT"}
    assert rig.host.device_reset() == [1, 2]
    assert len(rig.core.called("device_reset")) == 1
    assert [r.kind for r in rig.trace.records if r.kind == "device_reset"] == ["device_reset"]


def test_teardown_passes_the_selection_to_the_core(rig: Rig) -> None:
    rig.host.teardown(OUR_IP, vlan=7)
    rig.host.teardown(disconnect_all=True)
    assert rig.core.called("teardown_connections") == [(OUR_IP, 7, False), (None, None, True)]

