"""Disconnect after offload: hw.c's AE handling, ``irdma_modify_qp`` (iWARP ERR/SQD),
the QP close timer and the ``irdma_cm_disconn_true`` decision table (``irdma_cm_disconn``
-> ``irdma_disconnect_worker`` -> ``irdma_cm_disconn_true`` -> ``irdma_qp_disconnect``).

The NIC (:class:`~mpa_emu.stacks.irdma.offload.qp.OffloadedQp`) raises asynchronous events; the core
hands each to :func:`on_ae`. The driver's copies of the QP state live in
``qp.iwqp`` (:class:`~mpa_emu.stacks.irdma.offload.iwqp.IwQp`). Upcalls, the node's close entry and
``irdma_cm_close`` belong to the core and are reached through :class:`DisconnectHost`.

Model choices (documented, deterministic):

* ``irdma_cm_disconn`` queues ``irdma_disconnect_worker`` on a workqueue; here the worker
  runs at once, at the same virtual time, after the state updates of its caller.
* ``irdma_send_cm_event`` blocks DISCONNECT/CLOSE on ``establish_comp`` until the node
  is accelerated (a passive node between accept and the RTR). The worker's decision is
  parked on the QP and delivered by :func:`establish_complete`; when the accept fails
  instead, the kernel's worker never returns, and neither upcall comes.
* TERMINATE (``term_flags``, utils.c and ctrl.c): an abnormal AE on a QP whose hardware
  state is RTS or TERMINATE goes to ``irdma_terminate_connection`` (the Terminate of
  :mod:`mpa_emu.stacks.irdma.offload.terminate`, the terminate timer, TERMINATE); its
  ``IRDMA_AE_TERMINATE_SENT`` sends the FIN; the end of the FIN exchange or the timer
  runs ``irdma_terminate_done`` (ERROR with ``reset_tcp_conn``, then the disconnect
  worker, DISCONNECT(0) and CLOSE). A received Terminate goes to
  ``irdma_terminate_received``. The timer's deadline lives in ``iwqp.terminate_at``; the
  QP reports it as :attr:`~mpa_emu.stacks.irdma.offload.states.Ae.TERMINATE_TIMEOUT`.
"""

from __future__ import annotations

from errno import ECONNRESET
from typing import Any, Final, Protocol

from mpa_emu.stacks.contract.api import NodeWatch
from mpa_emu.stacks.contract.events import IW_CLOSE, IW_DISCONNECT, IwEvent
from mpa_emu.stacks.irdma import log_lines
from mpa_emu.stacks.irdma.offload import terminate as term
from mpa_emu.stacks.irdma.offload.iwqp import IwQp
from mpa_emu.stacks.irdma.offload.nic import HwQp
from mpa_emu.stacks.irdma.offload.states import (
    AE_BAD_CLOSE,
    AE_LLP_CLOSE_COMPLETE,
    AE_LLP_CONNECTION_RESET,
    AE_LLP_FIN_RECEIVED,
    AE_LLP_TERMINATE_RECEIVED,
    AE_RESET_SENT,
    AE_ROE_BAD_LLP_CLOSE,
    AE_RTS,
    AE_TERMINATE_SENT,
    AE_TERMINATE_TIMEOUT,
    IB_QPS_ERR,
    IB_QPS_RTS,
    IB_QPS_SQD,
    QPS_CLOSING,
    QPS_ERROR,
    QPS_RTS,
    QPS_TERMINATE,
    TCP_CLOSE_WAIT,
    TCP_CLOSED,
    TCP_NON_EXISTENT,
    TCP_TIME_WAIT,
    Ae,
)

CLOSE_TIMER_NS: Final = 100_000_000
"""irdma_schedule_cm_timer(IRDMA_TIMER_TYPE_CLOSE): HZ/10."""
TERMINATE_TIMER_NS: Final = 1_000_000_000
"""irdma_terminate_start_timer: ``jiffies + HZ``."""
TERM_SENT: Final = 0x01
TERM_RCVD: Final = 0x02
TERM_DONE: Final = 0x04
"""``IRDMA_TERM_SENT``, ``IRDMA_TERM_RCVD``, ``IRDMA_TERM_DONE`` (type.h)."""


