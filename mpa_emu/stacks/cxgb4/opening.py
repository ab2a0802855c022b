"""cm.c's set-up of a connection: the CPL handlers (``pass_accept_req`` and
``pass_establish``, ``act_establish``, ``act_open_rpl``, ``rx_data``), the MPA steps
(``send_mpa_req``, ``process_mpa_reply``, ``process_mpa_request``, ``send_mpa_reply``,
``send_mpa_reject``) and the ULP's answer (``c4iw_accept_cr``, ``c4iw_reject_cr``)."""

from __future__ import annotations

from errno import ECONNREFUSED, ECONNRESET, EINVAL, ENOMEM, ETIMEDOUT

from mpa_emu.stacks.cxgb4 import frames
from mpa_emu.stacks.cxgb4.closing import c4iw_ep_disconnect
from mpa_emu.stacks.cxgb4.cm import (
    Cxgb4Cm,
    S,
    alloc_ep,
    ep_send,
    release_ep_resources,
    start_ep_timer,
    state_set,
    stop_ep_timer,
)
from mpa_emu.stacks.cxgb4.endpoint import Endpoint
from mpa_emu.stacks.cxgb4.mpa_rx import BAD, INCOMPLETE, accumulate
from mpa_emu.stacks.cxgb4.rdma import post_terminate, rdma_init, rdma_rx
from mpa_emu.stacks.cxgb4.states import (
    DDP_LLP,
    LAYER_MPA,
    MPA_INSUFF_IRD,
    MPA_NOMATCH_RTR,
    P2pType,
    QpState,
)
from mpa_emu.stacks.cxgb4.upcalls import (
    connect_reply_upcall,
    connect_request_upcall,
    established_upcall,
)
from mpa_emu.wire import mpa


def pass_accept_req(cm: Cxgb4Cm, sock: int, tcp_listener: int | None) -> None:
    """``pass_accept_req`` + ``pass_establish``: a child endpoint for a completed
    passive open, in MPA_REQ_WAIT with the endpoint timer running."""
    lst = None if tcp_listener is None else cm.by_tcp_listener.get(tcp_listener)
    addrs = cm.tcp.addresses(sock)
    if lst is None or lst.state != S.LISTEN or addrs is None:
        cm.base.kernel_log("err", "pass_accept_req",
                             "pass_accept_req - listening ep not in LISTEN")
        cm.tcp.abort(sock, cm.base.now_ns, "reject_cr: CPL_TID_RELEASE")
        return
    ep = alloc_ep(cm, False, addrs)
    ep.sock = sock
    ep.parent = lst.ident
    cm.by_sock[sock] = ep
    state_set(cm, ep, S.CONNECTING, "pass_accept_req", logged=True)
    state_set(cm, ep, S.MPA_REQ_WAIT, "pass_establish")
    start_ep_timer(cm, ep)


def act_establish(cm: Cxgb4Cm, ep: Endpoint) -> None:
    """``act_establish``: the handshake is done; send the MPA request."""
    send_mpa_req(cm, ep, 1 if ep.retry_with_mpa_v1 else cm.p.mpa_rev)


def act_open_rpl(cm: Cxgb4Cm, ep: Endpoint, err: int) -> None:
    """``act_open_rpl``: the active open failed. A RST to the SYN is
    ``CPL_ERR_CONN_RESET`` (-ECONNRESET, ``status2errno``); a SYN timeout -ETIMEDOUT."""
    status = -ECONNRESET if err != ETIMEDOUT else -ETIMEDOUT
    connect_reply_upcall(cm, ep, status)
    state_set(cm, ep, S.DEAD, "act_open_rpl", logged=True)
    release_ep_resources(cm, ep)


def send_mpa_req(cm: Cxgb4Cm, ep: Endpoint, rev: int) -> None:
    """``send_mpa_req``: the request frame; timer; MPA_REQ_SENT."""
    p = cm.p
    ep.attr_recv_marker = p.markers_enabled
    if rev == 1:
        ep.tried_with_mpa_v1 = True
        ep.retry_with_mpa_v1 = False
    pdata = bytes(ep.mpa_pkt[mpa.FRAME_SIZE:mpa.FRAME_SIZE + ep.plen])
    data = frames.mpa_request(rev=rev, crc=p.crc_enabled, markers=p.markers_enabled,
                              ird=ep.ird, ord=ep.ord, peer2peer=p.peer2peer,
                              p2p_type=p.p2p_type, private_data=pdata)
    old = ep.state.name
    start_ep_timer(cm, ep)
    state_set(cm, ep, S.MPA_REQ_SENT, "send_mpa_req")
    ep.attr_initiator = True
    ep_send(cm, ep, data, f"send_mpa_req: {old} -> MPA_REQ_SENT (MPA v{rev} request)")


