"""References and the final put: ``irdma_rem_ref_cm_node``,
``irdma_destroy_connection`` and ``irdma_dec_refcnt_listen``.

A node lives while something holds a reference: the application's base reference, a
retransmission entry, a queued event, the lookup of the segment being processed, a
pending qhash completion, a timer tick. The emulator counts them only as far as they
decide when a node is freed or leaks; the last put destroys the node and drops its
listener's reference, and a listener whose last reference goes leaves the listen list.
"""

from __future__ import annotations

from mpa_emu.stacks.irdma import log_lines
from mpa_emu.stacks.irdma.contract import CoreOps
from mpa_emu.stacks.irdma.node import CmNode, Listener
from mpa_emu.stacks.irdma.offload.nic import HwQp
from mpa_emu.stacks.irdma.states import IN_DESTROY_LISTEN


def rem_ref(cm: CoreOps, node: CmNode) -> None:
    """``irdma_rem_ref_cm_node``: drop one reference, destroy at zero."""
    if node.refcnt <= 0:
        cm.base.record("kernel_bug", "irdma_rem_ref_cm_node", conn=node.conn,
                       reason="reference dropped on a freed node (refcount underflow, use after "
                       "free in irdma_rem_ref_cm_node)")
        return
    node.refcnt -= 1
    if node.refcnt == 0:
        destroy_connection(cm, node)


def destroy_connection(cm: CoreOps, node: CmNode) -> None:
    """``irdma_destroy_connection`` after the final put."""
    if node.qp is not None:
        cm.nic.unfiling(node, node.key)  # the QP stays steered once the node is gone
    cm.nodes.remove(node)
    cm.leaks.pop(node.conn, None)
    cm.stats["nodes_destroyed"] += 1
    lst = node.settings.listener
    if not node.accelerated and node.accept_pend and lst is not None:
        if cm.trace is not None:
            log_lines.emit(cm, log_lines.DESTROYED_BEFORE_ESTABLISHED, conn=node.conn)
        lst.pend_accepts_cnt -= 1
    if node.close_entry is not None:
        node.close_entry.live = False
        node.close_entry = None
    # A close entry the QP scheduled goes with the node: its mark too (else one is kept
    # for every connection freed before its QP's close entry fired).
    cm.qp_close_entries.discard(node.conn)
    if node.send_entry is not None:
        # off cm_hash_tbl, the node is never seen by irdma_timer_list_prep again
        node.send_entry.live = False
        node.send_entry = None
        cm.base.record("kernel_leak", "irdma_destroy_connection", conn=node.conn,
                       reason="freed with a retransmission entry: the entry and its buffer are "
                       "never freed, nothing resends them")
    node.rts_deadline = None
    node.ah_valid = False
    qp: HwQp | None = node.qp
    if qp is not None:
        # the QP outlives the node while its TCP still has timers running
        node.qp = None
        cm.nic.node_freed(node.key, qp)
    if cm.trace is not None:
        cm.base.record("node_freed", "irdma_destroy_connection", conn=node.conn,
                       state=node.state.name)
    cm.base.node_freed(node.conn)
    if lst is not None:
        dec_refcnt_listen(cm, lst, free_hanging=False)


def dec_refcnt_listen(cm: CoreOps, lst: Listener, *, free_hanging: bool) -> None:
    """``irdma_dec_refcnt_listen``: with ``free_hanging`` every pending node of the
    listener runs its ``DESTROY_LISTEN`` row on a temporary reference
    (``irdma_reset_list_prep``); the listener goes with its last reference."""
    if free_hanging:
        pending = [n for n in cm.nodes.by_conn.values()
                   if n.settings.listener is lst and not n.accelerated]
        for n in pending:
            n.refcnt += 1  # irdma_reset_list_prep
            cm._dispatch(n, IN_DESTROY_LISTEN, None)
    lst.refcnt -= 1
    if lst.refcnt == 0:
        cm.nodes.remove_listener(lst)
        cm.stats["listen_destroyed"] += 1
        cm.base.record("listener_freed", "irdma_dec_refcnt_listen", listener=lst.ident)
        if cm.trace is not None:
            # apbvt_del: true from irdma_destroy_listen and irdma_destroy_connection
            log_lines.listener_line(cm, log_lines.LISTENER_FREED, lst, active=False,
                                    apbvt_del=True)
