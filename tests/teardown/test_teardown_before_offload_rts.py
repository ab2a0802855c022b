"""An active connection torn down by address before its MPA reply came
(irdma_cm_teardown_connections in MPAREQ_SENT), then the late reply.

irdma_cm_teardown_connections calls irdma_modify_qp(IB_QPS_ERR) on the node's iwqp,
which irdma_connect bound; with no TCP state yet (hw_tcp_state 0) nothing is sent and
the CM node goes on. When the reply comes, irdma_cm_event_connected posts the RTR WQE
(irdma_sc_send_rtt) and calls irdma_modify_qp(IB_QPS_RTS) without checking its return:
verbs.c refuses RTS once ``iwarp_state > IRDMA_QP_STATE_RTS`` (-EINVAL), so the RTR is
never transmitted and no RTS AE comes. irdma_cm_event_connected waits IRDMA_MAX_TIMEOUT
(12 s, "CM: Slow Connection") and sends CONNECT_REPLY with status 0 all the same; the
responder's irdma_accept waits for its own RTS AE (the RTR that never arrives) and fails
with -ECONNRESET.
"""

from __future__ import annotations

from errno import ECONNRESET

from mpa_emu.net import Manual, Network
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.irdma.states import CmState

MS = 1_000_000
A4, B4 = "192.0.2.1", "192.0.2.2"


def test_a_late_reply_after_teardown_sends_no_rtr_and_the_accept_fails() -> None:
    net = Network(6, latency_ns=1 * MS)
    alice = net.add_host("alice", [A4, "192.0.2.3"])
    bob = net.add_host("bob", B4)
    bob.listen(4791, policy=Manual())
    conn = alice.connect(B4, 4791, local_ip=A4)
    net.run(until_ns=20 * MS)
    [request] = bob.events(IwEvent.CONNECT_REQUEST)
    assert alice.node(conn).state == CmState.MPAREQ_SENT
    alice.remove_address(A4)  # irdma_if_notify(ifup=false) -> teardown of the node
    view = alice.qp_state(conn)
    assert view is not None and view.iwarp_state == "ERROR"
    node = alice.node(conn)
    assert node is not None and node.state == CmState.MPAREQ_SENT and node.qp_error
    t0 = net.now_ns
    bob.accept(request.conn)  # the reply is late: it reaches an errored QP
    net.run(until_ns=t0 + 20_000 * MS)
    after = [f.kind for f in net.frames if f.sender == "alice" and f.time_ns >= t0]
    assert "data" not in after  # no RTR (the first FPDU) and nothing after it
    assert not [f for f in net.frames if f.sender == "bob" and f.time_ns >= t0
                and f.kind == "data"]  # bob's NIC never sends a Read Response
    [reply] = alice.events(IwEvent.CONNECT_REPLY)
    assert reply.status == 0 and reply.time_ns - t0 >= 12_000 * MS
    [est] = bob.events(IwEvent.ESTABLISHED)
    assert est.status == -ECONNRESET
    # rdma_cm: iw_cm_accept returns irdma_accept's -ECONNRESET to rdma_accept, and the
    # responder gets no event; the initiator's CONNECT_REPLY(0) is ESTABLISHED (cma_iw_handler)
    assert [e.name for e in bob.cm_events] == ["RDMA_CM_EVENT_CONNECT_REQUEST"]
    assert bob.ulp_steps[-1].iwcm.fn == "iw_cm_accept" and bob.ulp_steps[-1].event is None
    assert [(e.name, e.status) for e in alice.cm_events] == [("RDMA_CM_EVENT_ESTABLISHED", 0)]
