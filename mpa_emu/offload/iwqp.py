"""The driver's view of one QP (``struct irdma_qp``): the fields the disconnect path of
cm.c, hw.c and verbs.c reads and writes.

The NIC (:class:`mpa_emu.offload.qp.OffloadedQp`) has its own, true state; these are the
driver's copies, refreshed from each AEQE by ``irdma_process_aeq`` and changed by
``irdma_modify_qp`` and ``irdma_handle_close_entry``.
"""

from __future__ import annotations

from mpa_emu.offload.states import Ae, IbQpState, IwarpState, TcpState

# One lives per offloaded connection, so the states, yes/no fields, term_flags and
# close_timer_started share one int, each stored as its difference (XOR) from the value
# a new QP has: a fresh QP holds 0 and an established one 1 (rts_ae_rcvd), small ints
# every QP shares.
_RTS_AE_RCVD = 0x1
_FLUSH_ISSUED = 0x2
_NO_CM_ID = 0x4
_IBQP_SHIFT = 4
_IWARP_SHIFT = 8
_HW_TCP_SHIFT = 12
_HW_IWARP_SHIFT = 16
_STATE_MASK = 0xF
_TERM_SHIFT = 20
_TERM_MASK = 0xFF
_CLOSE_TIMER_SHIFT = 28
_LOW_MASK = (1 << _CLOSE_TIMER_SHIFT) - 1

_IBQP = tuple(sorted(IbQpState, key=int))
_IWARP = tuple(sorted(IwarpState, key=int))
_TCP = tuple(sorted(TcpState, key=int))
_IBQP0 = int(IbQpState.RTS)
_IWARP0 = int(IwarpState.RTS)
_TCP0 = int(TcpState.ESTABLISHED)


