"""Rows a peer and a listener destroy can drive are marked reachable (the rows' actions
were right; the marks are what the transition-table test walks)."""

from __future__ import annotations

from helpers.audit_peer import listener_destroyed_gen1
from mpa_emu.stacks.irdma.states import CmState, Input
from mpa_emu.stacks.irdma.transitions import row


def test_listener_destroyed_node_can_run_out_of_retransmissions() -> None:
    p, _ = listener_destroyed_gen1()
    p.run_out()
    expired = [r for r in p.core.trace.records  # type: ignore[union-attr]
               if r.kind == "state_changed" and r.fn == "irdma_retrans_expired"]
    assert [r.fields["old"] for r in expired] == ["LISTENER_DESTROYED"]
    assert row(CmState.LISTENER_DESTROYED, Input.RETRANS_EXPIRED).reachable


def test_late_synack_rows_are_marked_reachable() -> None:
    # the qhash completion sends its SYN-ACK whatever the state (irdma_send_syn_cqp_callback, hw.c);
    # a peer that
    # ACKs the ISN takes the node to ESTABLISHED and on (LAST_ACK after its FIN) first
    for st in (CmState.ESTABLISHED, CmState.LAST_ACK, CmState.MPAREQ_RCVD,
               CmState.OFFLOADED, CmState.LISTENER_DESTROYED):
        assert row(st, Input.QHASH_DONE).reachable, st
    for st in (CmState.SYN_SENT, CmState.MPAREQ_SENT, CmState.MPAREJ_RCVD):
        assert not row(st, Input.QHASH_DONE).reachable  # active nodes wait on no qhash
