"""Life after offload between two emulated irdma hosts: RTR and ESTABLISHED, graceful
and abortive disconnects, and what each side's application is told (irdma_cm_disconn_true,
irdma_qp_disconnect)."""

from __future__ import annotations

from errno import ECONNRESET

from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.irdma.offload import TcpState
from mpa_emu.stacks.irdma.states import CmState

from mpa_emu.net import Accept, Host, Network, drop_nth
from mpa_emu.wire.segment import FIN, RST

MS = 1_000_000
PORT = 31020


def calls(host: Host, since_ns: int = 0) -> list[tuple[str, int]]:
    return [(IwEvent(u.event).name, u.status) for u in host.upcalls if u.time_ns >= since_ns]


def pair(seed: int = 1) -> tuple[Network, Host, Host, int]:
    net = Network(seed)
    alice = net.add_host("alice", "192.0.2.1")
    bob = net.add_host("bob", "192.0.2.2")
    bob.listen(PORT, policy=Accept(b"welcome"))
    conn = alice.connect("192.0.2.2", PORT, private_data=b"hello")
    net.run(until_ns=50 * MS)
    return net, alice, bob, conn


def rtr_dropped(count: int) -> tuple[Network, Host, Host, int]:
    """Bob accepting, alice connecting, the first ``count`` data frames from alice (her
    RTR and its resends) lost on the wire."""
    net = Network(2)
    alice = net.add_host("alice", "192.0.2.1")
    bob = net.add_host("bob", "192.0.2.2")
    bob.listen(PORT, policy=Accept())
    net.drop(drop_nth("data", 1, count=count, sender="alice"))
    conn = alice.connect("192.0.2.2", PORT)
    return net, alice, bob, conn


def flags_from(net: Network, sender: str, since_ns: int) -> list[int]:
    return [f.segment.flags for f in net.frames
            if f.sender == sender and f.time_ns >= since_ns and f.segment is not None]


def test_rtr_then_established_on_both_sides() -> None:
    net, alice, bob, conn = pair()
    assert calls(alice) == [("CONNECT_REPLY", 0)]
    assert calls(bob) == [("CONNECT_REQUEST", 0), ("ESTABLISHED", 0)]
    reply = next(f for f in net.frames if f.kind == "MPA reply")
    rtr = next(f for f in net.frames if f.kind == "data" and f.sender == "alice")
    established = next(u for u in bob.upcalls if u.event == IwEvent.ESTABLISHED)
    # the passive ESTABLISHED follows the RTR's arrival (one wire latency later)
    assert established.time_ns > rtr.time_ns > reply.time_ns
    assert "irdma_sc_send_lsmm" in reply.comment and "irdma_sc_send_rtt" in rtr.comment
    assert alice.node(conn).state == CmState.OFFLOADED


def test_graceful_disconnect_fin_exchange_and_upcalls() -> None:
    net, alice, bob, conn = pair()
    t0 = net.now_ns
    alice.disconnect(conn, graceful=True)
    net.run(until_ns=t0 + 1000 * MS)
    assert flags_from(net, "alice", t0)[0] & FIN
    assert any(f & FIN for f in flags_from(net, "bob", t0))
    assert not any(f & RST for f in flags_from(net, "alice", t0) + flags_from(net, "bob", t0))
    # the peer FIN side: DISCONNECT(0), then CLOSE when its own FIN is acknowledged
    assert calls(bob, t0) == [("DISCONNECT", 0), ("CLOSE", 0)]
    # the local closer: CLOSE only (its FIN AE comes after close_timer_started)
    assert calls(alice, t0) == [("CLOSE", 0)]
    assert alice.conns() == [] and bob.conns() == []


def test_abortive_disconnect_rst_and_upcalls() -> None:
    net, alice, bob, conn = pair()
    t0 = net.now_ns
    alice.disconnect(conn, graceful=False)
    net.run(until_ns=t0 + 2000 * MS)
    assert flags_from(net, "alice", t0) == [RST | 0x10]
    assert calls(bob, t0) == [("DISCONNECT", -ECONNRESET), ("CLOSE", 0)]
    [(event, status)] = calls(alice, t0)
    close = next(u for u in alice.upcalls if u.time_ns >= t0)
    assert (event, status) == ("CLOSE", 0) and close.time_ns - t0 >= 100 * MS
    assert alice.conns() == [] and bob.conns() == []


def test_disconnect_twice_sends_one_rst() -> None:
    net, alice, _bob, conn = pair()
    t0 = net.now_ns
    alice.disconnect(conn, graceful=False)
    alice.disconnect(conn, graceful=False)
    net.run(until_ns=t0 + 2000 * MS)
    assert [f for f in flags_from(net, "alice", t0) if f & RST] == [RST | 0x10]