class IwQp:
    """``struct irdma_qp`` fields used by the disconnect decision table."""

    __slots__ = ("_bits", "last_aeq", "parked", "terminate_at")

    def __init__(self, ibqp_state: IbQpState = IbQpState.RTS,
                 iwarp_state: IwarpState = IwarpState.RTS,
                 hw_tcp_state: TcpState = TcpState.ESTABLISHED,
                 hw_iwarp_state: IwarpState = IwarpState.RTS, last_aeq: Ae | None = None,
                 close_timer_started: int = 0, cm_id: bool = True,
                 flush_issued: bool = False, rts_ae_rcvd: bool = False,
                 term_flags: int = 0, terminate_at: int | None = None,
                 parked: tuple[tuple[bool, int, bool], ...] = ()) -> None:
        self._bits = 0
        self.last_aeq = last_aeq
        self.terminate_at = terminate_at
        """Deadline (ns) of ``iwqp->terminate_timer``, ``None`` when it is not pending."""
        self.parked = parked
        """Decisions of ``irdma_cm_disconn_true`` whose upcalls wait on ``establish_comp``
        (the node is not accelerated yet): (issue_disconn, status, issue_close). A tuple,
        so that the many QPs with nothing parked share the empty one."""
        if (ibqp_state is not IbQpState.RTS or iwarp_state is not IwarpState.RTS
                or hw_tcp_state is not TcpState.ESTABLISHED
                or hw_iwarp_state is not IwarpState.RTS):
            self.ibqp_state = ibqp_state
            self.iwarp_state = iwarp_state
            self.hw_tcp_state = hw_tcp_state
            self.hw_iwarp_state = hw_iwarp_state
        if close_timer_started:
            self.close_timer_started = close_timer_started
        if not cm_id:
            self.cm_id = False
        if flush_issued:
            self.flush_issued = True
        if rts_ae_rcvd:
            self.rts_ae_rcvd = True
        if term_flags:
            self.term_flags = term_flags

    def _set(self, mask: int, value: int) -> None:
        self._bits = (self._bits & ~mask) | value

    @property
    def ibqp_state(self) -> IbQpState:
        """``iwqp->ibqp_state``: the verbs state the ULP last set."""
        return _IBQP[((self._bits >> _IBQP_SHIFT) & _STATE_MASK) ^ _IBQP0]

    @ibqp_state.setter
    def ibqp_state(self, value: IbQpState) -> None:
        self._set(_STATE_MASK << _IBQP_SHIFT, (int(value) ^ _IBQP0) << _IBQP_SHIFT)

    @property
    def iwarp_state(self) -> IwarpState:
        """``iwqp->iwarp_state``: the state the driver last asked the NIC for."""
        return _IWARP[((self._bits >> _IWARP_SHIFT) & _STATE_MASK) ^ _IWARP0]

    @iwarp_state.setter
    def iwarp_state(self, value: IwarpState) -> None:
        self._set(_STATE_MASK << _IWARP_SHIFT, (int(value) ^ _IWARP0) << _IWARP_SHIFT)

    @property
    def hw_tcp_state(self) -> TcpState:
        """``iwqp->hw_tcp_state``: set to ESTABLISHED by the RTS modify, then from each
        AE."""
        return _TCP[((self._bits >> _HW_TCP_SHIFT) & _STATE_MASK) ^ _TCP0]

    @hw_tcp_state.setter
    def hw_tcp_state(self, value: TcpState) -> None:
        self._set(_STATE_MASK << _HW_TCP_SHIFT, (int(value) ^ _TCP0) << _HW_TCP_SHIFT)

    @property
    def hw_iwarp_state(self) -> IwarpState:
        """``iwqp->hw_iwarp_state``."""
        return _IWARP[((self._bits >> _HW_IWARP_SHIFT) & _STATE_MASK) ^ _IWARP0]

    @hw_iwarp_state.setter
    def hw_iwarp_state(self, value: IwarpState) -> None:
        self._set(_STATE_MASK << _HW_IWARP_SHIFT,
                  (int(value) ^ _IWARP0) << _HW_IWARP_SHIFT)

    @property
    def close_timer_started(self) -> int:
        """``atomic_t close_timer_started``: only the first increment schedules the
        timer."""
        return self._bits >> _CLOSE_TIMER_SHIFT

    @close_timer_started.setter
    def close_timer_started(self, value: int) -> None:
        if value < 0:
            raise ValueError("close_timer_started counts up from 0")
        self._bits = (self._bits & _LOW_MASK) | (value << _CLOSE_TIMER_SHIFT)

    @property
    def cm_id(self) -> bool:
        """``iwqp->cm_id != NULL``: cleared when the CLOSE upcall is decided."""
        return not self._bits & _NO_CM_ID

    @cm_id.setter
    def cm_id(self, value: bool) -> None:
        self._set(_NO_CM_ID, 0 if value else _NO_CM_ID)

    @property
    def flush_issued(self) -> bool:
        """``iwqp->flush_issued``."""
        return bool(self._bits & _FLUSH_ISSUED)

    @flush_issued.setter
    def flush_issued(self, value: bool) -> None:
        self._set(_FLUSH_ISSUED, _FLUSH_ISSUED if value else 0)

    @property
    def rts_ae_rcvd(self) -> bool:
        """``iwqp->rts_ae_rcvd``."""
        return bool(self._bits & _RTS_AE_RCVD)

    @rts_ae_rcvd.setter
    def rts_ae_rcvd(self, value: bool) -> None:
        self._set(_RTS_AE_RCVD, _RTS_AE_RCVD if value else 0)

    @property
    def term_flags(self) -> int:
        """``sc_qp.term_flags``: IRDMA_TERM_SENT, IRDMA_TERM_RCVD, IRDMA_TERM_DONE."""
        return (self._bits >> _TERM_SHIFT) & _TERM_MASK

    @term_flags.setter
    def term_flags(self, value: int) -> None:
        if not 0 <= value <= _TERM_MASK:
            raise ValueError(f"term_flags out of range: {value}")
        self._set(_TERM_MASK << _TERM_SHIFT, value << _TERM_SHIFT)

    def __repr__(self) -> str:
        return (f"IwQp(ibqp_state={self.ibqp_state!r}, iwarp_state={self.iwarp_state!r}, "
                f"hw_tcp_state={self.hw_tcp_state!r}, "
                f"hw_iwarp_state={self.hw_iwarp_state!r}, last_aeq={self.last_aeq!r}, "
                f"close_timer_started={self.close_timer_started!r}, cm_id={self.cm_id!r}, "
                f"flush_issued={self.flush_issued!r}, rts_ae_rcvd={self.rts_ae_rcvd!r}, "
                f"term_flags={self.term_flags!r}, terminate_at={self.terminate_at!r}, "
                f"parked={self.parked!r})")
