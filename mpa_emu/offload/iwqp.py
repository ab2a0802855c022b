"""The driver's view of one QP (``struct irdma_qp``): the fields the disconnect path of
cm.c, hw.c and verbs.c reads and writes.

The NIC (:class:`mpa_emu.offload.qp.OffloadedQp`) has its own, true state; these are the
driver's copies, refreshed from each AEQE by ``irdma_process_aeq`` and changed by
``irdma_modify_qp`` and ``irdma_handle_close_entry``.
"""

from __future__ import annotations

from dataclasses import dataclass

from mpa_emu.offload.states import Ae, IbQpState, IwarpState, TcpState


@dataclass(slots=True)
class IwQp:
    """``struct irdma_qp`` fields used by the disconnect decision table."""

    ibqp_state: IbQpState = IbQpState.RTS
    """``iwqp->ibqp_state``: the verbs state the ULP last set."""
    iwarp_state: IwarpState = IwarpState.RTS
    """``iwqp->iwarp_state``: the state the driver last asked the NIC for."""
    hw_tcp_state: TcpState = TcpState.ESTABLISHED
    """``iwqp->hw_tcp_state``: set to ESTABLISHED by the RTS modify, then from each AE."""
    hw_iwarp_state: IwarpState = IwarpState.RTS
    last_aeq: Ae | None = None
    close_timer_started: int = 0
    """``atomic_t close_timer_started``: only the first increment schedules the timer."""
    cm_id: bool = True
    """``iwqp->cm_id != NULL``: cleared when the CLOSE upcall is decided."""
    flush_issued: bool = False
    rts_ae_rcvd: bool = False
    term_flags: int = 0
    """``sc_qp.term_flags``: IRDMA_TERM_SENT, IRDMA_TERM_RCVD, IRDMA_TERM_DONE."""
    terminate_at: int | None = None
    """Deadline (ns) of ``iwqp->terminate_timer``, ``None`` when it is not pending."""
    parked: tuple[tuple[bool, int, bool], ...] = ()
    """Decisions of ``irdma_cm_disconn_true`` whose upcalls wait on ``establish_comp``
    (the node is not accelerated yet): (issue_disconn, status, issue_close). A tuple,
    so that the many QPs with nothing parked share the empty one."""