class AcceleratedNode(Protocol):
    """The node field the disconnect worker reads."""

    @property
    def accelerated(self) -> bool:
        """The node reached the end of ``irdma_accept``/``irdma_cm_event_connected``."""


class DisconnectHost(Protocol):
    """What the disconnect path needs from the CM core (one emulated host)."""

    def qp(self, conn: int) -> HwQp | None:
        """The NIC QP of ``conn``, ``None`` before offload or once the node is freed."""

    def has_node(self, conn: int) -> bool:
        """``iwqp->cm_node != NULL``: the CM node still exists."""

    def link_up(self) -> bool:
        """``iwdev->iw_status``."""

    def _send_cm_event(self, conn: int, event: IwEvent, status: int, now_ns: int) -> None:
        """``irdma_send_cm_event``: queue one upcall to the application."""

    def _cm_close(self, conn: int, now_ns: int) -> int:
        """``irdma_cm_close`` on the node (for OFFLOADED: release it); its return value
        (0 or -EINVAL) is ignored by ``irdma_qp_disconnect``."""

    def _schedule_close_entry(self, conn: int, now_ns: int) -> bool:
        """``irdma_schedule_cm_timer(..., IRDMA_TIMER_TYPE_CLOSE)`` with the QP as the
        entry: :func:`handle_close_entry` runs when it fires. ``False`` when the node
        already has a close entry (-EINVAL)."""

    def _collect_qp_frames(self, conn: int) -> None:
        """Move the QP's transmitted frames into the host's outbox."""

    def _cm_node(self, conn: int) -> AcceleratedNode | None:
        """The node of ``conn`` (its ``accelerated`` flag is read), None once freed."""

    def _rts_ae_received(self, conn: int, now_ns: int) -> None:
        """Wake ``irdma_accept`` / ``irdma_cm_event_connected`` waiting for the RTS AE."""

    def _record(self, kind: str, fn: str, now_ns: int, **fields: Any) -> None:
        """Emit one trace record."""


# ---- hw.c: irdma_process_aeq ---------------------------------------------------------


def _recording(core: DisconnectHost) -> bool:
    """Whether ``core._record`` keeps anything. A host with a ``trace`` attribute that is
    ``None`` (a CmCore without tracing) drops every record, so the hot paths below do not
    build their fields (enum names) at all; any other host gets every record."""
    return getattr(core, "trace", True) is not None


def on_ae(core: DisconnectHost, conn: int, ae: Ae, now_ns: int) -> None:
    """Handle one asynchronous event of the QP of ``conn`` as ``irdma_process_aeq`` does.

    Call right after ``qp.next_ae()`` returned ``ae``: the AEQE's TCP and iWARP states are
    read from ``qp.ae_tcp_state`` / ``qp.ae_iwarp_state``.
    """
    qp: HwQp | None = core.qp(conn)
    if qp is None:
        core._record("ae_dropped", "irdma_process_aeq", now_ns, conn=conn,
                    ae=ae.kernel_name, reason="qp_id is already freed")
        return
    if ae is AE_TERMINATE_TIMEOUT:
        core._record("timer_fired", "irdma_terminate_timeout", now_ns, conn=conn)
        terminate_done(core, conn, qp, now_ns, timeout=True)
        return
    iw = qp.iwqp
    # irdma_process_aeq: every QP AE refreshes the driver's copies first.
    iw.hw_tcp_state = qp.ae_tcp_state
    iw.hw_iwarp_state = qp.ae_iwarp_state
    iw.last_aeq = ae
    if _recording(core):
        core._record("ae", "irdma_process_aeq", now_ns, conn=conn, ae=ae.kernel_name,
                    tcp_state=iw.hw_tcp_state.name, iwarp_state=iw.hw_iwarp_state.name)
    # as _recording: any host (a CmCore's watch is its base's)
    watch: NodeWatch | None = getattr(getattr(core, "base", None), "watch", None)
    if watch is not None:
        watch.qp_event(now_ns, conn, ae.kernel_name)
    if ae is AE_RTS:
        iw.rts_ae_rcvd = True
        core._rts_ae_received(conn, now_ns)
    elif ae in (AE_LLP_FIN_RECEIVED, AE_ROE_BAD_LLP_CLOSE):
        _fin_received(core, conn, qp, now_ns)
    elif ae is AE_LLP_CLOSE_COMPLETE:
        if iw.term_flags:
            terminate_done(core, conn, qp, now_ns, timeout=False)
        else:
            cm_disconn(core, conn, now_ns)
    elif ae in (AE_BAD_CLOSE, AE_RESET_SENT):
        _next_iw_state_error(core, conn, qp, now_ns)
        cm_disconn(core, conn, now_ns)
    elif ae is AE_LLP_CONNECTION_RESET:
        if iw.close_timer_started:
            return
        cm_disconn(core, conn, now_ns)
    elif ae is AE_TERMINATE_SENT:
        terminate_send_fin(core, conn, qp, now_ns)
    elif ae is AE_LLP_TERMINATE_RECEIVED:
        terminate_received(core, conn, qp, now_ns)
    else:
        # The abnormal AEs (hw.c's long case list and its default).
        if iw.hw_iwarp_state not in (QPS_RTS, QPS_TERMINATE):
            _next_iw_state_error(core, conn, qp, now_ns)
            cm_disconn(core, conn, now_ns)
        else:
            terminate_connection(core, conn, qp, ae, qp.ae_frame, now_ns)


