"""The disconnect decision table after offload (irdma_cm_disconn_true): hw.c AE handling,
irdma_modify_qp (ERR/SQD), the 100 ms QP close timer and irdma_cm_disconn_true.

A small host stands in for the CM core: it keeps one QP, its upcalls, one close entry
and the frames on the wire, and runs the QP's AEs through ``disconnect.on_ae`` the way
the core's contract says.
"""

from __future__ import annotations

from errno import ECONNRESET

from helpers.offload_host import OUR_SEQ, PEER_SEQ, passive_host
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.irdma.offload import Ae, IbQpState, TcpState

from mpa_emu.stacks.irdma import disconnect
from mpa_emu.wire.segment import ACK, FIN, RST


def test_rts_ae_wakes_the_accept_waiter() -> None:
    host = passive_host()
    assert host.rts_woken == [1]
    assert host.nic_qp is not None and host.nic_qp.iwqp.rts_ae_rcvd


def test_peer_fin_gives_disconnect_then_close_on_close_complete() -> None:
    host = passive_host()
    host.deliver({"seq": PEER_SEQ, "ack": OUR_SEQ, "flags": FIN | ACK}, 10)
    # the NIC ACKs the FIN and, the QP going to CLOSING, sends its own FIN
    assert [t.segment.flags for t in host.wire] == [ACK, FIN | ACK]
    assert host.upcalls == [(IwEvent.DISCONNECT, 0, 10)]
    assert host.close_due == 10 + 100_000_000 and host.node_alive
    host.deliver({"seq": PEER_SEQ + 1, "ack": OUR_SEQ + 1}, 20)
    assert host.upcalls == [(IwEvent.DISCONNECT, 0, 10), (IwEvent.CLOSE, 0, 20)]
    assert not host.node_alive


def test_peer_fin_without_the_final_ack_closes_on_the_100ms_timer() -> None:
    host = passive_host()
    host.deliver({"seq": PEER_SEQ, "ack": OUR_SEQ, "flags": FIN | ACK}, 10)
    host.run_timers(10 + 100_000_000)
    assert host.upcalls == [(IwEvent.DISCONNECT, 0, 10),
                            (IwEvent.CLOSE, 0, 10 + 100_000_000)]
    assert not host.node_alive


def test_peer_rst_gives_disconnect_econnreset_then_close() -> None:
    host = passive_host()
    host.deliver({"seq": PEER_SEQ, "ack": 0, "flags": RST}, 50)
    assert host.upcalls == [(IwEvent.DISCONNECT, -ECONNRESET, 50), (IwEvent.CLOSE, 0, 50)]
    assert not host.node_alive and host.wire == []


def test_abortive_disconnect_sends_rst_and_closes_after_100ms() -> None:
    host = passive_host()
    disconnect.modify_qp(host, host.conn, "err", 100)
    assert [t.segment.flags for t in host.wire] == [RST | ACK]
    assert host.upcalls == [] and host.close_due == 100 + 100_000_000
    host.run_timers(100 + 100_000_000)
    assert host.upcalls == [(IwEvent.CLOSE, 0, 100 + 100_000_000)]
    assert not host.node_alive


def test_abortive_disconnect_with_link_down_sends_nothing_and_closes_at_once() -> None:
    host = passive_host()
    host.up = False
    disconnect.modify_qp(host, host.conn, "err", 100)
    assert host.wire == []
    assert host.upcalls == [(IwEvent.CLOSE, 0, 100)] and host.close_due is None


def test_graceful_disconnect_sends_fin_and_closes_when_the_exchange_completes() -> None:
    host = passive_host()
    disconnect.modify_qp(host, host.conn, "sqd", 100)
    assert [t.segment.flags for t in host.wire] == [FIN | ACK]
    assert host.close_due == 100 + 100_000_000
    host.deliver({"seq": PEER_SEQ, "ack": OUR_SEQ + 1, "flags": FIN | ACK}, 200)
    # our FIN acked and theirs received: TIME_WAIT, close complete; the local closer gets
    # no DISCONNECT (close_timer_started was already 1 when the FIN AE came)
    assert host.upcalls == [(IwEvent.CLOSE, 0, 200)]
    assert host.nic_qp is not None and host.nic_qp.tcp_state == TcpState.TIME_WAIT


