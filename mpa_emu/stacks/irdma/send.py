"""Frames the CM sends itself: ``irdma_form_ah_cm_frame`` / ``irdma_form_uda_cm_frame``
as a pure function of the node (:func:`form`), and the ``irdma_send_*`` helpers that put
them on the wire, once or with a retransmission entry (``irdma_schedule_cm_timer``).
"""

from __future__ import annotations

from mpa_emu.stacks.irdma import log_lines
from mpa_emu.stacks.irdma.contract import CoreOps
from mpa_emu.stacks.irdma.mpa_policy import MpaParams, build_mpa_frame
from mpa_emu.stacks.irdma.node import REFCOUNT_SATURATED, CmNode
from mpa_emu.stacks.irdma.nodes import is_loopback
from mpa_emu.stacks.irdma.states import VLAN_N_VID
from mpa_emu.stacks.irdma.tcp import syn_options
from mpa_emu.wire.segment import ACK, FIN, RST, SYN, Segment, Transmit
from mpa_emu.wire.seq import MASK as MASK32


def form(node: CmNode, flags: int, mac: bytes, *, gen1: bool, options: bytes = b"",
         payload: bytes = b"") -> Segment | None:
    """``irdma_form_uda_cm_frame`` (GEN_1) / ``irdma_form_ah_cm_frame`` (GEN_2): the
    segment for ``flags``, advancing the node's ``loc_seq_num`` (and ``loc_ack_num``,
    and on GEN_1 IPv4 the IP id) as the kernel does. GEN_2 sends through the node's
    address handle: without a valid one nothing is formed (None)."""
    if not gen1 and not node.ah_valid:
        return None
    seq = node.loc_seq_num
    if flags & ACK:
        node.loc_ack_num = node.rcv_nxt
        ack = node.rcv_nxt
    else:
        ack = 0
    if flags & SYN:
        node.loc_seq_num = (node.loc_seq_num + 1) & MASK32
    elif payload:  # a pure ACK keeps the int object (shared with rem_ack_num)
        node.loc_seq_num = (node.loc_seq_num + len(payload)) & MASK32
    if flags & FIN:
        node.loc_seq_num = (node.loc_seq_num + 1) & MASK32
    ip_id = 0
    ttl = 64
    if gen1:
        if node.ipv4:
            node.loc_id = (node.loc_id + 1) & 0xFFFF
            ip_id = node.loc_id
        else:
            ttl = 128
    loc_addr, loc_port, rem_addr, rem_port, vlan_id = node.key
    st = node.settings  # read from the record: a property each costs the cycle
    # tcp_cntxt.rcv_wnd is a u32; only the header field is cut to 16 bits (htons)
    return Segment(
        src_mac=mac, dst_mac=st.rem_mac, src_ip=loc_addr,
        dst_ip=rem_addr, sport=loc_port, dport=rem_port, seq=seq,
        ack=ack, flags=flags, window=st.rcv_wnd & 0xFFFF, options=options,
        payload=payload,
        vlan=vlan_id if vlan_id < VLAN_N_VID else None, pcp=st.user_pri,
        ttl=ttl, tos=st.tos, ip_id=ip_id, df=True)


def _form(cm: CoreOps, node: CmNode, flags: int, options: bytes = b"",
          payload: bytes = b"") -> Segment | None:
    return form(node, flags, cm.mac, gen1=cm.config.gen == 1, options=options,
                payload=payload)


def schedule_send(cm: CoreOps, node: CmNode, seg: Segment, comment: str, *,
                  retrans: bool, close_when_complete: bool = False) -> None:
    """``irdma_schedule_cm_timer(SEND)``: transmit now; with ``retrans``, keep the
    frame for resends (one node reference held by the entry)."""
    tx = Transmit(seg, comment, node.do_lpb, node.conn)
    if node.send_entry is not None:
        # The kernel overwrites the entry without freeing it; callers clean up first.
        node.send_entry.live = False
        cm._record_leak(node, "irdma_schedule_cm_timer overwrote a live send entry: the "
                       "old entry's node reference is never dropped")
        cm.base.record("kernel_leak", "irdma_schedule_cm_timer", conn=node.conn,
                       reason="send entry overwritten: its node reference leaks")
    node.refcnt += 1
    cm._transmit(tx)
    if not retrans:
        node.refcnt -= 1  # irdma_cleanup_retrans_entry of the entry just made
        node.send_entry = None
        if close_when_complete:
            cm._rem_ref(node)
        return
    cm.timer.arm_send(node, tx, cm._jiffies, cm.config.retrans)