def _fin_received(core: DisconnectHost, conn: int, qp: HwQp, now_ns: int) -> None:
    iw = qp.iwqp
    if iw.term_flags:
        return
    iw.close_timer_started += 1
    if iw.close_timer_started != 1:
        return
    iw.hw_tcp_state = TCP_CLOSE_WAIT
    if iw.ibqp_state == IB_QPS_RTS:
        # irdma_next_iw_state(CLOSING): the NIC answers the peer's FIN with its own.
        iw.iwarp_state = QPS_CLOSING
        core._record("qp_modify", "irdma_next_iw_state", now_ns, conn=conn,
                    target="CLOSING", reset_tcp_conn=False, rst=False)
        qp.modify_qp("sqd", now_ns)
        core._collect_qp_frames(conn)
        cm_disconn(core, conn, now_ns)
    if core.has_node(conn):
        core._schedule_close_entry(conn, now_ns)


def _next_iw_state_error(core: DisconnectHost, conn: int, qp: HwQp,
                         now_ns: int) -> None:
    # irdma_next_iw_state(ERROR): reset_tcp_conn only when term_flags is set.
    iw = qp.iwqp
    iw.iwarp_state = iw.hw_iwarp_state = QPS_ERROR
    reset = bool(iw.term_flags)
    core._record("qp_modify", "irdma_next_iw_state", now_ns, conn=conn, target="ERROR",
                reset_tcp_conn=reset, rst=reset and qp.tcp_alive)
    qp.modify_qp("err", now_ns, reset_tcp_conn=reset)
    core._collect_qp_frames(conn)


# ---- ctrl.c / utils.c: TERMINATE -----------------------------------------------------

def _start_terminate_timer(core: DisconnectHost, conn: int, iw: IwQp, now_ns: int) -> None:
    # irdma_terminate_start_timer: expires = jiffies + HZ.
    if iw.terminate_at is not None:
        core._record("kernel_bug", "irdma_terminate_start_timer", now_ns, conn=conn,
                    reason="timer_setup + add_timer on a pending terminate_timer; the "
                           "model restarts it")
    iw.terminate_at = now_ns + TERMINATE_TIMER_NS


