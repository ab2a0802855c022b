"""qed_iwarp.c's connection functions (drivers/net/ethernet/qlogic/qed/qed_iwarp.c), the
layer between qedr and the firmware: each method models the function it is named after,
in the function's order, and reaches qedr through :meth:`QedIwarp.event_cb` (the
``ep->event_cb`` qedr_iw_connect / qedr_iw_create_listen register).

The firmware's part (the frames, the checks, the timers) is
:class:`~mpa_emu.stacks.qedr.firmware.Firmware`, which raises the async events these
handlers take.
"""

from __future__ import annotations

from errno import EBUSY, ECONNREFUSED, ECONNRESET, EINVAL

from mpa_emu.stacks.qedr import frames
from mpa_emu.stacks.qedr.endpoint import Ep
from mpa_emu.stacks.qedr.firmware import Firmware, rtr_bits
from mpa_emu.stacks.qedr.params import (
    QED_IWARP_IRD_DEFAULT,
    QED_IWARP_ORD_DEFAULT,
    QED_IWARP_PREALLOC_CNT,
)
from mpa_emu.stacks.qedr.states import (
    EXCEPTION_LLP_CLOSED,
    EXCEPTION_LLP_RESET,
    EXCEPTION_TERMINATE_RECEIVED,
    MPA_ERROR_REJECT,
    MPA_FIN,
    MPA_INSUF_IRD,
    MPA_INVALID_PACKET,
    MPA_LOCAL_ERROR,
    MPA_NOT_SUPPORTED_VER,
    MPA_RST,
    MPA_RTR_MISMATCH,
    MPA_TERMINATE,
    MPA_TIMEOUT,
    MPA_V2_IRD_ORD_MASK,
    MPA_V2_PEER2PEER_MODEL,
    QP_IN_ERROR_GOOD_CLOSE,
    RDMA_RETURN_OK,
    TCP_CONNECT_INVALID_PACKET,
    TCP_CONNECT_TIMEOUT,
    TCP_CONNECTION_RST,
    ConnectMode,
    EpState,
    MpaMode,
    QedEvent,
    QpState,
    RtrType,
)

# qed_iwarp_mpa_complete: fw_return_code -> params.status, with its DP_NOTICE text.
MPA_COMPLETE_STATUS: dict[str, tuple[int, str]] = {
    RDMA_RETURN_OK: (0, ""),
    MPA_TIMEOUT: (-EBUSY, "MPA timeout"),
    MPA_ERROR_REJECT: (-ECONNREFUSED, "MPA Reject"),
    MPA_RST: (-ECONNRESET, "MPA reset"),
    MPA_FIN: (-ECONNREFUSED, "MPA received FIN"),
    MPA_INSUF_IRD: (-ECONNREFUSED, "MPA insufficient ird"),
    MPA_RTR_MISMATCH: (-ECONNREFUSED, "MPA RTR MISMATCH"),
    MPA_INVALID_PACKET: (-ECONNREFUSED, "MPA Invalid Packet"),
    MPA_LOCAL_ERROR: (-ECONNREFUSED, "MPA Local Error"),
    MPA_TERMINATE: (-ECONNREFUSED, "MPA TERMINATE"),
}
"""The ``switch (fw_return_code)`` of qed_iwarp_mpa_complete; any other code is
-ECONNRESET (``default``)."""

TCP_CONNECT_STATUS: dict[str, tuple[int, str]] = {
    TCP_CONNECT_INVALID_PACKET: (-ECONNRESET, "TCP connect got invalid packet"),
    TCP_CONNECTION_RST: (-ECONNRESET, "TCP Connection Reset"),
    TCP_CONNECT_TIMEOUT: (-EBUSY, "TCP timeout"),
    MPA_NOT_SUPPORTED_VER: (-ECONNREFUSED, "MPA not supported VER"),
    MPA_INVALID_PACKET: (-ECONNRESET, "MPA Invalid Packet"),
}
"""The ``switch (fw_return_code)`` of qed_iwarp_tcp_connect_unsuccessful; any other code
is -ECONNRESET with DP_ERR "Unexpected return code tcp connect"."""