def rx_data(cm: Cxgb4Cm, ep: Endpoint, data: bytes) -> None:
    """``rx_data``: stream bytes during MPA negotiation; in RDMA mode the firmware's
    (see :meth:`rdma_rx`)."""
    disconnect = 0
    if ep.state == S.MPA_REQ_SENT:
        disconnect = process_mpa_reply(cm, ep, data)
    elif ep.state == S.MPA_REQ_WAIT:
        disconnect = process_mpa_request(cm, ep, data)
    elif ep.state == S.FPDU_MODE and ep.qp == QpState.RTS:
        rdma_rx(cm, ep, data)
    else:
        cm.base.record("segment_dropped", "rx_data", conn=ep.conn, state=ep.state.name,
                         reason=f"{len(data)} stream bytes in {ep.state.name}: not looked at",
                         len=len(data))
    if disconnect:
        c4iw_ep_disconnect(cm, ep, disconnect == 2)


def process_mpa_reply(cm: Cxgb4Cm, ep: Endpoint, data: bytes) -> int:
    """``process_mpa_reply``: 0 (incomplete or done), 1 (close), 2 (abort)."""
    p = cm.p
    fn = "process_mpa_reply"
    check, ep.mpa_pkt_len = accumulate(ep.mpa_pkt, ep.mpa_pkt_len, data, request=False,
                                       mpa_rev=p.mpa_rev)
    if check.status == INCOMPLETE:
        if check.pd_length:
            ep.plen = check.pd_length & 0xFF
        return 0
    if check.status == BAD:
        if check.log:
            cm.base.kernel_log("err", fn, check.log)
        cm.base.record("mpa_error", fn, conn=ep.conn, reason=check.reason, errno=-check.errno)
        stop_ep_timer(cm, ep)
        connect_reply_upcall(cm, ep, -check.errno)
        return 2
    ep.plen = check.pd_length & 0xFF
    if check.flags & mpa.FLAG_REJECT:
        stop_ep_timer(cm, ep)
        connect_reply_upcall(cm, ep, -ECONNREFUSED)
        return 2
    stop_ep_timer(cm, ep)
    state_set(cm, ep, S.FPDU_MODE, fn)
    ep.attr_crc = bool(check.flags & mpa.FLAG_CRC) or p.crc_enabled
    ep.attr_xmit_marker = bool(check.flags & mpa.FLAG_MARKERS)
    ep.attr_version = check.rev
    ep.attr_p2p_type = P2pType.DISABLED
    insuff_ird = False
    if check.rev == 2:
        ep.attr_enhanced = bool(check.flags & mpa.FLAG_ENHANCED)
        if ep.attr_enhanced:
            ird_word = int.from_bytes(check.pd[0:2], "big") if len(check.pd) >= 2 else 0
            ord_word = int.from_bytes(check.pd[2:4], "big") if len(check.pd) >= 4 else 0
            insuff_ird = _negotiate_reply(cm, ep, ird_word, ord_word)
    elif check.rev == 1 and p.peer2peer:
        ep.attr_p2p_type = p.p2p_type
    cm.base.kernel_log("debug", fn, f"crc_enabled={int(ep.attr_crc)}, "
                         f"recv_marker_enabled={int(ep.attr_recv_marker)}, "
                         f"xmit_marker_enabled={int(ep.attr_xmit_marker)}"
                         f", version={ep.attr_version} p2p_type={ep.attr_p2p_type} "
                         f"local-p2p_type = {p.p2p_type}",
                         dynamic_debug=True)
    rtr_mismatch = False
    if ep.attr_version == 2 and p.peer2peer and ep.attr_p2p_type != p.p2p_type:
        ep.attr_p2p_type = P2pType.DISABLED
        rtr_mismatch = True
    if ep.qp != QpState.IDLE:  # the ULP moved the QP to ERROR: RTS fails
        connect_reply_upcall(cm, ep, -EINVAL)
        return 2
    rdma_init(cm, ep)
    if rtr_mismatch or insuff_ird:
        what = "RTR mismatch" if rtr_mismatch else "Insufficient IRD"
        cm.base.kernel_log("err", fn, f"{fn}: {what}, sending TERM")
        post_terminate(cm, ep, LAYER_MPA | DDP_LLP,
                            MPA_NOMATCH_RTR if rtr_mismatch else MPA_INSUFF_IRD)
        connect_reply_upcall(cm, ep, -ENOMEM)
        return 1
    connect_reply_upcall(cm, ep, 0)
    return 0