def terminate_connection(core: DisconnectHost, conn: int, qp: HwQp, ae: Ae,
                         frame: bytes | None, now_ns: int) -> None:
    """``irdma_terminate_connection``: build the Terminate for ``ae``
    (``irdma_bld_terminate_hdr``), start the terminate timer, set ``IRDMA_TERM_SENT``
    and move the QP to TERMINATE with ``IRDMAQP_TERM_SEND_TERM_ONLY``."""
    iw = qp.iwqp
    if iw.term_flags & TERM_SENT:
        return
    ulpdu = term.build_terminate(ae, frame)
    fields = term.terminate_fields(ae, frame)
    _start_terminate_timer(core, conn, iw, now_ns)
    iw.term_flags |= TERM_SENT
    core._record("terminate", "irdma_terminate_connection", now_ns, conn=conn,
                ae=ae.kernel_name, layer=fields.layer, etype=fields.etype,
                error_code=fields.error_code)
    iw.iwarp_state = iw.hw_iwarp_state = QPS_TERMINATE
    qp.modify_qp("terminate", now_ns, term=ulpdu)
    core._collect_qp_frames(conn)


def terminate_send_fin(core: DisconnectHost, conn: int, qp: HwQp,
                       now_ns: int) -> None:
    """``irdma_terminate_send_fin``: TERMINATE with ``IRDMAQP_TERM_SEND_FIN_ONLY``."""
    iw = qp.iwqp
    iw.iwarp_state = iw.hw_iwarp_state = QPS_TERMINATE
    qp.modify_qp("terminate", now_ns, send_fin=True)
    core._collect_qp_frames(conn)


def terminate_received(core: DisconnectHost, conn: int, qp: HwQp,
                       now_ns: int) -> None:
    """``irdma_terminate_received``: check the peer's Terminate; a bad one is answered
    by a Terminate of our own. An RDMAP remote protection/operation error closes at once
    (``irdma_terminate_done``); anything else starts the timer and sends a FIN."""
    iw = qp.iwqp
    frame = qp.ae_frame
    ulpdu = b"" if frame is None else frame[2:2 + int.from_bytes(frame[:2], "big")]
    bad = term.check_received_terminate(ulpdu)
    if bad is not None:
        terminate_connection(core, conn, qp, bad, frame, now_ns)
        return
    iw.term_flags |= TERM_RCVD
    remote = term.remote_error(ulpdu)
    core._record("terminate_received", "irdma_terminate_received", now_ns, conn=conn,
                layer_etype=ulpdu[18] if len(ulpdu) > 18 else None,
                error_code=ulpdu[19] if len(ulpdu) > 19 else None, closes_now=remote)
    if remote:
        terminate_done(core, conn, qp, now_ns, timeout=False)
    else:
        _start_terminate_timer(core, conn, iw, now_ns)
        terminate_send_fin(core, conn, qp, now_ns)


def terminate_done(core: DisconnectHost, conn: int, qp: HwQp, now_ns: int, *,
                   timeout: bool) -> None:
    """``irdma_terminate_done``: once only, stop the timer (unless it fired), move the
    QP to ERROR (``reset_tcp_conn``, because ``term_flags`` is set) and disconnect."""
    iw = qp.iwqp
    first_time = not iw.term_flags & TERM_DONE
    iw.term_flags |= TERM_DONE
    if not first_time:
        return
    if not timeout:
        iw.terminate_at = None
    _next_iw_state_error(core, conn, qp, now_ns)
    cm_disconn(core, conn, now_ns)


# ---- verbs.c: irdma_modify_qp (iWARP, SQD and ERR) -----------------------------------

