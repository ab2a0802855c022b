"""CM events and upcalls: the ordered ``iwarp-event-wq`` (``irdma_create_event``,
``irdma_cm_event_handler``), the hand-over to the NIC (``irdma_cm_init_tsa_conn``), the
ends of ``irdma_accept`` and ``irdma_cm_event_connected``, and ``irdma_send_cm_event``.
"""

from __future__ import annotations

from errno import ECONNREFUSED, ECONNRESET, EINVAL

from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.events import (
    IW_CONNECT_REPLY,
    IW_CONNECT_REQUEST,
    IW_ESTABLISHED,
    IwEvent,
    Upcall,
)
from mpa_emu.stacks.irdma import log_lines
from mpa_emu.stacks.irdma.contract import CoreOps
from mpa_emu.stacks.irdma.node import CmNode
from mpa_emu.stacks.irdma.offload.nic import HwQp
from mpa_emu.stacks.irdma.offload.qp import QpInit
from mpa_emu.stacks.irdma.states import (
    CM_EVENT_ABORTED,
    CM_EVENT_CONNECTED,
    CM_EVENT_MPA_REJECT,
    CM_EVENT_MPA_REQ,
    CM_OFFLOADED,
    VLAN_N_VID,
    CmEventType,
)


def create_event(cm: CoreOps, node: CmNode, etype: CmEventType) -> None:
    """``irdma_create_event``: queue on the ordered event queue (+1 ref). A node
    without ``cm_id`` gets no event."""
    if not node.cm_id:
        return
    if cm.trace is not None:
        log_lines.create_event(cm, node, etype)
    node.refcnt += 1
    cm._post(node, etype)
    if cm.trace is not None:
        cm.base.record("event_queued", "irdma_cm_post_event", conn=node.conn, event=etype.name)


def event_handler(cm: CoreOps, node: CmNode, etype: CmEventType) -> None:
    """``irdma_cm_event_handler`` for one queued event (drops the event's reference)."""
    if etype == CM_EVENT_MPA_REQ:
        node.held_by_app = True
        send_cm_event(cm, IW_CONNECT_REQUEST, node, 0)
    elif etype == CM_EVENT_CONNECTED:
        if node.cm_id and node.state == CM_OFFLOADED:
            event_connected(cm, node)
    elif etype == CM_EVENT_MPA_REJECT:
        if node.cm_id and node.state != CM_OFFLOADED:
            send_cm_event(cm, IW_CONNECT_REPLY, node, -ECONNREFUSED)
    elif etype == CM_EVENT_ABORTED:
        if node.cm_id and node.state != CM_OFFLOADED:
            event_connect_error(cm, node)
    else:
        cm.base.record("event_dropped", "irdma_cm_event_handler", conn=node.conn, event=etype.name,
                       reason="bad event type")
    cm._rem_ref(node)


def event_connect_error(cm: CoreOps, node: CmNode) -> None:
    """``irdma_event_connect_error``: CONNECT_REPLY(-ECONNRESET) to the initiator."""
    if not node.client:
        cm.base.record("kernel_bug", "irdma_event_connect_error", conn=node.conn,
                       reason="ABORTED on a passive node: cm_id->provider_data is the "
                       "listener, read as a QP (irdma_event_connect_error); no upcall")
        return
    if not node.qp_linked:
        return
    node.qp_linked = False
    send_cm_event(cm, IW_CONNECT_REPLY, node, -ECONNRESET)
    cm._rem_ref(node)


def init_tsa_conn(cm: CoreOps, node: CmNode, fn: str) -> None:
    """``irdma_cm_init_tsa_conn`` + ``irdma_init_tcp_ctx``: the node is OFFLOADED and
    the NIC's QP takes the flow over with the node's TCP context."""
    cm.base.set_state(node, CM_OFFLOADED, fn, node.conn)
    cfg = cm.config
    loc_addr, loc_port, rem_addr, rem_port, vlan_id = node.key
    st = node.settings
    init = QpInit(
        conn=node.conn, active=node.client, gen=cfg.gen, local_mac=cm.mac,
        remote_mac=st.rem_mac, local_ip=loc_addr, remote_ip=rem_addr,
        local_port=loc_port, remote_port=rem_port,
        vlan=vlan_id if vlan_id < VLAN_N_VID else None, pcp=st.user_pri,
        tos=st.tos, ttl=64, snd_nxt=node.loc_seq_num, rcv_nxt=node.rcv_nxt,
        snd_wnd=st.snd_wnd, snd_wscale=st.snd_wscale, rcv_wscale=st.rcv_wscale,
        mss=st.mss, rtr_op=st.send_rdma0_op.value, ird=st.ird_size,
        ord=st.ord_size, mpa_rev=st.mpa_frame_rev, crc=True,
        snd_markers=node.snd_mark_en, rcv_markers=node.rcv_mark_en)
    node.qp = cm.nic.offload(node.key, init, filed=cm.nodes.by_key.get(node.key) is node)


def event_connected(cm: CoreOps, node: CmNode) -> None:
    """``irdma_cm_event_connected``: offload, RTR, then CONNECT_REPLY(0) (on GEN_2
    once the RTS AE came, or after ``rts_ae_timeout_ns`` anyway)."""
    if node.qp_error:
        connected_qp_error(cm, node)
        return
    init_tsa_conn(cm, node, "irdma_cm_event_connected")
    node.qhash_set = False
    qp: HwQp | None = node.qp
    if qp is None:
        return
    if cm.config.gen == 2:
        node.rts_deadline = cm.base.now_ns + cm.config.rts_ae_timeout_ns
        cm.deferred.add(node.rts_deadline, "rts", node)
    qp.send_rtr(cm.base.now_ns)
    cm._drain_qp(node.key)
    if cm.config.gen == 1:
        connected_complete(cm, node)