def _negotiate_reply(cm: Cxgb4Cm, ep: Endpoint, ird_word: int, ord_word: int) -> bool:
    """The MPA v2 part of ``process_mpa_reply``; True for insufficient IRD."""
    p = cm.p
    resp_ird = ird_word & mpa.IRD_ORD_MASK
    resp_ord = ord_word & mpa.IRD_ORD_MASK
    cm.base.kernel_log("debug", "process_mpa_reply",
                         f"responder ird {resp_ird} ord {resp_ord} "
                         f"ep ird {ep.ird} ord {ep.ord}",
                         dynamic_debug=True)
    insuff = False
    if ep.ird < resp_ord:
        if p.relaxed_ird_negotiation and resp_ord <= p.max_ordird_qp:
            ep.ird = resp_ord
        else:
            insuff = True
    elif ep.ird > resp_ord:
        ep.ird = resp_ord
    if ep.ord > resp_ird:
        if p.relaxed_ird_negotiation:
            ep.ord = resp_ird
        else:
            insuff = True
    if insuff:
        ep.ird = resp_ord
        ep.ord = resp_ird
    if ird_word & frames.MPA_V2_PEER2PEER_MODEL:
        if ord_word & frames.MPA_V2_RDMA_WRITE_RTR:
            ep.attr_p2p_type = P2pType.RDMA_WRITE
        elif ord_word & frames.MPA_V2_RDMA_READ_RTR:
            ep.attr_p2p_type = P2pType.READ_REQ
    return insuff


def process_mpa_request(cm: Cxgb4Cm, ep: Endpoint, data: bytes) -> int:
    """``process_mpa_request``: 0 (incomplete or delivered) or 2 (abort)."""
    p = cm.p
    fn = "process_mpa_request"
    check, ep.mpa_pkt_len = accumulate(ep.mpa_pkt, ep.mpa_pkt_len, data, request=True,
                                       mpa_rev=p.mpa_rev)
    if check.status == INCOMPLETE:
        if check.pd_length:
            ep.plen = check.pd_length & 0xFF
        return 0
    if check.status == BAD:
        if check.log:
            cm.base.kernel_log("err", fn, check.log)
        cm.base.record("mpa_error", fn, conn=ep.conn, reason=check.reason)
        stop_ep_timer(cm, ep)
        return 2
    ep.plen = check.pd_length & 0xFF
    ep.attr_initiator = False
    ep.attr_crc = bool(check.flags & mpa.FLAG_CRC) or p.crc_enabled
    ep.attr_recv_marker = p.markers_enabled
    ep.attr_xmit_marker = bool(check.flags & mpa.FLAG_MARKERS)
    ep.attr_version = check.rev
    if check.rev == 1:
        ep.tried_with_mpa_v1 = True
    ep.attr_p2p_type = P2pType.DISABLED
    if check.rev == 2:
        ep.attr_enhanced = bool(check.flags & mpa.FLAG_ENHANCED)
        if ep.attr_enhanced:
            ird_word = int.from_bytes(check.pd[0:2], "big") if len(check.pd) >= 2 else 0
            ord_word = int.from_bytes(check.pd[2:4], "big") if len(check.pd) >= 4 else 0
            ep.ird = min(ird_word & mpa.IRD_ORD_MASK, p.cur_max_read_depth)
            ep.ord = min(ord_word & mpa.IRD_ORD_MASK, p.cur_max_read_depth)
            cm.base.kernel_log("debug", fn, f"initiator ird {ep.ird} ord {ep.ord}",
                                 dynamic_debug=True)
            if ird_word & frames.MPA_V2_PEER2PEER_MODEL and p.peer2peer:
                if ord_word & frames.MPA_V2_RDMA_WRITE_RTR:
                    ep.attr_p2p_type = P2pType.RDMA_WRITE
                elif ord_word & frames.MPA_V2_RDMA_READ_RTR:
                    ep.attr_p2p_type = P2pType.READ_REQ
    elif check.rev == 1 and p.peer2peer:
        ep.attr_p2p_type = p.p2p_type
    cm.base.kernel_log("debug", fn, f"crc_enabled={int(ep.attr_crc)}, "
                         f"recv_marker_enabled={int(ep.attr_recv_marker)}, "
                         f"xmit_marker_enabled={int(ep.attr_xmit_marker)}"
                         f", version={ep.attr_version} p2p_type={ep.attr_p2p_type}",
                         dynamic_debug=True)
    state_set(cm, ep, S.MPA_REQ_RCVD, fn)
    parent = None if ep.parent is None else cm.listeners.get(ep.parent)
    if parent is None or parent.state == S.DEAD:
        cm.base.record("upcall_dropped", fn, conn=ep.conn, reason="the listener is DEAD")
        return 2
    connect_request_upcall(cm, ep)
    return 0