def modify_qp(core: DisconnectHost, conn: int, target: str, now_ns: int) -> None:
    """``irdma_modify_qp`` to ``"sqd"`` (graceful: FIN) or ``"err"`` (abortive: RST when
    the TCP connection is alive), with the close timer or the immediate disconnect that
    follows. A QP already in error is left alone."""
    qp: HwQp | None = core.qp(conn)
    if qp is None:
        return
    iw = qp.iwqp
    reset_tcp_conn = False
    dont_wait = False
    if target == "sqd":
        if iw.hw_iwarp_state > QPS_RTS:
            return
        if iw.iwarp_state == QPS_CLOSING or iw.iwarp_state < QPS_RTS:
            return
        if iw.iwarp_state > QPS_CLOSING:
            return  # -EINVAL in the kernel; nothing changes
        next_state = QPS_CLOSING
        iw.ibqp_state = IB_QPS_SQD
    elif target == "err":
        if iw.iwarp_state == QPS_ERROR:
            return
        next_state = QPS_ERROR
        # irdma_modify_qp: RST only for a live connection on a link that is up.
        if (iw.hw_tcp_state > TCP_CLOSED and core.link_up()
                and iw.hw_tcp_state != TCP_TIME_WAIT):
            reset_tcp_conn = True
        else:
            dont_wait = True
        iw.ibqp_state = IB_QPS_ERR
    else:
        raise ValueError(f"modify_qp target must be 'sqd' or 'err', got {target!r}")
    in_reset = bool(getattr(core, "rf_reset", False))
    core._record("qp_modify", "irdma_modify_qp", now_ns, conn=conn, target=next_state.name,
                reset_tcp_conn=reset_tcp_conn,
                rst=reset_tcp_conn and qp.tcp_alive and not in_reset)
    if not in_reset:  # irdma_handle_cqp_op: no CQP command reaches a NIC being reset
        qp.modify_qp(target, now_ns,
                     reset_tcp_conn=reset_tcp_conn if target == "err" else None)
    core._collect_qp_frames(conn)
    iw.iwarp_state = next_state
    if iw.ibqp_state <= IB_QPS_RTS:
        return
    if dont_wait:
        if iw.cm_id and iw.hw_tcp_state != TCP_NON_EXISTENT:
            iw.hw_tcp_state = TCP_CLOSED
            iw.last_aeq = AE_RESET_SENT
            cm_disconn(core, conn, now_ns)
        return
    if not core.has_node(conn):
        return
    iw.close_timer_started += 1
    if iw.cm_id and iw.close_timer_started == 1:
        core._schedule_close_entry(conn, now_ns)


# ---- cm.c: the close entry, irdma_cm_disconn, irdma_cm_disconn_true -----------------

def handle_close_entry(core: DisconnectHost, conn: int, now_ns: int) -> None:
    """``irdma_handle_close_entry`` for a QP close entry that came due: a QP whose
    ``cm_id`` is still set is declared closed (RESET_SENT) and disconnected."""
    qp: HwQp | None = core.qp(conn)
    if qp is None:
        return
    iw = qp.iwqp
    core._record("timer_fired", "irdma_handle_close_entry", now_ns, conn=conn,
                cm_id=iw.cm_id)
    if not iw.cm_id:
        return
    iw.hw_tcp_state = TCP_CLOSED
    iw.hw_iwarp_state = QPS_ERROR
    iw.last_aeq = AE_RESET_SENT
    iw.ibqp_state = IB_QPS_ERR
    cm_disconn(core, conn, now_ns)


def cm_disconn(core: DisconnectHost, conn: int, now_ns: int) -> None:
    """``irdma_cm_disconn``: run the disconnect worker for the QP of ``conn``."""
    if core.qp(conn) is None:
        return
    cm_disconn_true(core, conn, now_ns)


def disconn_decision(iw: IwQp, *, device_reset: bool = False) -> tuple[bool, int, bool]:
    """The decision table of ``irdma_cm_disconn_true`` (iWARP) as a pure function of the
    driver's QP copies: ``(issue_disconn, disconn_status, issue_close)``.

    * TERMINATE involved (``term_flags``): DISCONNECT (status 0) and CLOSE.
    * Peer FIN (``hw_tcp_state == CLOSE_WAIT``), or a reset while RTS: DISCONNECT,
      status -ECONNRESET for the reset.
    * TCP CLOSED or TIME_WAIT, a bad close (``IRDMA_AE_RDMAP_ROE_BAD_LLP_CLOSE`` or
      ``IRDMA_AE_BAD_CLOSE``), a reset, a device reset or no ``cm_id``: CLOSE.
    """
    issue_disconn = False
    status = 0
    issue_close = False
    last_ae = iw.last_aeq
    if iw.term_flags:
        issue_disconn = issue_close = True
    elif iw.hw_tcp_state == TCP_CLOSE_WAIT or (
            iw.ibqp_state == IB_QPS_RTS and last_ae is AE_LLP_CONNECTION_RESET):
        issue_disconn = True
        if last_ae is AE_LLP_CONNECTION_RESET:
            status = -ECONNRESET
    if _llp_closed(iw, device_reset) or not iw.cm_id:
        issue_close = True
    return issue_disconn, status, issue_close