def test_graceful_disconnect_with_a_silent_peer_closes_on_the_timer() -> None:
    host = passive_host()
    disconnect.modify_qp(host, host.conn, "sqd", 100)
    host.run_timers(100 + 100_000_000)
    assert host.upcalls == [(IwEvent.CLOSE, 0, 100 + 100_000_000)]


def test_peer_rst_after_our_abortive_close_adds_nothing() -> None:
    host = passive_host()
    disconnect.modify_qp(host, host.conn, "err", 100)
    host.deliver({"seq": PEER_SEQ, "ack": 0, "flags": RST}, 150)
    assert host.upcalls == []


def test_second_disconnect_is_a_no_op() -> None:
    host = passive_host()
    disconnect.modify_qp(host, host.conn, "err", 100)
    disconnect.modify_qp(host, host.conn, "err", 110)
    disconnect.modify_qp(host, host.conn, "sqd", 120)
    assert [t.segment.flags for t in host.wire] == [RST | ACK]


def test_decision_table_rows() -> None:
    from mpa_emu.stacks.irdma.offload import IwQp

    fin = IwQp(hw_tcp_state=TcpState.CLOSE_WAIT, last_aeq=Ae.LLP_FIN_RECEIVED)
    assert disconnect.disconn_decision(fin) == (True, 0, False)
    reset = IwQp(hw_tcp_state=TcpState.CLOSED, last_aeq=Ae.LLP_CONNECTION_RESET)
    assert disconnect.disconn_decision(reset) == (True, -ECONNRESET, True)
    reset_not_rts = IwQp(ibqp_state=IbQpState.SQD, hw_tcp_state=TcpState.CLOSED,
                         last_aeq=Ae.LLP_CONNECTION_RESET)
    assert disconnect.disconn_decision(reset_not_rts) == (False, 0, True)
    complete = IwQp(hw_tcp_state=TcpState.TIME_WAIT, last_aeq=Ae.LLP_CLOSE_COMPLETE)
    assert disconnect.disconn_decision(complete) == (False, 0, True)
    bad = IwQp(hw_tcp_state=TcpState.ESTABLISHED, last_aeq=Ae.BAD_CLOSE)
    assert disconnect.disconn_decision(bad) == (False, 0, True)
    no_cm_id = IwQp(cm_id=False)
    assert disconnect.disconn_decision(no_cm_id) == (False, 0, True)
    alive = IwQp()
    assert disconnect.disconn_decision(alive) == (False, 0, False)
    assert disconnect.disconn_decision(alive, device_reset=True) == (False, 0, True)


def test_ae_for_a_released_qp_is_recorded_and_dropped() -> None:
    host = passive_host()
    host.nic_qp = None
    disconnect.on_ae(host, host.conn, Ae.LLP_FIN_RECEIVED, 5)
    assert host.upcalls == [] and host.records[-1][0] == "ae_dropped"


def test_upcalls_wait_for_establish_comp_on_a_node_not_yet_accelerated() -> None:
    host = passive_host()
    host.accelerated = False  # irdma_accept still waiting for its RTS AE
    host.deliver({"seq": PEER_SEQ, "ack": 0, "flags": RST}, 50)
    assert host.upcalls == [] and host.node_alive
    assert [k for k, _ in host.records][-1] == "worker_blocked"
    host.accelerated = True
    disconnect.establish_complete(host, host.conn, 70)
    assert host.upcalls == [(IwEvent.DISCONNECT, -ECONNRESET, 70), (IwEvent.CLOSE, 0, 70)]
    assert not host.node_alive