TCP_CONNECT_VERBOSE = frozenset({TCP_CONNECT_INVALID_PACKET, TCP_CONNECTION_RST})
"""The codes qed_iwarp_tcp_connect_unsuccessful logs with DP_VERBOSE (QED_MSG_RDMA); it
logs the others with DP_NOTICE."""


def mode_name(ep: Ep) -> str:
    """QED_IWARP_CONNECT_MODE_STRING."""
    return "Passive" if ep.connect_mode == ConnectMode.PASSIVE else "Active"


class QedIwarp(Firmware):
    """qed_iwarp.c's handlers (see the module docstring)."""

    free_eps: int = QED_IWARP_PREALLOC_CNT
    """The length of ``ep_free_list`` (qed_iwarp_prealloc_ep)."""

    def event_cb(self, ep: Ep, event: QedEvent, status: int) -> None:
        """``ep->event_cb``: qedr_iw_event_handler (qedr_iw_cm.py)."""
        raise NotImplementedError

    def _release(self, ep: Ep) -> None:
        """The endpoint leaves the tables (a request the ULP still holds stays)."""
        raise NotImplementedError

    # ---- connect ---------------------------------------------------------------------

    def qed_iwarp_check_connect(self, ird: int, ord: int) -> int:
        """qed_iwarp_connect's first check: ORD above QED_IWARP_ORD_DEFAULT or IRD above
        QED_IWARP_IRD_DEFAULT is -EINVAL ("ERROR: Invalid ord(0x%x)/ird(0x%x)")."""
        if ord > QED_IWARP_ORD_DEFAULT or ird > QED_IWARP_IRD_DEFAULT:
            self.klog("notice", "qed_iwarp_connect",
                      f"QP(0x0) ERROR: Invalid ord(0x{ord:x})/ird(0x{ird:x})")
            return -EINVAL
        return 0

    def qed_iwarp_connect(self, ep: Ep, private_data: bytes) -> None:
        """qed_iwarp_connect from its checks on: the RTR types (``rtr_type`` unless
        peer2peer is off), ORD 0 -> 1 with the Read RTR, ``mpa_rev``, the ULP buffer,
        then the TCP offload (the SYN)."""
        p = self.p
        ep.rtr_type = RtrType(p.rtr_type) if p.peer2peer else RtrType.NONE
        if ep.rtr_type & RtrType.ZERO_READ and ep.ord == 0:
            ep.ord = 1
        ep.mpa_rev = MpaMode(p.mpa_rev)
        self.qed_iwarp_mpa_v2_set_private(ep, private_data)
        self.qed_iwarp_tcp_offload(ep)

    def qed_iwarp_tcp_offload(self, ep: Ep) -> None:
        """qed_iwarp_tcp_offload (TCP_CONNECT_ACTIVE): the firmware opens the connection
        with the MSS, window scale and timestamps the ramrod carries (QedTcp)."""
        assert ep.sock is not None
        self._set_state(ep, EpState.INIT, "qed_iwarp_tcp_offload")

    def qed_iwarp_mpa_v2_set_private(self, ep: Ep, private_data: bytes) -> int:
        """qed_iwarp_mpa_v2_set_private and the copy after it: ``out_pdata`` is the v2
        block (ENHANCED) and the private data; returns ``mpa_data_size``."""
        ep.out_pdata = frames.out_pdata(ep.mpa_rev, ep.ird, ep.ord, ep.rtr_type,
                                        private_data)
        size = 4 if ep.mpa_rev == MpaMode.ENHANCED else 0
        if size:
            self.klog("debug", "qed_iwarp_mpa_v2_set_private",
                      f"MPA_NEGOTIATE Header: ord:{ep.ord:x} ird:{ep.ird:x} peer2peer:"
                      f"{int(ep.rtr_type != RtrType.NONE)} rtr_send:"
                      f"{int(bool(ep.rtr_type & RtrType.ZERO_SEND))} rtr_write:"
                      f"{int(bool(ep.rtr_type & RtrType.ZERO_WRITE))} rtr_read:"
                      f"{int(bool(ep.rtr_type & RtrType.ZERO_READ))}", debug=True)
        return size

    def qed_iwarp_connect_complete(self, ep: Ep, fw_return_code: str) -> None:
        """qed_iwarp_connect_complete: passive, the request arrived
        (qed_iwarp_mpa_received) or the connection failed unseen by the ULP; active, the
        handshake is done (qed_iwarp_mpa_offload sends the request) or failed."""
        if ep.connect_mode == ConnectMode.PASSIVE:
            if fw_return_code == RDMA_RETURN_OK:
                self.qed_iwarp_mpa_received(ep)
            else:
                self.qed_iwarp_tcp_connect_unsuccessful(ep, fw_return_code)
        elif fw_return_code == RDMA_RETURN_OK:
            self.qed_iwarp_mpa_offload(ep, reject=False)
        else:
            self.qed_iwarp_tcp_connect_unsuccessful(ep, fw_return_code)

    def qed_iwarp_tcp_connect_unsuccessful(self, ep: Ep, fw_return_code: str) -> None:
        """qed_iwarp_tcp_connect_unsuccessful: the ep is CLOSED; passive, it goes back to
        the free list with no event; active, ACTIVE_COMPLETE with the status of
        :data:`TCP_CONNECT_STATUS`."""
        status, text = TCP_CONNECT_STATUS.get(fw_return_code, (-ECONNRESET, ""))
        fn = "qed_iwarp_tcp_connect_unsuccessful"
        if text:
            self.klog("debug" if fw_return_code in TCP_CONNECT_VERBOSE else "notice", fn,
                      f"{mode_name(ep)}(0x{ep.conn:x}) {text}",
                      debug=fw_return_code in TCP_CONNECT_VERBOSE)
        else:
            self.klog("err", fn, f"{mode_name(ep)}(0x{ep.conn:x}) Unexpected return code "
                      f"tcp connect: {fw_return_code}")
        self._set_state(ep, EpState.CLOSED, fn)
        if ep.connect_mode == ConnectMode.PASSIVE:
            self.qed_iwarp_return_ep(ep)
        else:
            self.event_cb(ep, QedEvent.ACTIVE_COMPLETE, status)

    def qed_iwarp_mpa_offload(self, ep: Ep, *, reject: bool) -> None:
        """qed_iwarp_mpa_offload: IWARP_RAMROD_CMD_ID_MPA_OFFLOAD with ``out_pdata``,
        crc_needed, the IRD/ORD, ``mode`` ep->mpa_rev, ``rtr_pref`` ep->rtr_type and
        ``reject`` when there is no QP; the ep is MPA_OFFLOADED."""
        self.klog("debug", "qed_iwarp_mpa_offload",
                  f"QP(0x{ep.conn:x}) EP(0x{ep.conn:x}) MPA Offload rc = 0 IRD=0x{ep.ird:x} "
                  f"ORD=0x{ep.ord:x} rtr_type={int(ep.rtr_type)} mpa_rev={int(ep.mpa_rev)} "
                  f"reject={int(reject)}", debug=True)
        again = ep.state == EpState.MPA_OFFLOADED  # a reject after the accept's ramrod
        self._set_state(ep, EpState.MPA_OFFLOADED, "qed_iwarp_mpa_offload")
        self.fw_send_mpa(ep, reject=reject, again=again)

    # ---- the passive side --------------------------------------------------------------

    def qed_iwarp_mpa_received(self, ep: Ep) -> None:
        """qed_iwarp_mpa_received: IRD/ORD and the RTR types of the request (ENHANCED:
        capped at 32, the types both offer, or all of ours when none match; BASIC: 32/32
        and no RTR), the v2 block stripped from the private data, MPA_REQUEST to qedr."""
        if ep.mpa_rev == MpaMode.ENHANCED:
            ird_word = int.from_bytes(ep.in_pdata[0:2], "big")
            ord_word = int.from_bytes(ep.in_pdata[2:4], "big")
            ep.ord = min(ord_word & MPA_V2_IRD_ORD_MASK, QED_IWARP_ORD_DEFAULT) & 0xFF
            ep.ird = min(ird_word & MPA_V2_IRD_ORD_MASK, QED_IWARP_IRD_DEFAULT) & 0xFF
            ep.rtr_type = RtrType.NONE
            if ird_word & MPA_V2_PEER2PEER_MODEL:
                ep.rtr_type = rtr_bits(ird_word, ord_word) & RtrType(self.p.rtr_type)
                # "if we're left with no match send our capabilities"
                if ep.rtr_type == RtrType.NONE:
                    ep.rtr_type = RtrType(self.p.rtr_type)
            hdr = 4
        else:
            ep.ord = QED_IWARP_ORD_DEFAULT
            ep.ird = QED_IWARP_IRD_DEFAULT
            hdr = 0
        self.klog("debug", "qed_iwarp_mpa_received",
                  f"MPA_NEGOTIATE (v{int(ep.mpa_rev)}): ORD: 0x{ep.ord:x} IRD: 0x{ep.ird:x} "
                  f"rtr:0x{int(ep.rtr_type):x} ulp_data_len = {ep.ulp_data_len:x} "
                  f"mpa_hdr_size = {hdr:x}", debug=True)
        self._private_data(ep, hdr)
        self._set_state(ep, EpState.MPA_REQ_RCVD, "qed_iwarp_mpa_received")
        self.event_cb(ep, QedEvent.MPA_REQUEST, 0)

    def _private_data(self, ep: Ep, hdr: int) -> None:
        """``cm_info.private_data = in_pdata + hdr``, ``private_data_len = ulp_data_len -
        hdr`` (a u16: below ``hdr`` it wraps)."""
        ep.pd_hdr = hdr
        ep.private_data_len = (ep.ulp_data_len - hdr) & 0xFFFF
        ep.private_data = bytes(ep.in_pdata[hdr:hdr + min(ep.private_data_len, 512)])
        if ep.ulp_data_len < hdr:
            self.tr("kernel_quirk", "qed_iwarp_parse_private_data", conn=ep.conn,
                    quirk="private_data_len = ulp_data_len - 4 wraps (u16)",
                    ulp_data_len=ep.ulp_data_len, private_data_len=ep.private_data_len)

    def qed_iwarp_accept(self, ep: Ep, private_data: bytes, ird: int, ord: int) -> int:
        """qed_iwarp_accept: -EINVAL for ORD/IRD above 32; one ep back on the free list;
        ENHANCED: ORD down to the request's IRD, IRD 0 -> 1 with the Read RTR; the reply
        through qed_iwarp_mpa_offload."""
        if ord > QED_IWARP_ORD_DEFAULT or ird > QED_IWARP_IRD_DEFAULT:
            # the DP_VERBOSE prints iparams->ord twice
            self.klog("debug", "qed_iwarp_accept",
                      f"QP(0x{ep.conn:x}) EP(0x{ep.conn:x}) ERROR: Invalid "
                      f"ord(0x{ord:x})/ird(0x{ord:x})", debug=True)
            return -EINVAL
        self.free_eps += 1  # qed_iwarp_prealloc_ep(p_hwfn, false)
        ep.qp = QpState.IDLE
        if ep.mpa_rev == MpaMode.ENHANCED:
            if ord > ep.ird:
                ord = ep.ird
            if ep.rtr_type & RtrType.ZERO_READ and ird == 0:
                ird = 1
        ep.ord = ord
        ep.ird = ird
        self.qed_iwarp_mpa_v2_set_private(ep, private_data)
        self.qed_iwarp_mpa_offload(ep, reject=False)
        return 0

    def qed_iwarp_reject(self, ep: Ep, private_data: bytes) -> None:
        """qed_iwarp_reject: no QP, the v2 block with the request's IRD/ORD, the reject
        through qed_iwarp_mpa_offload."""
        ep.qp = None
        self.qed_iwarp_mpa_v2_set_private(ep, private_data)
        self.qed_iwarp_mpa_offload(ep, reject=True)

    def qed_iwarp_return_ep(self, ep: Ep) -> None:
        """qed_iwarp_return_ep: the ep goes back to ``ep_free_list``."""
        self.free_eps += 1
        ep.qp = None
        self._release(ep)

    # ---- the active side ---------------------------------------------------------------

    def qed_iwarp_parse_private_data(self, ep: Ep) -> None:
        """qed_iwarp_parse_private_data: with the *local* ``mpa_rev`` ENHANCED (not the
        reply's revision), IRD is the reply's ORD and ORD the reply's IRD, as u8, and the
        first four bytes are taken off the private data, even of a v1 reply."""
        if self.p.mpa_rev == MpaMode.ENHANCED:
            ird_word = int.from_bytes(ep.in_pdata[0:2], "big")
            ord_word = int.from_bytes(ep.in_pdata[2:4], "big")
            ep.ird = (ord_word & MPA_V2_IRD_ORD_MASK) & 0xFF
            ep.ord = (ird_word & MPA_V2_IRD_ORD_MASK) & 0xFF
            hdr = 4
        else:
            hdr = 0
        self._private_data(ep, hdr)

    def qed_iwarp_mpa_reply_arrived(self, ep: Ep) -> None:
        """qed_iwarp_mpa_reply_arrived: the reply parsed, ACTIVE_MPA_REPLY to qedr (which
        asks for the RTR)."""
        if ep.connect_mode == ConnectMode.PASSIVE:
            self.klog("notice", "qed_iwarp_mpa_reply_arrived",
                      "MPA reply event not expected on passive side!")
            return
        self.qed_iwarp_parse_private_data(ep)
        self.klog("debug", "qed_iwarp_mpa_reply_arrived",
                  f"MPA_NEGOTIATE (v{int(ep.mpa_rev)}): ORD: 0x{ep.ord:x} IRD: 0x{ep.ird:x}",
                  debug=True)
        ep.mpa_reply_processed = True
        self.event_cb(ep, QedEvent.ACTIVE_MPA_REPLY, 0)

    def qed_iwarp_send_rtr(self, ep: Ep) -> int:
        """qed_iwarp_send_rtr: IWARP_RAMROD_CMD_ID_MPA_OFFLOAD_SEND_RTR."""
        self.fw_send_rtr(ep)
        return 0

    def qed_iwarp_mpa_complete(self, ep: Ep, fw_return_code: str) -> None:
        """qed_iwarp_mpa_complete: ACTIVE/PASSIVE_COMPLETE with the status of
        :data:`MPA_COMPLETE_STATUS`; OK moves the QP to RTS (internal) and the ep to
        ESTABLISHED; a failure makes it CLOSED and, on a passive side without a QP (a
        reject), returns it to the free list."""
        fn = "qed_iwarp_mpa_complete"
        if ep.state == EpState.CLOSED:
            return
        active = ep.connect_mode == ConnectMode.ACTIVE
        event = QedEvent.ACTIVE_COMPLETE if active else QedEvent.PASSIVE_COMPLETE
        if active and not ep.mpa_reply_processed:
            self.qed_iwarp_parse_private_data(ep)
        status, text = MPA_COMPLETE_STATUS.get(fw_return_code, (-ECONNRESET, ""))
        if fw_return_code == RDMA_RETURN_OK:
            if ep.qp is None:
                # ep->qp->max_rd_atomic_req = ...: qed_iwarp_reject (a reject after the
                # accept) left ep->qp NULL, and the accepted handshake completed
                self.tr("kernel_bug", fn, conn=ep.conn,
                        what="RDMA_RETURN_OK with ep->qp NULL (a reject after the accept): "
                             "ep->qp->max_rd_atomic_req dereferences it")
                return
            self.qed_iwarp_modify_qp(ep, QpState.RTS, internal=True)
            self._set_state(ep, EpState.ESTABLISHED, fn)
        else:
            if text:
                # MPA_RST: "%s(0x%x) MPA reset(tcp cid: 0x%x)" (ep->cid, ep->tcp_cid)
                tail = f"(tcp cid: 0x{ep.conn:x})" if fw_return_code == MPA_RST else ""
                self.klog("notice", fn, f"{mode_name(ep)}(0x{ep.conn:x}) {text}{tail}")
            self._set_state(ep, EpState.CLOSED, fn)
            self.fw_stop_timer(ep)
        self.event_cb(ep, event, status)
        if fw_return_code != RDMA_RETURN_OK and not active and ep.qp is None:
            self.qed_iwarp_return_ep(ep)

    # ---- after RTS -----------------------------------------------------------------------

    def qed_iwarp_modify_qp(self, ep: Ep, new: QpState, *, internal: bool) -> int:
        """qed_iwarp_modify_qp: the QP state machine; from the ULP (not ``internal``),
        RTS -> CLOSING or ERROR and IDLE -> ERROR reach the firmware (qed_iwarp_modify_fw).
        ERROR -> anything but IDLE or CLOSING is -EINVAL."""
        old = ep.qp
        if old is None or old == new:
            return 0
        modify_fw = False
        rc = 0
        if old == QpState.IDLE:
            if new == QpState.RTS:
                ep.qp = new
            elif new == QpState.ERROR:
                ep.qp = new
                modify_fw = not internal
        elif old == QpState.RTS:
            if new in (QpState.CLOSING, QpState.ERROR):
                ep.qp = new
                modify_fw = not internal
        elif old == QpState.ERROR:
            if new == QpState.IDLE:
                ep.qp = new
            elif new != QpState.CLOSING:
                rc = -EINVAL
        else:  # TERMINATE, CLOSING
            ep.qp = new
        now = ep.qp.name if ep.qp is not None else "-"
        self.klog("debug", "qed_iwarp_modify_qp", f"QP(0x{ep.conn:x}) {old.name} --> "
                  f"{now}{'internal' if internal else ''}", debug=True)
        self.tr("qp_state", "qed_iwarp_modify_qp", conn=ep.conn, old=old.name, new=now,
                internal=internal)
        if modify_fw:
            self.fw_modify_qp(ep, closing=ep.qp == QpState.CLOSING)
        return rc

    def qed_iwarp_exception_received(self, ep: Ep, fw_ret_code: str) -> None:
        """qed_iwarp_exception_received: LLP_CLOSED is DISCONNECT 0, LLP_RESET DISCONNECT
        -ECONNRESET, a Terminate TERMINATE_RECEIVED."""
        if fw_ret_code == EXCEPTION_LLP_CLOSED:
            self.event_cb(ep, QedEvent.DISCONNECT, 0)
        elif fw_ret_code == EXCEPTION_LLP_RESET:
            self.event_cb(ep, QedEvent.DISCONNECT, -ECONNRESET)
        elif fw_ret_code == EXCEPTION_TERMINATE_RECEIVED:
            self.event_cb(ep, QedEvent.TERMINATE_RECEIVED, 0)
        else:
            self.klog("debug", "qed_iwarp_exception_received",
                      f"Unhandled exception received...fw_ret_code={fw_ret_code}", debug=True)

    def qed_iwarp_qp_in_error(self, ep: Ep, fw_return_code: str) -> None:
        """qed_iwarp_qp_in_error: the QP to ERROR (internal), the ep CLOSED, CLOSE with 0
        for IWARP_QP_IN_ERROR_GOOD_CLOSE, else -ECONNRESET."""
        if ep.state == EpState.CLOSED:
            return
        self.qed_iwarp_modify_qp(ep, QpState.ERROR, internal=True)
        status = 0 if fw_return_code == QP_IN_ERROR_GOOD_CLOSE else -ECONNRESET
        self.tr("fw_event", "IWARP_EVENT_TYPE_ASYNC_QP_IN_ERROR_STATE", conn=ep.conn,
                fw_return_code=fw_return_code)
        self._set_state(ep, EpState.CLOSED, "qed_iwarp_qp_in_error")
        self.event_cb(ep, QedEvent.CLOSE, status)