def c4iw_accept_cr(cm: Cxgb4Cm, ep: Endpoint, pdata: bytes, ird: int, ord: int) -> int:
    """``c4iw_accept_cr`` from its checks on: 0 or the negative errno it returns."""
    p = cm.p
    fn = "c4iw_accept_cr"
    limit = p.cur_max_read_depth
    if ord > limit or ird > limit:
        c4iw_ep_disconnect(cm, ep, True)
        return -EINVAL
    if ep.attr_version == 2 and ep.attr_enhanced:
        if ord > ep.ird:
            if p.relaxed_ird_negotiation:
                ord = ep.ird
            else:
                ep.ird, ep.ord = ird, ord
                send_mpa_reject(cm, ep, pdata)
                c4iw_ep_disconnect(cm, ep, True)
                return -ENOMEM
        if ird < ep.ord:
            if p.relaxed_ird_negotiation and ep.ord <= p.max_ordird_qp:
                ird = ep.ord
            else:
                c4iw_ep_disconnect(cm, ep, True)
                return -ENOMEM
    ep.ird, ep.ord = ird, ord
    if ep.attr_version == 1:
        if p.peer2peer and ep.ird == 0:
            ep.ird = 1
    elif p.peer2peer and ep.attr_p2p_type != P2pType.DISABLED \
            and p.p2p_type == P2pType.READ_REQ and ep.ird == 0:
        ep.ird = 1
    cm.base.kernel_log("debug", fn, f"ird {ep.ird} ord {ep.ord}", dynamic_debug=True)
    ep.has_cm_id = True
    ep.qp = QpState.IDLE
    rdma_init(cm, ep)
    send_mpa_reply(cm, ep, pdata)
    state_set(cm, ep, S.FPDU_MODE, fn)
    # fw4_ack with STOP_MPA_TIMER: the model takes the reply as acknowledged at once.
    stop_ep_timer(cm, ep)
    established_upcall(cm, ep)
    return 0


def c4iw_reject_cr(cm: Cxgb4Cm, ep: Endpoint, pdata: bytes) -> None:
    """``c4iw_reject_cr``: reject frame and FIN (``mpa_rev`` 0: RST)."""
    abort = cm.p.mpa_rev == 0
    if not abort:
        send_mpa_reject(cm, ep, pdata)
    stop_ep_timer(cm, ep)
    c4iw_ep_disconnect(cm, ep, abort)


def _reply(cm: Cxgb4Cm, ep: Endpoint, pdata: bytes, reject: bool) -> bytes:
    p = cm.p
    if reject:
        p2p = p.p2p_type
    else:  # send_mpa_reply: A and the local type only with a negotiated RTR
        p2p = p.p2p_type if ep.attr_p2p_type != P2pType.DISABLED else P2pType.DISABLED
    return frames.mpa_reply(
        reject=reject, rev=ep.attr_version, enhanced=ep.attr_enhanced, crc=ep.attr_crc,
        markers=ep.attr_recv_marker, ird=ep.ird, ord=ep.ord,
        peer2peer=p.peer2peer and (reject or ep.attr_p2p_type != P2pType.DISABLED),
        p2p_type=p2p, private_data=pdata, copy_private_data=ep.plen != 0)


def send_mpa_reject(cm: Cxgb4Cm, ep: Endpoint, pdata: bytes) -> None:
    """``send_mpa_reject``: R, the v2 block with the request's IRD/ORD when v2 with S.
    In the v2 branch the private data is copied only when ``ep->plen`` (the request's
    PD_Length as a u8) is not 0."""
    data = _reply(cm, ep, pdata, True)
    ep_send(cm, ep, data, f"send_mpa_reject: {ep.state.name} (MPA reject, "
               f"{len(pdata)} bytes of private data)")


def send_mpa_reply(cm: Cxgb4Cm, ep: Endpoint, pdata: bytes) -> None:
    """``send_mpa_reply``: C and M as negotiated, the v2 block, MPA_REP_SENT."""
    data = _reply(cm, ep, pdata, False)
    state_set(cm, ep, S.MPA_REP_SENT, "send_mpa_reply")
    ep_send(cm, ep, data, "send_mpa_reply: MPA_REQ_RCVD -> MPA_REP_SENT")