def schedule_close(cm: CoreOps, node: CmNode) -> bool:
    """``irdma_schedule_cm_timer(CLOSE)`` without QP (TIME_WAIT): due in ``HZ/10``.
    False when the node already has a close entry."""
    if node.close_entry is not None:
        return False
    cm.timer.arm_close(node, cm._jiffies)
    return True


def cleanup(cm: CoreOps, node: CmNode) -> None:
    """``irdma_cleanup_retrans_entry``: stop retransmitting and drop the entry's
    reference with ``refcount_dec``. When that was the last reference (a late SYN-ACK's
    entry), ``refcount_t`` warns "decrement hit 0; leaking memory" and saturates: the
    node is never freed."""
    entry = node.send_entry
    if entry is not None:
        entry.live = False
        node.send_entry = None
        node.refcnt -= 1
        if node.refcnt <= 0:
            node.refcnt = REFCOUNT_SATURATED
            cm._record_leak(node, "refcount_dec hit 0 in irdma_free_retrans_entry (the "
                           "retransmission entry held the last reference): refcount "
                           "saturated, the node is never freed")
            cm.base.record("kernel_bug", "irdma_free_retrans_entry", conn=node.conn,
                           reason="refcount_t: decrement hit 0; leaking memory")


def send_syn(cm: CoreOps, node: CmNode, sendack: bool, comment: str) -> bool:
    """``irdma_send_syn``: SYN or SYN|ACK with MSS, window scale and EOL, kept for
    retransmission. False when it could not be formed (no AH)."""
    seg = _form(cm, node, SYN | (ACK if sendack else 0),
                syn_options(node.settings.mss, node.settings.rcv_wscale))
    if seg is None:
        cm.base.record("send_failed", "irdma_send_syn", conn=node.conn, reason="no AH")
        return False
    schedule_send(cm, node, seg, comment, retrans=True)
    return True


def send_ack(cm: CoreOps, node: CmNode, comment: str) -> None:
    """``irdma_send_ack``: a pure ACK, sent once, no timer."""
    seg = _form(cm, node, ACK)
    if seg is None:
        cm.base.record("send_failed", "irdma_send_ack", conn=node.conn, reason="no AH")
        return
    cm._transmit(Transmit(seg, comment, node.do_lpb, node.conn))


def send_fin(cm: CoreOps, node: CmNode, comment: str) -> bool:
    """``irdma_send_fin``: ACK|FIN, retransmitted."""
    seg = _form(cm, node, ACK | FIN)
    if seg is None:
        cm.base.record("send_failed", "irdma_send_fin", conn=node.conn, reason="no AH")
        return False
    schedule_send(cm, node, seg, comment, retrans=True)
    return True


def send_reset(cm: CoreOps, node: CmNode, comment: str) -> bool:
    """``irdma_send_reset``: RST|ACK once; consumes one node reference when sent. On
    GEN_2 without a valid AH nothing is sent and nothing consumed
    (``irdma_form_ah_cm_frame`` fails, and the caller's reference stays)."""
    seg = _form(cm, node, RST | ACK)
    if seg is None:
        cm.base.record("send_failed", "irdma_send_reset", conn=node.conn,
                       reason="no valid AH (irdma_form_ah_cm_frame): no RST, no put")
        return False
    if cm.trace is not None:
        log_lines.send_reset(cm, node, comment)
    schedule_send(cm, node, seg, comment, retrans=False, close_when_complete=True)
    return True


