"""cm.c's timeout and close paths: ``process_timeout``, ``c4iw_ep_disconnect``,
``send_halfclose``, ``send_abort``, ``abort_rpl``, ``close_con_rpl``, ``peer_close``,
``peer_abort``, ``c4iw_reconnect``, and ``c4iw_modify_qp`` as iw_cm drives it."""

from __future__ import annotations

from errno import ECONNRESET, EINVAL, ETIMEDOUT

from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.cxgb4.cm import (
    CPL_ERR_CONN_RESET,
    Cxgb4Cm,
    S,
    release_ep_resources,
    start_ep_timer,
    state_set,
    stop_ep_timer,
)
from mpa_emu.stacks.cxgb4.endpoint import Endpoint
from mpa_emu.stacks.cxgb4.states import (
    STATE_TEXT,
    EpState,
    QpState,
)
from mpa_emu.stacks.cxgb4.upcalls import (
    close_complete_upcall,
    connect_reply_upcall,
    peer_abort_upcall,
    peer_close_upcall,
)


def process_timeout(cm: Cxgb4Cm, ep: Endpoint) -> None:
    """``process_timeout``: the endpoint timer fired."""
    abort = True
    if ep.state == S.MPA_REQ_SENT:
        connect_reply_upcall(cm, ep, -ETIMEDOUT)
    elif ep.state in (S.MPA_REQ_WAIT, S.MPA_REQ_RCVD, S.MPA_REP_SENT, S.FPDU_MODE):
        pass
    elif ep.state in (S.CLOSING, S.MORIBUND):
        if ep.has_cm_id and ep.qp is not None:
            ep.qp = QpState.ERROR
        close_complete_upcall(cm, ep, -ETIMEDOUT)
    else:
        abort = False
    if abort:
        c4iw_ep_disconnect(cm, ep, True)


def modify_qp_from_ulp(cm: Cxgb4Cm, ep: Endpoint, target: QpState) -> None:
    """``c4iw_modify_qp`` with ``internal`` 0 and NEXT_STATE (iwcm_modify_qp_sqd/err)."""
    if ep.qp == QpState.RTS:
        ep.qp = target
        cm.base.record("qp_state", "c4iw_modify_qp", conn=ep.conn, new=target.name)
        c4iw_ep_disconnect(cm, ep, target == QpState.ERROR)
    elif ep.qp == QpState.CLOSING and target == QpState.ERROR:
        ep.qp = QpState.ERROR
        cm.base.record("qp_state", "c4iw_modify_qp", conn=ep.conn, new="ERROR")
    else:
        state = "no QP" if ep.qp is None else f"QP in {ep.qp.name}"
        raise CmError(EINVAL, f"c4iw_modify_qp to {target.name}: {state}")


def c4iw_ep_disconnect(cm: Cxgb4Cm, ep: Endpoint, abrupt: bool) -> None:
    """``c4iw_ep_disconnect``: FIN (CLOSING/MORIBUND) or RST (ABORTING)."""
    fn = "c4iw_ep_disconnect"
    cm.base.kernel_log("debug", fn, f"ep#{ep.conn} state {STATE_TEXT[ep.state]}, abrupt "
                         f"{int(abrupt)}",
                         dynamic_debug=True)
    close = False
    old = ep.state
    if ep.state in (S.MPA_REQ_WAIT, S.MPA_REQ_SENT, S.MPA_REQ_RCVD, S.MPA_REP_SENT,
                    S.FPDU_MODE, S.CONNECTING):
        close = True
        if abrupt:
            state_set(cm, ep, S.ABORTING, fn)
        else:
            # the model stops the MPA timer at accept (fw4_ack taken as immediate),
            # so the STOP_MPA_TIMER fix-up never applies; a running timer stays
            # (start_ep_timer's "already started" pr_err)
            state_set(cm, ep, S.CLOSING, fn)
            start_ep_timer(cm, ep)
        ep.close_sent = True
    elif ep.state == S.CLOSING:
        if not ep.close_sent:
            ep.close_sent = True
            close = True
            if abrupt:
                stop_ep_timer(cm, ep)
                state_set(cm, ep, S.ABORTING, fn)
            else:
                state_set(cm, ep, S.MORIBUND, fn)
    else:
        cm.base.kernel_log("debug", fn,
                             f"ignoring disconnect ep#{ep.conn} state {int(ep.state)}",
                             dynamic_debug=True)
    if not close:
        return
    if abrupt:
        send_abort(cm, ep, old)
    else:
        send_halfclose(cm, ep, old)


def send_halfclose(cm: Cxgb4Cm, ep: Endpoint, old: EpState) -> None:
    """``send_halfclose``: ``CPL_CLOSE_CON_REQ``, the FIN."""
    if ep.sock is None:
        return
    cm.tcp.shutdown(ep.sock, cm.base.now_ns,
                      f"send_halfclose: {old.name} -> {ep.state.name} (FIN)")
    cm.fin_sent.add(ep.sock)


def send_abort(cm: Cxgb4Cm, ep: Endpoint, old: EpState) -> None:
    """``send_abort``: ``CPL_ABORT_REQ``, the RST; ``CPL_ABORT_RPL_RSS`` follows."""
    if ep.sock is not None:
        cm.tcp.abort(ep.sock, cm.base.now_ns,
                       f"send_abort: {old.name} -> {ep.state.name} (RST)")
        cm.fin_sent.discard(ep.sock)
    abort_rpl(cm, ep)


