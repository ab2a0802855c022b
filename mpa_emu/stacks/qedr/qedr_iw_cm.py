"""qedr_iw_cm.c (drivers/infiniband/hw/qedr/qedr_iw_cm.c): qedr's iw_cm provider, the
upcalls it makes for qed's events and the verbs iw_cm calls.

:class:`QedrIwCm` sits on qed (:class:`~mpa_emu.stacks.qedr.qed_iwarp.QedIwarp`): its
:meth:`qedr_iw_event_handler` is the ``event_cb`` qed calls, and every upcall goes through
:meth:`_upcall`, which fills the event as qedr fills ``struct iw_cm_event``. The
disconnect work qedr queues on ``dev->iwarp_wq`` runs in order after the event that
queued it (:attr:`_work`), as the ordered workqueue does.
"""

from __future__ import annotations

from errno import ECONNREFUSED, EINVAL

from mpa_emu.stacks.contract.events import IwEvent, Upcall
from mpa_emu.stacks.qedr.endpoint import Ep
from mpa_emu.stacks.qedr.qed_iwarp import QedIwarp
from mpa_emu.stacks.qedr.states import ConnectMode, EpState, QedEvent, QpState

_QP_EVENTS = {
    QedEvent.RQ_EMPTY: "IB_EVENT_QP_FATAL", QedEvent.IRQ_FULL: "IB_EVENT_QP_FATAL",
    QedEvent.LLP_TIMEOUT: "IB_EVENT_QP_FATAL",
    QedEvent.REMOTE_PROTECTION_ERROR: "IB_EVENT_QP_ACCESS_ERR",
    QedEvent.CQ_OVERFLOW: "IB_EVENT_QP_FATAL", QedEvent.QP_CATASTROPHIC: "IB_EVENT_QP_FATAL",
    QedEvent.LOCAL_ACCESS_ERROR: "IB_EVENT_QP_ACCESS_ERR",
    QedEvent.REMOTE_OPERATION_ERROR: "IB_EVENT_QP_FATAL",
}
"""qedr_iw_event_handler: the IB event qedr_iw_qp_event raises for each QP error."""