def send_reset_held(cm: CoreOps, node: CmNode, comment: str) -> None:
    """``refcount_inc`` then ``irdma_send_reset``: the RST consumes the extra
    reference, or it is given back when the RST cannot be sent."""
    node.refcnt += 1
    if not send_reset(cm, node, comment):
        node.refcnt -= 1


def mpa_params(cm: CoreOps, node: CmNode) -> MpaParams:
    """The node's fields ``irdma_cm_build_mpa_frame`` reads."""
    st = node.settings
    return MpaParams(rev=st.mpa_frame_rev, ird_size=st.ird_size,
                     ord_size=st.ord_size, mpav2_ird_ord=st.mpav2_ird_ord,
                     send_rdma0_op=node.settings.send_rdma0_op, markers=cm.config.iw_ooo,
                     p2p=cm.config.p2p)


def cm_build_mpa_frame(cm: CoreOps, node: CmNode, *, request: bool, private_data: bytes,
                       reject: bool = False) -> bytes:
    """``irdma_cm_build_mpa_frame`` with the private data appended."""
    frame = build_mpa_frame(mpa_params(cm, node), request=request,
                            private_data=private_data, reject=reject)
    if cm.config.iw_ooo and node.settings.mpa_frame_rev == 2:
        # irdma_build_mpa_v2 enables receive markers on every v2 frame it builds:
        # request, accept reply and reject alike
        node.rcv_mark_en = True
    return frame


def send_mpa_request(cm: CoreOps, node: CmNode, comment: str) -> bool:
    """``irdma_send_mpa_request``: the MPA request with the node's private data, kept
    for retransmission. False when it could not be built or formed."""
    frame = cm_build_mpa_frame(cm, node, request=True, private_data=node.pdata)
    if not frame:
        cm.base.record("send_failed", "irdma_send_mpa_request", conn=node.conn,
                       reason=f"mpa_frame_rev {node.settings.mpa_frame_rev}: header size 0")
        return False
    seg = _form(cm, node, ACK, payload=frame)
    if seg is None:
        cm.base.record("send_failed", "irdma_send_mpa_request", conn=node.conn, reason="no AH")
        return False
    schedule_send(cm, node, seg, comment, retrans=True)
    return True


def host_stack(cm: CoreOps, seg: Segment) -> None:
    """A SYN no qhash rule steers to the CM goes to the host's Linux stack, which
    answers with RST|ACK when ``CmConfig.host_stack_rst`` is set and stays silent
    otherwise (``tcp_v4_send_reset`` / ``tcp_v6_send_reset``, outside cm.c)."""
    if not cm.config.host_stack_rst:
        cm._drop(seg, "irdma_receive_ilq", "no listener: SYN left to the host stack (silent)")
        return
    if not cm._has_address(seg.dst_ip):
        # the host stack has no such address (removed, the VLAN device kept):
        # ip_route_input finds no local route and the packet is dropped
        cm._drop(seg, "irdma_receive_ilq",
                "no listener: the host stack has no such address (dropped)")
        return
    cm._drop(seg, "irdma_receive_ilq", "no listener: host stack answers with RST")
    cm._transmit(host_stack_reset(seg, cm.mac, is_loopback(seg.dst_ip, seg.src_ip)))


def host_stack_reset(seg: Segment, mac: bytes, loopback: bool) -> Transmit:
    """The RST|ACK the host's Linux stack answers a SYN with when no socket and no qhash
    rule take it (``tcp_v4_send_reset`` / ``tcp_v6_send_reset``)."""
    rst = Segment(src_mac=mac, dst_mac=seg.src_mac, src_ip=seg.dst_ip,
                  dst_ip=seg.src_ip, sport=seg.dport, dport=seg.sport, seq=0,
                  ack=(seg.seq + 1 + len(seg.payload)) & MASK32, flags=RST | ACK,
                  window=0, vlan=seg.vlan, pcp=seg.pcp, ttl=64, tos=seg.tos)
    return Transmit(rst, "tcp_v4_send_reset: host stack, no socket" if seg.ipv4
                    else "tcp_v6_send_reset: host stack, no socket", loopback, None)