def test_sends_after_offload_are_acknowledged() -> None:
    net, alice, bob, conn = pair()
    t0 = net.now_ns
    qp = alice.core.qp(conn)
    qp.post_send(b"payload of a Send after offload, 48 bytes long!!", t0)
    alice.core._collect_qp_frames(conn)
    net.pump()
    net.run(until_ns=t0 + 10 * MS)
    bob_qp = bob.core.qp(bob.conns()[0])
    assert bob_qp.received[-1].crc_ok
    assert qp.bytes_in_flight == 0 and qp.get_timer() is None
    assert qp.tcp_state == TcpState.ESTABLISHED


def test_missing_rtr_fails_the_accept_after_12_s() -> None:
    net, _alice, bob, _ = rtr_dropped(1000)
    net.run(until_ns=20_000 * MS)
    established = [u for u in bob.upcalls if u.event == IwEvent.ESTABLISHED]
    assert [u.status for u in established] == [-ECONNRESET]
    request = next(u for u in bob.upcalls if u.event == IwEvent.CONNECT_REQUEST)
    waited = established[0].time_ns - request.time_ns
    assert 12_000 * MS <= waited < 12_000 * MS + 10 * MS
    assert bob.conns() == []


def test_link_down_then_disconnect_sends_nothing() -> None:
    net, alice, _bob, conn = pair()
    t0 = net.now_ns
    alice.link_down()
    # irdma_netdevice_event(NETDEV_DOWN): iw_status = 0 only; the IPv4 connection stays
    assert calls(alice, t0 - 1) == [] and conn in alice.conns()
    alice.disconnect(conn, graceful=False)
    net.run(until_ns=t0 + 500 * MS)
    # irdma_modify_qp(ERR) without iw_status: no RST, and the close comes at once
    assert flags_from(net, "alice", t0) == []
    assert calls(alice, t0 - 1) == [("CLOSE", 0)]
    assert conn not in alice.conns()


def test_peer_reset_before_the_rtr_blocks_the_disconnect_worker() -> None:
    # bob accepted but alice's RTR never arrives; alice then aborts. bob's disconnect
    # worker waits on establish_comp, the accept fails after 12 s, and bob's application
    # never hears DISCONNECT or CLOSE (irdma_send_cm_event, irdma_accept).
    net, alice, bob, conn = rtr_dropped(1000)
    net.run(until_ns=20 * MS)
    alice.disconnect(conn, graceful=False)
    net.run(until_ns=20_000 * MS)
    assert calls(bob) == [("CONNECT_REQUEST", 0), ("ESTABLISHED", -ECONNRESET)]
    assert any(r.kind == "worker_blocked" and r.host == "bob" for r in net.trace.records)


def test_a_lost_rtr_is_retransmitted_by_the_nic_after_200_ms() -> None:
    net, _alice, bob, _ = rtr_dropped(1)
    net.run(until_ns=1000 * MS)
    rtrs = [f for f in net.frames if f.sender == "alice" and f.kind == "data"]
    assert len(rtrs) == 2 and rtrs[1].segment == rtrs[0].segment
    assert rtrs[1].time_ns - rtrs[0].time_ns == 200 * MS
    assert "retransmission 1" in rtrs[1].comment
    assert calls(bob)[-1] == ("ESTABLISHED", 0)


def test_a_late_fin_reaches_the_qp_after_the_node_is_gone() -> None:
    # Bob's FIN is lost three times (sent at 0, resent at 200 and 600 ms: his RTO doubles
    # from 200 ms). Alice's close entry frees her node before his third resend while her
    # QP sits in FIN_WAIT_2 with no timer; the hardware QP still owns the flow, so that
    # resend is ACKed (RFC 9293 section 3.10.7.4) and bob never sends his FIN again.
    net, alice, _bob, conn = pair()
    net.drop(drop_nth("FIN", 1, count=3, sender="bob"))
    t0 = net.now_ns
    alice.disconnect(conn, graceful=True)
    net.run(until_ns=t0 + 5000 * MS)
    (close,) = [u for u in alice.upcalls if u.time_ns >= t0]
    assert close.event == IwEvent.CLOSE and alice.conns() == []
    bob_fins = [f for f in net.frames if f.sender == "bob" and f.time_ns >= t0
                and f.segment is not None and f.segment.flags & FIN]
    assert [(f.time_ns - t0) // MS for f in bob_fins] == [0, 200, 600, 1400]
    assert bob_fins[3].time_ns > close.time_ns  # the node was gone by then
    resent = bob_fins[3].segment
    assert resent is not None
    answers = [f.segment for f in net.frames if f.sender == "alice"
               and f.time_ns > bob_fins[3].time_ns and f.segment is not None]
    assert answers and answers[0].ack == (resent.seq + 1) % 2**32
    assert not any(s.flags & RST for s in answers)