def abort_rpl(cm: Cxgb4Cm, ep: Endpoint) -> None:
    """``abort_rpl``: ABORTING -> DEAD, CLOSE -ECONNRESET, resources released."""
    if ep.state != S.ABORTING:
        cm.base.kernel_log("err", "abort_rpl",
                             f"abort_rpl ep#{ep.conn} state {int(ep.state)}")
        return
    state_set(cm, ep, S.DEAD, "abort_rpl")
    close_complete_upcall(cm, ep, -ECONNRESET)
    release_ep_resources(cm, ep)


def close_con_rpl(cm: Cxgb4Cm, ep: Endpoint) -> None:
    """``close_con_rpl``: our FIN acknowledged."""
    if ep.state == S.CLOSING:
        state_set(cm, ep, S.MORIBUND, "close_con_rpl")
    elif ep.state == S.MORIBUND:
        stop_ep_timer(cm, ep)
        if ep.has_cm_id and ep.qp is not None:
            ep.qp = _qp_after_close(ep.qp)
        close_complete_upcall(cm, ep, 0)
        state_set(cm, ep, S.DEAD, "close_con_rpl")
        release_ep_resources(cm, ep)


def _qp_after_close(qp: QpState) -> QpState:
    """``c4iw_modify_qp(IDLE, internal)`` at the end of a close: CLOSING -> IDLE; from
    TERMINATE the internal move fails into ERROR (the ``err`` path)."""
    return QpState.ERROR if qp == QpState.TERMINATE else QpState.IDLE


def peer_close(cm: Cxgb4Cm, ep: Endpoint) -> None:
    """``peer_close``: the peer's FIN (``CPL_PEER_CLOSE``)."""
    fn = "peer_close"
    disconnect = True
    release = False
    st = ep.state
    if st == S.MPA_REQ_WAIT:
        state_set(cm, ep, S.CLOSING, fn)
    elif st == S.MPA_REQ_SENT:
        state_set(cm, ep, S.CLOSING, fn)
        connect_reply_upcall(cm, ep, -ECONNRESET)
    elif st in (S.MPA_REQ_RCVD, S.MPA_REP_SENT):
        state_set(cm, ep, S.CLOSING, fn)
    elif st == S.FPDU_MODE:
        start_ep_timer(cm, ep)
        state_set(cm, ep, S.CLOSING, fn)
        if ep.qp == QpState.RTS:
            ep.qp = QpState.CLOSING
        # c4iw_modify_qp(CLOSING) returns 0, or -EINVAL from another QP state; only
        # -ECONNRESET (rdma_fini woken by a peer abort) would skip the upcall
        peer_close_upcall(cm, ep)
    elif st == S.CLOSING:
        state_set(cm, ep, S.MORIBUND, fn)
        disconnect = False
    elif st == S.MORIBUND:
        stop_ep_timer(cm, ep)
        if ep.has_cm_id and ep.qp is not None:
            ep.qp = _qp_after_close(ep.qp)
        close_complete_upcall(cm, ep, 0)
        state_set(cm, ep, S.DEAD, fn)
        release = True
        disconnect = False
    else:  # ABORTING, DEAD
        disconnect = False
    if disconnect:
        c4iw_ep_disconnect(cm, ep, False)
    if release:
        release_ep_resources(cm, ep)


def peer_abort(cm: Cxgb4Cm, ep: Endpoint, status: int) -> None:
    """``peer_abort``: the peer's RST (``CPL_ABORT_REQ_RSS``)."""
    fn = "peer_abort"
    st = ep.state
    p = cm.p
    if ep.sock is not None:
        cm.fin_sent.discard(ep.sock)
    if st == S.MPA_REQ_WAIT:
        stop_ep_timer(cm, ep)
    elif st == S.MPA_REQ_SENT:
        stop_ep_timer(cm, ep)
        if status != CPL_ERR_CONN_RESET or p.mpa_rev == 1 or \
                (p.mpa_rev == 2 and ep.tried_with_mpa_v1):
            connect_reply_upcall(cm, ep, -ECONNRESET)
        else:
            cm.base.kernel_log("info", fn, f"{fn}: mpa_rev={p.mpa_rev}. Retrying with mpav1")
            ep.retry_with_mpa_v1 = True
    elif st in (S.MORIBUND, S.CLOSING, S.FPDU_MODE):
        stop_ep_timer(cm, ep)
        if ep.has_cm_id and ep.qp is not None:
            ep.qp = QpState.ERROR
        peer_abort_upcall(cm, ep)
    elif st == S.DEAD:
        cm.base.kernel_log("warn", fn, f"{fn} PEER_ABORT IN DEAD STATE!!!!")
        return
    if st == S.ABORTING:
        return
    state_set(cm, ep, S.DEAD, fn)
    if ep.retry_with_mpa_v1:
        c4iw_reconnect(cm, ep)
    else:
        release_ep_resources(cm, ep)


def c4iw_reconnect(cm: Cxgb4Cm, ep: Endpoint) -> None:
    """``c4iw_reconnect``: a new TCP connection from the same local address and port
    (the cm_id's), CONNECTING; ``act_establish`` then sends a v1 request."""
    if ep.sock is not None:
        cm.by_sock.pop(ep.sock, None)
    try:
        sock = cm.tcp.connect(ep.local_ip, ep.remote_ip, ep.remote_port,
                                ep.local_port, cm.base.now_ns)
    except OSError:
        connect_reply_upcall(cm, ep, -ECONNRESET)
        release_ep_resources(cm, ep)
        return
    ep.sock = sock
    cm.by_sock[sock] = ep
    state_set(cm, ep, S.CONNECTING, "c4iw_reconnect", logged=True)
