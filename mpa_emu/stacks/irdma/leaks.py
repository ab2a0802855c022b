"""Why the kernel keeps a node: the reasons :meth:`mpa_emu.stacks.irdma.core.CmCore.leak_report`
gives for every node still in the table.

A node counting down (a retransmission or close entry, a pending qhash completion) is
not a leak. Otherwise each state that can hold a node forever has the kernel's reason:
a state without a timer, a reference an error path forgot, or the application's turn.
"""

from __future__ import annotations

from mpa_emu.stacks.irdma.contract import CoreOps
from mpa_emu.stacks.irdma.node import CmNode
from mpa_emu.stacks.irdma.states import CmState

S = CmState

_BY_STATE = {
    S.FIN_WAIT2: "FIN_WAIT2 has no timer and the peer never sent its FIN "
                 "(irdma_handle_ack_pkt moves FIN_WAIT1 there without a close entry)",
    S.MPAREJ_RCVD: "MPAREJ_RCVD waits for the peer's FIN or irdma_cm_close "
                   "(irdma_handle_rcv_mpa sets no timer)",
    S.MPAREQ_RCVD: "MPA request indicated; the application has not accepted or rejected "
                   "(no timeout after irdma_handle_rcv_mpa)",
    S.CLOSING: "CLOSING has no retransmission entry: the ACK of our FIN never came "
               "(irdma_handle_fin_pkt cleans the FIN's entry up)",
    S.LISTENER_DESTROYED: "listener destroyed while the application held the request: "
                          "waits for accept/reject (irdma_dec_refcnt_listen keeps "
                          "MPAREQ_RCVD nodes)",
    S.OFFLOADED: "offloaded: the QP owns the connection until it is closed",
}


def leak_reason(n: CmNode, known: str | None, *, gen: int = 2) -> str | None:
    """The reason ``n`` stays in the table; ``known`` is the one an error path recorded
    (the first cause). None while the node still counts down, or when no reason is known
    (a bug). ``gen`` is the hardware generation (GEN_2 sends nothing without an AH)."""
    if known is not None:
        return known
    if n.send_entry is not None or n.close_entry is not None or n.qhash_pending:
        return None  # still counting down: not a leak
    st = n.state
    reason = _BY_STATE.get(st)
    if reason is not None:
        return reason
    if st == S.ESTABLISHED and not n.client:
        return ("passive ESTABLISHED without an MPA request: no timeout (irdma_handle_ack_pkt "
                "sets none)")
    if st == S.SYN_SENT:
        return ("SYN_SENT without a retransmission entry: a bare ACK passing "
                "irdma_check_seq ran cleanup (irdma_handle_ack_pkt), or the MPA "
                "request could not be built (irdma_handle_synack_pkt ignores "
                "irdma_send_mpa_request's error): no timer, no timeout")
    if st == S.SYN_RCVD:
        return ("SYN_RCVD without a SYN-ACK entry (the AH failed: "
                "irdma_send_syn_cqp_callback could not form the SYN-ACK)")
    if st == S.CLOSED and n.refcnt > 0:
        return "CLOSED node with a leaked reference"
    if st in (S.LAST_ACK, S.FIN_WAIT1) and not n.ah_valid and gen == 2:
        # irdma_send_fin -> irdma_form_ah_cm_frame: no AH (the asynchronous AH of a
        # passive node not created yet, or failed), so no FIN and no entry
        return (f"{st.name} without a FIN entry: the FIN could not be built without an "
                "AH, nothing retransmits it and no timer ends the node")
    return None


def leak_report(cm: CoreOps) -> list[tuple[int, CmState, str | None]]:
    """Every node still in ``cm``'s table with the reason the kernel keeps it (None when
    the emulator cannot name one: that would be a bug), each recorded in the trace as
    ``kernel_leak`` (:meth:`mpa_emu.stacks.irdma.core.CmCore.leak_report`)."""
    out: list[tuple[int, CmState, str | None]] = []
    for conn in sorted(cm.nodes.by_conn):
        n = cm.nodes.by_conn[conn]
        reason = leak_reason(n, cm.leaks.get(n.conn), gen=cm.config.gen)
        out.append((conn, n.state, reason))
        cm.base.record("kernel_leak", "irdma_rem_ref_cm_node", conn=conn, state=n.state.name,
                       refcnt=n.refcnt, reason=reason)
    return out
