"""The driver's view of one QP (``struct irdma_qp``): the fields the disconnect path of
cm.c, hw.c and verbs.c reads and writes.

The NIC (:class:`mpa_emu.offload.qp.OffloadedQp`) has its own, true state; these are the
driver's copies, refreshed from each AEQE by ``irdma_process_aeq`` and changed by
``irdma_modify_qp`` and ``irdma_handle_close_entry``. The emulator's QP subclasses
:class:`IwQp` (its ``iwqp`` is itself), so both live in one allocation, as ``struct
irdma_qp`` embeds the hardware QP; an :class:`IwQp` can still stand alone.
"""

from __future__ import annotations

from mpa_emu.offload.states import Ae, IbQpState, IwarpState, TcpState

# One lives per offloaded connection, so the states and yes/no fields read only a few
# times per connection share one int, each stored as its difference (XOR) from the
# value a new QP has: a fresh QP holds 0 and an established one 1 (rts_ae_rcvd), small
# ints every QP shares.
_RTS_AE_RCVD = 0x1
_FLUSH_ISSUED = 0x2
_NO_CM_ID = 0x4
_IBQP_SHIFT = 4
_IWARP_SHIFT = 8
_HW_IWARP_SHIFT = 12
_STATE_MASK = 0xF

_IBQP = tuple(sorted(IbQpState, key=int))
_IWARP = tuple(sorted(IwarpState, key=int))
_IBQP0 = int(IbQpState.RTS)
_IWARP0 = int(IwarpState.RTS)


class IwQp:
    """``struct irdma_qp`` fields used by the disconnect decision table."""

    __slots__ = ("_bits", "close_timer_started", "hw_tcp_state", "last_aeq", "parked",
                 "term_flags", "terminate_at")

    def __init__(self, ibqp_state: IbQpState = IbQpState.RTS,
                 iwarp_state: IwarpState = IwarpState.RTS,
                 hw_tcp_state: TcpState = TcpState.ESTABLISHED,
                 hw_iwarp_state: IwarpState = IwarpState.RTS, last_aeq: Ae | None = None,
                 close_timer_started: int = 0, cm_id: bool = True,
                 flush_issued: bool = False, rts_ae_rcvd: bool = False,
                 term_flags: int = 0, terminate_at: int | None = None,
                 parked: tuple[tuple[bool, int, bool], ...] = ()) -> None:
        self._bits = 0
        # Read on every AE: slots of their own (as properties they cost the cycle time).
        self.hw_tcp_state = hw_tcp_state
        """``iwqp->hw_tcp_state``: set to ESTABLISHED by the RTS modify, then from each
        AE."""
        self.term_flags = term_flags
        """``sc_qp.term_flags``: IRDMA_TERM_SENT, IRDMA_TERM_RCVD, IRDMA_TERM_DONE."""
        self.close_timer_started = close_timer_started
        """``atomic_t close_timer_started``: only the first increment schedules the
        timer."""
        self.last_aeq = last_aeq
        self.terminate_at = terminate_at
        """Deadline (ns) of ``iwqp->terminate_timer``, ``None`` when it is not pending."""
        self.parked = parked
        """Decisions of ``irdma_cm_disconn_true`` whose upcalls wait on ``establish_comp``
        (the node is not accelerated yet): (issue_disconn, status, issue_close). A tuple,
        so that the many QPs with nothing parked share the empty one."""
        if ibqp_state is not IbQpState.RTS or iwarp_state is not IwarpState.RTS \
                or hw_iwarp_state is not IwarpState.RTS:
            self.ibqp_state = ibqp_state
            self.iwarp_state = iwarp_state
            self.hw_iwarp_state = hw_iwarp_state
        if not cm_id:
            self.cm_id = False
        if flush_issued:
            self.flush_issued = True
        if rts_ae_rcvd:
            self.rts_ae_rcvd = True

    @property
    def ibqp_state(self) -> IbQpState:
        """``iwqp->ibqp_state``: the verbs state the ULP last set."""
        return _IBQP[((self._bits >> _IBQP_SHIFT) & _STATE_MASK) ^ _IBQP0]

    @ibqp_state.setter
    def ibqp_state(self, value: IbQpState) -> None:
        self._bits = ((self._bits & ~(_STATE_MASK << _IBQP_SHIFT))
                      | ((value ^ _IBQP0) << _IBQP_SHIFT))

    @property
    def iwarp_state(self) -> IwarpState:
        """``iwqp->iwarp_state``: the state the driver last asked the NIC for."""
        return _IWARP[((self._bits >> _IWARP_SHIFT) & _STATE_MASK) ^ _IWARP0]

    @iwarp_state.setter
    def iwarp_state(self, value: IwarpState) -> None:
        self._bits = ((self._bits & ~(_STATE_MASK << _IWARP_SHIFT))
                      | ((value ^ _IWARP0) << _IWARP_SHIFT))

    @property
    def hw_iwarp_state(self) -> IwarpState:
        """``iwqp->hw_iwarp_state``."""
        return _IWARP[((self._bits >> _HW_IWARP_SHIFT) & _STATE_MASK) ^ _IWARP0]

    @hw_iwarp_state.setter
    def hw_iwarp_state(self, value: IwarpState) -> None:
        self._bits = ((self._bits & ~(_STATE_MASK << _HW_IWARP_SHIFT))
                      | ((value ^ _IWARP0) << _HW_IWARP_SHIFT))

    @property
    def cm_id(self) -> bool:
        """``iwqp->cm_id != NULL``: cleared when the CLOSE upcall is decided."""
        return not self._bits & _NO_CM_ID

    @cm_id.setter
    def cm_id(self, value: bool) -> None:
        self._bits = self._bits & ~_NO_CM_ID if value else self._bits | _NO_CM_ID

    @property
    def flush_issued(self) -> bool:
        """``iwqp->flush_issued``."""
        return bool(self._bits & _FLUSH_ISSUED)

    @flush_issued.setter
    def flush_issued(self, value: bool) -> None:
        self._bits = self._bits | _FLUSH_ISSUED if value else self._bits & ~_FLUSH_ISSUED

    @property
    def rts_ae_rcvd(self) -> bool:
        """``iwqp->rts_ae_rcvd``."""
        return bool(self._bits & _RTS_AE_RCVD)

    @rts_ae_rcvd.setter
    def rts_ae_rcvd(self, value: bool) -> None:
        self._bits = self._bits | _RTS_AE_RCVD if value else self._bits & ~_RTS_AE_RCVD

    def __repr__(self) -> str:
        return (f"IwQp(ibqp_state={self.ibqp_state!r}, iwarp_state={self.iwarp_state!r}, "
                f"hw_tcp_state={self.hw_tcp_state!r}, "
                f"hw_iwarp_state={self.hw_iwarp_state!r}, last_aeq={self.last_aeq!r}, "
                f"close_timer_started={self.close_timer_started!r}, cm_id={self.cm_id!r}, "
                f"flush_issued={self.flush_issued!r}, rts_ae_rcvd={self.rts_ae_rcvd!r}, "
                f"term_flags={self.term_flags!r}, terminate_at={self.terminate_at!r}, "
                f"parked={self.parked!r})")
