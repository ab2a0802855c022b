"""A freed node's retransmission entry stops. In the kernel the final put removes the node
from cm_hash_tbl, and irdma_timer_list_prep only walks that table, so the entry is never
seen again."""

from __future__ import annotations

from helpers.audit_peer import MS, listener_destroyed_gen1
from mpa_emu.stacks.irdma.states import CmState


def test_no_frame_leaves_a_node_after_it_was_freed() -> None:
    # GEN_1: the listener's RST makes the node LISTENER_DESTROYED and drops its base
    # reference; the stray SYN-ACK's send entry then holds the only one. irdma_cm_close
    # (LISTENER_DESTROYED: rem_ref) frees the node.
    p, conn = listener_destroyed_gen1()
    p.at(6 * MS)
    view = p.core.node(conn)
    assert view is not None and view.state == CmState.LISTENER_DESTROYED
    p.core.close(conn, now_ns=p.now)
    assert p.core.node(conn) is None
    assert p.run_out() == []
    [leak] = [r for r in p.core.trace.records  # type: ignore[union-attr]
              if r.kind == "kernel_leak" and r.fn == "irdma_destroy_connection"]
    assert leak.fields["conn"] == conn