def connected_qp_error(cm: CoreOps, node: CmNode) -> None:
    """``irdma_cm_event_connected`` on a QP already in ERR: the RTR WQE is posted but
    ``irdma_modify_qp(RTS)`` returns -EINVAL (``iwarp_state > RTS``, verbs.c), so the QP
    never transmits it and no TCP context is loaded; the return value is ignored, the
    RTS AE never comes, and CONNECT_REPLY(0) follows the wait (GEN_2: 12 s, "Slow
    Connection" logged only). The peer's accept then times out."""
    cm.base.set_state(node, CM_OFFLOADED, "irdma_cm_event_connected", node.conn)
    node.qhash_set = False
    cm.base.record("modify_qp_failed", "irdma_modify_qp", conn=node.conn, target="RTS",
                   errno=-EINVAL, reason="iwarp_state ERROR > RTS: no RTR is sent")
    if cm.config.gen == 2:
        node.rts_deadline = cm.base.now_ns + cm.config.rts_ae_timeout_ns
        cm.deferred.add(node.rts_deadline, "rts", node)
    else:
        connected_complete(cm, node)


def connected_complete(cm: CoreOps, node: CmNode) -> None:
    """The end of ``irdma_cm_event_connected``: CONNECT_REPLY(0), accelerated."""
    node.rts_deadline = None
    send_cm_event(cm, IW_CONNECT_REPLY, node, 0)
    node.accelerated = True
    if cm.config.gen == 2:
        node.ah_valid = False  # cm_free_ah
    cm._establish_complete(node)


def accept_complete(cm: CoreOps, node: CmNode) -> None:
    """The end of ``irdma_accept``: ESTABLISHED upcall, accelerated, the listener's
    pending count released."""
    node.rts_deadline = None
    send_cm_event(cm, IW_ESTABLISHED, node, 0)
    node.accelerated = True
    lst = node.settings.listener
    if node.accept_pend and lst is not None:
        lst.pend_accepts_cnt -= 1
        node.accept_pend = False
    cm._establish_complete(node)


def accept_failed(cm: CoreOps, node: CmNode, status: int, why: str, *,
                  returned: bool) -> CmError | None:
    """The error path of ``irdma_accept``: the node's reference is dropped. With
    ``returned`` the verb returns ``status``: the error is given back for the verb to
    raise; otherwise (after the wait for the RTS AE) the ESTABLISHED upcall carries it."""
    cm.base.record("accept_failed", "irdma_accept", conn=node.conn, status=status, reason=why)
    node.held_by_app = False
    error = None
    if returned:
        error = CmError(-status, f"irdma_accept on connection {node.conn}: {why}; the "
                        "node was released")
    else:
        send_cm_event(cm, IW_ESTABLISHED, node, status, accept_error=True)
    cm._rem_ref(node)
    return error


def rts_timeout(cm: CoreOps, node: CmNode) -> None:
    """No RTS AE within ``rts_ae_timeout_ns``: ``irdma_cm_event_connected`` logs and
    goes on; ``irdma_accept`` fails with -ECONNRESET ("Slow Connection")."""
    node.rts_deadline = None
    if cm.trace is not None:
        log_lines.emit(cm, log_lines.SLOW_CONNECTION_CONNECTED if node.client
                       else log_lines.SLOW_CONNECTION_ACCEPT, log_lines.node_ptr(cm, node),
                       node.key[1], node.key[3], log_lines.cm_id_ptr(cm, node),
                       conn=node.conn)
    if node.client:
        cm.base.record("slow_connection", "irdma_cm_event_connected", conn=node.conn,
                       reason="no RTS AE within 12 s (logged only)")
        connected_complete(cm, node)
    else:
        accept_failed(cm, node, -ECONNRESET, "Slow Connection: no RTS AE (RTR) "
                      "within rts_ae_timeout_ns", returned=False)


def send_cm_event(cm: CoreOps, event: IwEvent, node: CmNode, status: int, *,
                  accept_error: bool = False) -> None:
    """``irdma_send_cm_event``: one upcall with what ``irdma_get_cmevent_info`` fills
    in (private data for the connect events, IRD/ORD). ``accept_error``: the upcall
    stands for irdma_accept's late error return (:attr:`Upcall.accept_error`)."""
    if cm.trace is not None:
        log_lines.send_cm_event(cm, node, event, status)
    pdata = b""
    plen = past = 0
    ird = ord_ = 0
    st = node.settings
    if event in (IW_CONNECT_REQUEST, IW_CONNECT_REPLY):
        plen = st.pdata_size & 0xFF if cm.config.quirks.pdata_len_u8 else st.pdata_size
        pdata = node.pdata[:plen]
        if st.mpa_frame_rev == 2 and cm.config.quirks.v2_pdata_plus4:
            # The last 4 bytes copied (irdma_parse_mpa) lie past the frame.
            past = max(0, len(pdata) - max(0, st.pdata_size - 4))
        ird = st.ird_size
        ord_ = st.ord_size if event == IW_CONNECT_REPLY else 0
    elif event == IW_ESTABLISHED:
        ird, ord_ = st.ird_size, st.ord_size
    lst = st.listener
    loc_addr, loc_port, rem_addr, rem_port, _ = node.key
    up = Upcall(event, node.conn, status, cm.base.now_ns, loc_addr, loc_port,
                rem_addr, rem_port, pdata, plen, ird, ord_,
                lst.ident if lst is not None else None, past, accept_error)
    cm.base.push(up, "irdma_send_cm_event", None if cm.trace is None else
                 {"private_data_len": plen, "ird": ird, "ord": ord_})