class QedrIwCm(QedIwarp):
    """qedr_iw_cm.c's handlers (see the module docstring)."""

    # ---- qed -> qedr -----------------------------------------------------------------

    def event_cb(self, ep: Ep, event: QedEvent, status: int) -> None:
        """``ep->event_cb`` as qedr registers it."""
        self.qedr_iw_event_handler(ep, event, status)

    def qedr_iw_event_handler(self, ep: Ep, event: QedEvent, status: int) -> None:
        """qedr_iw_event_handler: the switch on ``params->event``."""
        self.tr("qed_event", "qedr_iw_event_handler", conn=ep.conn, event=event.name,
                status=status)
        if event == QedEvent.MPA_REQUEST:
            self.qedr_iw_mpa_request(ep, status)
        elif event == QedEvent.ACTIVE_MPA_REPLY:
            self.qedr_iw_mpa_reply(ep)
        elif event == QedEvent.PASSIVE_COMPLETE:
            self.qedr_iw_passive_complete(ep, status)
            self._connect_done(ep)
        elif event == QedEvent.ACTIVE_COMPLETE:
            self.qedr_iw_active_complete(ep, status)
            self._connect_done(ep)
        elif event == QedEvent.DISCONNECT:
            self.qedr_iw_disconnect_event(ep, status)
        elif event == QedEvent.CLOSE:
            self.qedr_iw_close_event(ep, status)
        elif event in _QP_EVENTS:
            self.qedr_iw_qp_event(ep, _QP_EVENTS[event], f"QED_IWARP_EVENT_{event.name}")
        elif event == QedEvent.TERMINATE_RECEIVED:
            self.klog("notice", "qedr_iw_event_handler", "Got terminate message")
        else:
            self.klog("notice", "qedr_iw_event_handler",
                      f"Unknown event received {int(event)}")

    def _connect_done(self, ep: Ep) -> None:
        """iw_cm took the CONNECT_REPLY (``cm_conn_rep_handler``) or the ESTABLISHED
        (``cm_conn_est_handler``): ``IWCM_F_CONNECT_WAIT`` is cleared and the
        application's calls blocked on it go on, after this event (the core's
        ``_iw_cm_resume``, queued in order)."""
        if not ep.connect_wait:
            return
        ep.connect_wait = False
        if ep.waiting:
            self._work.append(lambda: self._iw_cm_resume(ep))

    def _iw_cm_resume(self, ep: Ep) -> None:
        """The calls blocked on ``IWCM_F_CONNECT_WAIT`` (core.py)."""
        raise NotImplementedError

    def _upcall(self, fn: str, ep: Ep, event: IwEvent, status: int, *,
                pdata: bool = False, listener: int | None = None) -> None:
        """``cm_id->event_handler``: the event as qedr fills it. ``pdata``: the event
        carries ``cm_info``'s private data (CONNECT_REQUEST, CONNECT_REPLY), its length
        a u8 in ``struct iw_cm_event``."""
        data, length, past = b"", 0, 0
        if pdata:
            length = ep.private_data_len & 0xFF
            if length != ep.private_data_len:
                self.tr("kernel_quirk", fn, conn=ep.conn,
                        quirk="private_data_len truncated to the u8 of iw_cm_event",
                        private_data_len=ep.private_data_len, reported=length)
            data = ep.private_data[:length]
            data += bytes(length - len(data))
            past = max(0, min(length, ep.pd_hdr + length - ep.ulp_data_len))
        self._upcalls.append(Upcall(event, ep.conn, status, self._now, ep.local_ip,
                                    ep.local_port, ep.remote_ip, ep.remote_port, data,
                                    length, ep.ird, ep.ord, listener, past))
        self.tr("upcall", fn, conn=ep.conn, event=event.name, status=status)

    def qedr_iw_mpa_request(self, ep: Ep, status: int) -> None:
        """qedr_iw_mpa_request: CONNECT_REQUEST to the listener's cm_id, with
        ``(u8)private_data_len``, ``ord`` and ``ird`` of cm_info."""
        lst = None if ep.listener is None else self._listeners.get(ep.listener)
        if lst is None:
            # qedr_iw_destroy_listen freed the qedr_iw_listener that qed still has as
            # this ep's cb_context: the kernel reads freed memory here
            self.tr("kernel_bug", "qedr_iw_mpa_request", conn=ep.conn,
                    bug="the listener was freed by qedr_iw_destroy_listen (use after free)")
            return
        ep.held = True
        self._upcall("qedr_iw_mpa_request", ep, IwEvent.CONNECT_REQUEST, status,
                     pdata=True, listener=lst.ident)

    def qedr_iw_issue_event(self, ep: Ep, event: IwEvent, status: int, fn: str) -> None:
        """qedr_iw_issue_event: ``ird``/``ord`` of cm_info, the private data only for
        CONNECT_REPLY; nothing when the ep has no cm_id."""
        if ep.has_cm_id:
            self._upcall(fn, ep, event, status, pdata=event == IwEvent.CONNECT_REPLY)

    def qedr_iw_close_event(self, ep: Ep, status: int) -> None:
        """qedr_iw_close_event: CLOSE, then the ep's reference (and its cm_id) dropped."""
        self.qedr_iw_issue_event(ep, IwEvent.CLOSE, status, "qedr_iw_close_event")
        ep.closed_event = True
        if not ep.work_refs:  # kref_put: the last reference frees the ep and its cm_id
            ep.has_cm_id = False
            self._release(ep)

    def qedr_iw_qp_event(self, ep: Ep, ib_event: str, text: str) -> None:
        """qedr_iw_qp_event: "QP error received" and the IB event to the QP's handler."""
        self.klog("notice", "qedr_iw_qp_event", f"QP error received: {text}")
        self.tr("qp_event", "qedr_iw_qp_event", conn=ep.conn, event=ib_event)

    def qedr_iw_disconnect_event(self, ep: Ep, status: int) -> None:
        """qedr_iw_disconnect_event: the disconnect work, queued on ``iwarp_wq``."""
        ep.work_refs += 1  # kref_get: close must not free the ep under the work
        self._work.append(lambda: self.qedr_iw_disconnect_worker(ep, status))

    def qedr_iw_disconnect_worker(self, ep: Ep, status: int) -> None:
        """qedr_iw_disconnect_worker: once per QP (QEDR_IWARP_CM_WAIT_FOR_DISCONNECT),
        DISCONNECT with the status, then the QP to SQD (graceful, status 0: a FIN) or ERR
        (a RST) through qed_rdma_modify_qp."""
        if not ep.disconnect_seen:
            ep.disconnect_seen = True
            self.qedr_iw_issue_event(ep, IwEvent.DISCONNECT, status,
                                     "qedr_iw_disconnect_worker")
            self.qed_iwarp_modify_qp(ep, QpState.ERROR if status else QpState.CLOSING,
                                     internal=False)
        ep.work_refs -= 1  # kref_put
        if ep.closed_event and not ep.work_refs:
            ep.has_cm_id = False
            self._release(ep)

    def qedr_iw_passive_complete(self, ep: Ep, status: int) -> None:
        """qedr_iw_passive_complete: after a reject (-ECONNREFUSED without a QP) the ep is
        released with no event; otherwise ESTABLISHED with the status, and CLOSE after it
        when the status is an error."""
        if status == -ECONNREFUSED and ep.qp is None:
            self.klog("debug", "qedr_iw_passive_complete",
                      "PASSIVE connection refused releasing ep...", debug=True)
            return
        if ep.qp is None:
            # complete(&ep->qp->iwarp_cm_comp) with ep->qp NULL (qedr_iw_reject cleared
            # it): an oops in the kernel for any status but -ECONNREFUSED
            self.tr("kernel_bug", "qedr_iw_passive_complete", conn=ep.conn,
                    what=f"complete(&ep->qp->iwarp_cm_comp) with ep->qp NULL: the reject "
                         f"(qedr_iw_reject) completed with {status}, not -ECONNREFUSED",
                    status=status)
            return
        self.qedr_iw_issue_event(ep, IwEvent.ESTABLISHED, status, "qedr_iw_passive_complete")
        if status < 0:
            self.qedr_iw_close_event(ep, status)

    def qedr_iw_active_complete(self, ep: Ep, status: int) -> None:
        """qedr_iw_active_complete: CONNECT_REPLY with the status (and the reply's private
        data); a failure drops the ep."""
        self.qedr_iw_issue_event(ep, IwEvent.CONNECT_REPLY, status, "qedr_iw_active_complete")
        if status < 0:
            ep.has_cm_id = False
            self._release(ep)

    def qedr_iw_mpa_reply(self, ep: Ep) -> int:
        """qedr_iw_mpa_reply: asks qed to send the RTR (qed_iwarp_send_rtr)."""
        return self.qed_iwarp_send_rtr(ep)

    # ---- verbs ---------------------------------------------------------------------------

    def qedr_iw_accept(self, ep: Ep, private_data: bytes, ird: int, ord: int) -> int:
        """qedr_iw_accept: the QP bound and the cm_id referenced (``ep->cm_id = cm_id``)
        before qed_iwarp_accept; its error path drops them.

        ``test_and_set_bit(QEDR_IWARP_CM_WAIT_FOR_CONNECT, &qp->iwarp_cm_flags)`` is
        once per QP: a second accept on the same QP (iw_cm_accept lets it through while
        its id is still in CONN_RECV, waiting for ESTABLISHED) fails with -EINVAL, and
        the error path's ``kref_put(&ep->refcnt, qedr_iw_free_ep)`` drops the ep's only
        reference (kref_init in qedr_iw_mpa_request): the qedr_iw_ep is freed while qed
        keeps it as the cb_context of an ep whose handshake goes on, the next event is
        a use after free."""
        if ep.qp is not None:  # bound by an earlier accept: its flag is set
            self.tr("kernel_bug", "qedr_iw_accept", conn=ep.conn,
                    what="a second accept: QEDR_IWARP_CM_WAIT_FOR_CONNECT is already set, "
                         "the error path's kref_put frees the qedr_iw_ep qed still calls "
                         "back (use after free)")
            ep.has_cm_id = False
            return -EINVAL
        ep.has_cm_id = True
        rc = self.qed_iwarp_accept(ep, private_data, ird, ord)
        if rc:
            ep.has_cm_id = False
        return rc

    def qedr_iw_reject(self, ep: Ep, private_data: bytes) -> None:
        """qedr_iw_reject: ``ep->qp = NULL`` and qed_iwarp_reject, whatever the ep's
        state: after an accept whose handshake goes on (iw_cm_reject lets it through
        while the id is still in CONN_RECV) the QP is gone from both eps, and the
        handshake's completion meets ``ep->qp`` NULL (qed_iwarp_mpa_complete,
        qedr_iw_passive_complete)."""
        self.qed_iwarp_reject(ep, private_data)

    def _passive(self, ep: Ep) -> bool:
        return ep.connect_mode == ConnectMode.PASSIVE and ep.state == EpState.MPA_REQ_RCVD
