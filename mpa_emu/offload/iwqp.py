"""The driver's view of one QP (``struct irdma_qp``): the fields the disconnect path of
cm.c, hw.c and verbs.c reads and writes.

The NIC (:class:`mpa_emu.stacks.irdma.offload.qp.OffloadedQp`) has its own, true state; these are
the
driver's copies, refreshed from each AEQE by ``irdma_process_aeq`` and changed by
``irdma_modify_qp`` and ``irdma_handle_close_entry``. The emulator's QP subclasses
:class:`IwQp` (its ``iwqp`` is itself), so both live in one allocation, as ``struct
irdma_qp`` embeds the hardware QP; an :class:`IwQp` can still stand alone.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from mpa_emu.stacks.irdma.offload.states import (
    IB_QPS_RTS,
    QPS_RTS,
    TCP_ESTABLISHED,
    Ae,
    IbQpState,
    IwarpState,
    TcpState,
)
from mpa_emu.wire.interning import SharedRecords


class DriverStates(NamedTuple):
    """The states and yes/no fields of ``struct irdma_qp`` that the driver reads and writes
    only a few times per connection. One lives per offloaded connection, so a QP holds one
    shared record (:data:`STATES`) and a write puts the shared record with the change in
    its place: a fresh QP and an established one hold the same two records as every
    other."""

    ibqp_state: IbQpState
    iwarp_state: IwarpState
    hw_iwarp_state: IwarpState
    cm_id: bool
    flush_issued: bool
    rts_ae_rcvd: bool
    terminate_at: int | None
    """Deadline (ns) of ``iwqp->terminate_timer``, ``None`` when it is not pending."""
    parked: tuple[tuple[bool, int, bool], ...]
    """Decisions of ``irdma_cm_disconn_true`` whose upcalls wait on ``establish_comp``
    (the node is not accelerated yet): (issue_disconn, status, issue_close)."""


STATES: Final[SharedRecords[DriverStates]] = SharedRecords(DriverStates, DriverStates._fields)
"""The shared :class:`DriverStates` records, and the steps between them."""

NEW_QP: Final = STATES.share(DriverStates(IB_QPS_RTS, QPS_RTS, QPS_RTS, True,
                                          False, False, None, ()))
"""A new QP's states."""


class IwQp:
    """``struct irdma_qp`` fields used by the disconnect decision table."""

    __slots__ = ("close_timer_started", "hw_tcp_state", "last_aeq", "states", "term_flags")

    def __init__(self, ibqp_state: IbQpState = IB_QPS_RTS,
                 iwarp_state: IwarpState = QPS_RTS,
                 hw_tcp_state: TcpState = TCP_ESTABLISHED,
                 hw_iwarp_state: IwarpState = QPS_RTS, last_aeq: Ae | None = None,
                 close_timer_started: int = 0, cm_id: bool = True,
                 flush_issued: bool = False, rts_ae_rcvd: bool = False,
                 term_flags: int = 0, terminate_at: int | None = None,
                 parked: tuple[tuple[bool, int, bool], ...] = ()) -> None:
        self.states = NEW_QP
        """The driver's states and flags read a few times per connection (written through
        the properties of the same names)."""
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
        states = (ibqp_state, iwarp_state, hw_iwarp_state, cm_id, flush_issued, rts_ae_rcvd,
                  terminate_at, parked)
        if states != NEW_QP:
            self.states = STATES.share(DriverStates(*states))

    @property
    def ibqp_state(self) -> IbQpState:
        """``iwqp->ibqp_state``: the verbs state the ULP last set."""
        return self.states.ibqp_state

    @ibqp_state.setter
    def ibqp_state(self, value: IbQpState) -> None:
        if self.states.ibqp_state is not value:  # else the value is held already
            self.states = STATES.changed_field(self.states, "ibqp_state", value)

    @property
    def iwarp_state(self) -> IwarpState:
        """``iwqp->iwarp_state``: the state the driver last asked the NIC for."""
        return self.states.iwarp_state

    @iwarp_state.setter
    def iwarp_state(self, value: IwarpState) -> None:
        if self.states.iwarp_state is not value:  # else the value is held already
            self.states = STATES.changed_field(self.states, "iwarp_state", value)

    @property
    def hw_iwarp_state(self) -> IwarpState:
        """``iwqp->hw_iwarp_state``."""
        return self.states.hw_iwarp_state

    @hw_iwarp_state.setter
    def hw_iwarp_state(self, value: IwarpState) -> None:
        if self.states.hw_iwarp_state is not value:  # else the value is held already
            self.states = STATES.changed_field(self.states, "hw_iwarp_state", value)

    @property
    def cm_id(self) -> bool:
        """``iwqp->cm_id != NULL``: cleared when the CLOSE upcall is decided."""
        return self.states.cm_id

    @cm_id.setter
    def cm_id(self, value: bool) -> None:
        if self.states.cm_id is not value:  # else the value is held already
            self.states = STATES.changed_field(self.states, "cm_id", value)

    @property
    def flush_issued(self) -> bool:
        """``iwqp->flush_issued``."""
        return self.states.flush_issued

    @flush_issued.setter
    def flush_issued(self, value: bool) -> None:
        if self.states.flush_issued is not value:  # else the value is held already
            self.states = STATES.changed_field(self.states, "flush_issued", value)

    @property
    def rts_ae_rcvd(self) -> bool:
        """``iwqp->rts_ae_rcvd``."""
        return self.states.rts_ae_rcvd

    @rts_ae_rcvd.setter
    def rts_ae_rcvd(self, value: bool) -> None:
        if self.states.rts_ae_rcvd is not value:  # else the value is held already
            self.states = STATES.changed_field(self.states, "rts_ae_rcvd", value)

    @property
    def terminate_at(self) -> int | None:
        """Deadline (ns) of ``iwqp->terminate_timer``, ``None`` when it is not pending
        (kept in :attr:`states`: few QPs ever start it)."""
        return self.states.terminate_at

    @terminate_at.setter
    def terminate_at(self, value: int | None) -> None:
        if self.states.terminate_at != value:
            self.states = STATES.changed_field(self.states, "terminate_at", value)

    @property
    def parked(self) -> tuple[tuple[bool, int, bool], ...]:
        """Decisions of ``irdma_cm_disconn_true`` whose upcalls wait on
        ``establish_comp`` (the node is not accelerated yet): (issue_disconn, status,
        issue_close), in :attr:`states` (nearly every QP has none)."""
        return self.states.parked

    @parked.setter
    def parked(self, value: tuple[tuple[bool, int, bool], ...]) -> None:
        if self.states.parked != value:
            self.states = STATES.changed_field(self.states, "parked", value)

    def __repr__(self) -> str:
        return (f"IwQp(ibqp_state={self.ibqp_state!r}, iwarp_state={self.iwarp_state!r}, "
                f"hw_tcp_state={self.hw_tcp_state!r}, "
                f"hw_iwarp_state={self.hw_iwarp_state!r}, last_aeq={self.last_aeq!r}, "
                f"close_timer_started={self.close_timer_started!r}, cm_id={self.cm_id!r}, "
                f"flush_issued={self.flush_issued!r}, rts_ae_rcvd={self.rts_ae_rcvd!r}, "
                f"term_flags={self.term_flags!r}, terminate_at={self.terminate_at!r}, "
                f"parked={self.parked!r})")