def _llp_closed(iw: IwQp, device_reset: bool) -> bool:
    """The second test of ``irdma_cm_disconn_true``: the TCP connection is over (CLOSED,
    TIME_WAIT, a bad close, a reset) or the device is being reset."""
    return (iw.hw_tcp_state in (TCP_CLOSED, TCP_TIME_WAIT)
            or iw.last_aeq in (AE_ROE_BAD_LLP_CLOSE, AE_BAD_CLOSE, AE_LLP_CONNECTION_RESET)
            or device_reset)


def cm_disconn_true(core: DisconnectHost, conn: int, now_ns: int) -> None:
    """``irdma_cm_disconn_true``: decide, then DISCONNECT and/or CLOSE upcalls; a CLOSE
    is followed by ``irdma_qp_disconnect`` -> ``irdma_cm_close`` on the node."""
    qp: HwQp | None = core.qp(conn)
    if qp is None:
        return
    iw = qp.iwqp
    had_cm_id = iw.cm_id
    issue_disconn, status, issue_close = disconn_decision(
        iw, device_reset=bool(getattr(core, "rf_reset", False)))
    if iw.term_flags:
        iw.terminate_at = None  # irdma_terminate_del_timer
    if issue_close:
        iw.cm_id = False
        iw.flush_issued = True
    if _llp_closed(iw, False):
        # irdma_cm_disconn_true: with the TCP connection over, qp->term_flags = 0.
        iw.term_flags = 0
    if _recording(core):
        core._record("disconnect_decision", "irdma_cm_disconn_true", now_ns, conn=conn,
                    hw_tcp_state=iw.hw_tcp_state.name, ibqp_state=iw.ibqp_state.name,
                    last_ae=iw.last_aeq.kernel_name if iw.last_aeq else None,
                    issue_disconn=issue_disconn, status=status, issue_close=issue_close,
                    cm_id=had_cm_id)
    if not had_cm_id or not core.has_node(conn):
        return
    if not (issue_disconn or issue_close):
        return
    node = core._cm_node(conn)
    if node is not None and not node.accelerated:
        # irdma_send_cm_event: DISCONNECT and CLOSE wait for establish_comp.
        iw.parked = (*iw.parked, (issue_disconn, status, issue_close))
        core._record("worker_blocked", "irdma_send_cm_event", now_ns, conn=conn,
                    reason="node not accelerated: the disconnect worker waits on "
                           "establish_comp (forever if the accept fails)")
        return
    _deliver(core, conn, issue_disconn, status, issue_close, now_ns)


def _deliver(core: DisconnectHost, conn: int, issue_disconn: bool, status: int,
             issue_close: bool, now_ns: int) -> None:
    if issue_disconn:
        core._send_cm_event(conn, IW_DISCONNECT, status, now_ns)
    if issue_close:
        core._send_cm_event(conn, IW_CLOSE, 0, now_ns)
        # irdma_qp_disconnect -> irdma_cm_close: for OFFLOADED this releases the node.
        if _recording(core) and log_lines.plays_irdma(core):
            core._record("kernel_log", log_lines.CALL_CLOSE.fn, now_ns,
                        **log_lines.fields(log_lines.CALL_CLOSE, conn=conn))
        core._cm_close(conn, now_ns)


def establish_complete(core: DisconnectHost, conn: int, now_ns: int) -> None:
    """``complete(&cm_node->establish_comp)`` (end of ``irdma_accept`` and
    ``irdma_cm_event_connected``): disconnect workers parked on it deliver now."""
    qp: HwQp | None = core.qp(conn)
    if qp is None or not qp.iwqp.parked:
        return
    parked, qp.iwqp.parked = qp.iwqp.parked, ()
    for issue_disconn, status, issue_close in parked:
        if not core.has_node(conn):
            return
        _deliver(core, conn, issue_disconn, status, issue_close, now_ns)
