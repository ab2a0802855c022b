"""A QP moved to ERR before it reached RTS (irdma_modify_qp, verbs.c): the IB_QPS_RTS
case refuses with -EINVAL when ``iwarp_state > IRDMA_QP_STATE_RTS``. irdma_cm_event_connected
posts the RTR WQE and ignores that return value, so the RTR is never transmitted, the RTS AE
never comes and CONNECT_REPLY(0) follows the 12 s wait ("Slow Connection", logged only);
the peer's irdma_accept waits for the RTS AE in vain and fails with -ECONNRESET."""

from __future__ import annotations

from errno import ECONNRESET

from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.irdma.states import CmState

from mpa_emu.net import Accept, Network

MS = 1_000_000


def test_qp_error_before_rts_sends_no_rtr_and_the_accept_times_out() -> None:
    net = Network(4, latency_ns=1 * MS)
    alice = net.add_host("alice", "192.0.2.1")
    bob = net.add_host("bob", "192.0.2.2")
    bob.listen(4791, policy=Accept())
    conn = alice.connect(bob, 4791)
    alice.modify_qp_err(conn)  # the application moves its QP to ERR at once
    t0 = net.now_ns
    net.run(until_ns=t0 + 20_000 * MS)
    kinds = [f.kind for f in net.frames if f.sender == "alice"]
    # the RTR would be the first FPDU ("data"): it never leaves the QP
    assert "MPA request" in kinds and "data" not in kinds
    [reply] = alice.events(IwEvent.CONNECT_REPLY)
    assert reply.status == 0 and reply.time_ns - t0 >= 12_000 * MS
    [est] = bob.events(IwEvent.ESTABLISHED)
    assert est.status == -ECONNRESET
    node = alice.node(conn)
    assert node is not None and node.state == CmState.OFFLOADED and node.qp_error


def test_without_the_error_the_rtr_goes_out() -> None:
    net = Network(4, latency_ns=1 * MS)
    alice = net.add_host("alice", "192.0.2.1")
    bob = net.add_host("bob", "192.0.2.2")
    bob.listen(4791, policy=Accept())
    conn = alice.connect(bob, 4791)
    net.run(until_ns=100 * MS)
    [est] = bob.events(IwEvent.ESTABLISHED)
    assert est.status == 0
    kinds = [f.kind for f in net.frames if f.sender == "alice"]
    assert "data" in kinds[kinds.index("MPA request"):]  # the RTR
    view = alice.qp_state(conn)
    assert view is not None and (view.iwarp_state, view.tcp_state) == ("RTS", "ESTABLISHED")
