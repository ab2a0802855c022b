"""cm.c's handlers on one endpoint: the MPA steps, the upcalls, RDMA mode, closing.

:class:`Cxgb4Cm` holds what ``Cxgb4Core`` (:mod:`mpa_emu.stacks.cxgb4.core`) does to an
endpoint once the adapter's TCP (or a verb) has told it something; each method is named
after the cm.c function it models. Every change of an endpoint's or listener's state
goes through :meth:`Cxgb4Cm._set_state`.
"""

from __future__ import annotations

from collections import deque
from errno import ECONNREFUSED, ECONNRESET, EINVAL, ENOMEM, ETIMEDOUT
from typing import Any

from mpa_emu.stacks.contract.api import NodeWatch
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.events import IwEvent, Upcall
from mpa_emu.stacks.contract.trace import Trace, make_record
from mpa_emu.stacks.cxgb4 import fpdu_rx, frames
from mpa_emu.stacks.cxgb4.endpoint import Endpoint, ListenEp
from mpa_emu.stacks.cxgb4.mpa_rx import BAD, INCOMPLETE, accumulate
from mpa_emu.stacks.cxgb4.params import Cxgb4Params
from mpa_emu.stacks.cxgb4.states import (
    DDP_LLP,
    LAYER_MPA,
    MPA_INSUFF_IRD,
    MPA_NOMATCH_RTR,
    STATE_TEXT,
    EpState,
    P2pType,
    QpState,
)
from mpa_emu.stacks.cxgb4.tcp import Cxgb4Tcp
from mpa_emu.stacks.deadlines import Deadlines
from mpa_emu.wire import ddp, mpa

S = EpState
SECOND = 1_000_000_000

# CPL status values of act_open_rpl / peer_abort that the model produces (enum CPL_error,
# drivers/net/ethernet/chelsio/cxgb4/t4_msg.h).
CPL_ERR_CONN_RESET = 20
CPL_ERR_XMIT_TIMEDOUT = 31
CPL_ERR_FINWAIT2_TIMEDOUT = 33


class Cxgb4Cm:
    """The endpoint handlers of cm.c (see the module docstring)."""

    name: str
    p: Cxgb4Params
    trace: Trace | None
    tcp: Cxgb4Tcp
    _eps: dict[int, Endpoint]
    _ep_timers: Deadlines
    _by_sock: dict[int, Endpoint]
    _listeners: dict[int, ListenEp]
    _by_tcp_listener: dict[int, ListenEp]
    _fin_sent: set[int]
    _upcalls: deque[Upcall]
    _next_conn: int
    _now: int
    _watch: NodeWatch | None
    _watched: set[int]
    """Endpoints the watch was told of (node_created), until they leave the tables."""

    def watch_nodes(self, watch: NodeWatch | None) -> None:
        """Tell ``watch`` of each endpoint (not listeners): created with its 4-tuple on
        its first state change, each change (an :class:`EpState`), freed when it leaves
        the tables (:class:`mpa_emu.stacks.contract.api.WatchedCore`)."""
        self._watch = watch

    def _unwatch(self, ep: Endpoint) -> None:
        if ep.conn in self._watched and ep.conn not in self._eps and self._watch is not None:
            self._watched.discard(ep.conn)
            self._watch.node_freed(ep.conn)

    # ---- trace and kernel log ------------------------------------------------------

    def tr(self, kind: str, fn: str, **fields: Any) -> None:
        """Emit one trace record at the current time."""
        if self.trace is not None:
            self.trace.emit(make_record(self._now, self.name, kind, fn, fields))

    def klog(self, level: str, fn: str, text: str, *, debug: bool = False) -> None:
        """A line the driver writes to the kernel log (``pr_err``, ``pr_warn``,
        ``pr_info``; ``debug`` for ``pr_debug``, seen only with dynamic debug)."""
        self.tr("kernel_log", fn, level=level, text=text, dynamic_debug=debug)

    def _set_state(self, ep: Endpoint | ListenEp, new: EpState, fn: str, *,
                   logged: bool = False) -> None:
        """``__state_set`` (``logged``: ``state_set``, which prints the change): the one
        place an endpoint's or listener's state changes."""
        old = ep.state
        ep.state = new
        if logged:
            self.klog("debug", "state_set", f"{STATE_TEXT[old]} -> {STATE_TEXT[new]}",
                      debug=True)
        ident = ep.conn if isinstance(ep, Endpoint) else ep.ident
        self.tr("state_changed", fn, conn=ident, old=old.name, new=new.name)
        watch = self._watch
        if watch is not None and isinstance(ep, Endpoint) and old != new:
            if ep.conn not in self._watched:
                self._watched.add(ep.conn)
                watch.node_created(ep.conn, ep.local_port, ep.remote_ip, ep.remote_port)
            watch.state_changed(ep.conn, new)

    def _new_ep(self, initiator: bool, addrs: tuple[bytes, int, bytes, int]) -> Endpoint:
        ep = Endpoint(self._next_conn, initiator, addrs[0], addrs[1], addrs[2], addrs[3],
                      state=S.IDLE)
        self._next_conn += 1
        self._eps[ep.conn] = ep
        return ep

    def _upcall(self, fn: str, ep: Endpoint, event: IwEvent, status: int, *,
                pdata: bytes = b"", pdata_len: int = 0, ird: int = 0, ord: int = 0,
                listener: int | None = None, past: int = 0) -> None:
        self._upcalls.append(Upcall(event, ep.conn, status, self._now, ep.local_ip,
                                    ep.local_port, ep.remote_ip, ep.remote_port, pdata,
                                    pdata_len, ird, ord, listener, past))
        self.tr("upcall", fn, conn=ep.conn, event=event.name, status=status)

    def _send(self, ep: Endpoint, data: bytes, comment: str) -> None:
        if ep.sock is not None:
            self.tcp.send(ep.sock, data, self._now, comment)

    # ---- endpoint timer ----------------------------------------------------------------

    def start_ep_timer(self, ep: Endpoint) -> None:
        """``start_ep_timer``: ``ep_timeout_secs`` from now (pr_err if already running)."""
        if ep.timer_due is not None:
            self.klog("err", "start_ep_timer", f"start_ep_timer timer already started! "
                      f"ep#{ep.conn}")
            return
        ep.timer_due = self._ep_timers.arm(ep.conn,
                                           self._now + self.p.ep_timeout_secs * SECOND)

    def stop_ep_timer(self, ep: Endpoint) -> None:
        """``stop_ep_timer``."""
        ep.timer_due = None

    def process_timeout(self, ep: Endpoint) -> None:
        """``process_timeout``: the endpoint timer fired."""
        abort = True
        if ep.state == S.MPA_REQ_SENT:
            self.connect_reply_upcall(ep, -ETIMEDOUT)
        elif ep.state in (S.MPA_REQ_WAIT, S.MPA_REQ_RCVD, S.MPA_REP_SENT, S.FPDU_MODE):
            pass
        elif ep.state in (S.CLOSING, S.MORIBUND):
            if ep.has_cm_id and ep.qp is not None:
                ep.qp = QpState.ERROR
            self.close_complete_upcall(ep, -ETIMEDOUT)
        else:
            abort = False
        if abort:
            self.c4iw_ep_disconnect(ep, True)

    # ---- upcalls -----------------------------------------------------------------------

    def _pdata(self, ep: Endpoint, v2: bool) -> tuple[bytes, int, int]:
        """Private data as the upcalls point at it: after the header (and the 4-byte
        block when v2), ``(u8)`` length; bytes past the received frame counted."""
        start = mpa.FRAME_SIZE + (mpa.RTR_MSG_SIZE if v2 else 0)
        length = (ep.plen - (mpa.RTR_MSG_SIZE if v2 else 0)) & 0xFF
        data = bytes(ep.mpa_pkt[start:start + length])
        data += bytes(length - len(data))
        past = max(0, start + length - ep.mpa_pkt_len)
        return data, length, min(past, length)

    def connect_reply_upcall(self, ep: Endpoint, status: int) -> None:
        """``connect_reply_upcall``: CONNECT_REPLY; private data and IRD/ORD only for 0
        and -ECONNREFUSED; a failure drops the cm_id."""
        if not ep.has_cm_id:
            return
        pdata, length, past, ird, ord = b"", 0, 0, 0, 0
        if status in (0, -ECONNREFUSED):
            if not ep.tried_with_mpa_v1:
                pdata, length, past = self._pdata(ep, True)
                ird, ord = ep.ord, ep.ird
            else:
                pdata, length, past = self._pdata(ep, False)
                ird = ord = self.p.cur_max_read_depth
        self._upcall("connect_reply_upcall", ep, IwEvent.CONNECT_REPLY, status, pdata=pdata,
                     pdata_len=length, ird=ird, ord=ord, past=past)
        if status < 0:
            ep.has_cm_id = False

    def connect_request_upcall(self, ep: Endpoint) -> None:
        """``connect_request_upcall``: CONNECT_REQUEST to the listener's ULP."""
        if not ep.tried_with_mpa_v1:
            pdata, length, past = self._pdata(ep, True)
            ird, ord = ep.ird, ep.ord
        else:
            pdata, length, past = self._pdata(ep, False)
            ird = ord = self.p.cur_max_read_depth
        ep.held = True
        self._upcall("connect_request_upcall", ep, IwEvent.CONNECT_REQUEST, 0, pdata=pdata,
                     pdata_len=length, ird=ird, ord=ord, listener=ep.parent, past=past)

    def established_upcall(self, ep: Endpoint) -> None:
        """``established_upcall``: ESTABLISHED with IRD = ``ep->ord``, ORD = ``ep->ird``."""
        if ep.has_cm_id:
            self._upcall("established_upcall", ep, IwEvent.ESTABLISHED, 0, ird=ep.ord,
                         ord=ep.ird)

    def peer_close_upcall(self, ep: Endpoint) -> None:
        """``peer_close_upcall``: DISCONNECT."""
        if ep.has_cm_id:
            self._upcall("peer_close_upcall", ep, IwEvent.DISCONNECT, 0)

    def peer_abort_upcall(self, ep: Endpoint) -> None:
        """``peer_abort_upcall``: CLOSE -ECONNRESET; drops the cm_id."""
        if ep.has_cm_id:
            self._upcall("peer_abort_upcall", ep, IwEvent.CLOSE, -ECONNRESET)
            ep.has_cm_id = False

    def close_complete_upcall(self, ep: Endpoint, status: int) -> None:
        """``close_complete_upcall``: CLOSE with ``status``; drops the cm_id."""
        if ep.has_cm_id:
            self._upcall("close_complete_upcall", ep, IwEvent.CLOSE, status)
            ep.has_cm_id = False

    # ---- opening -------------------------------------------------------------------------

    def pass_accept_req(self, sock: int, tcp_listener: int | None) -> None:
        """``pass_accept_req`` + ``pass_establish``: a child endpoint for a completed
        passive open, in MPA_REQ_WAIT with the endpoint timer running."""
        lst = None if tcp_listener is None else self._by_tcp_listener.get(tcp_listener)
        addrs = self.tcp.addresses(sock)
        if lst is None or lst.state != S.LISTEN or addrs is None:
            self.klog("err", "pass_accept_req", "pass_accept_req - listening ep not in LISTEN")
            self.tcp.abort(sock, self._now, "reject_cr: CPL_TID_RELEASE")
            return
        ep = self._new_ep(False, addrs)
        ep.sock = sock
        ep.parent = lst.ident
        self._by_sock[sock] = ep
        self._set_state(ep, S.CONNECTING, "pass_accept_req", logged=True)
        self._set_state(ep, S.MPA_REQ_WAIT, "pass_establish")
        self.start_ep_timer(ep)

    def act_establish(self, ep: Endpoint) -> None:
        """``act_establish``: the handshake is done; send the MPA request."""
        self.send_mpa_req(ep, 1 if ep.retry_with_mpa_v1 else self.p.mpa_rev)

    def act_open_rpl(self, ep: Endpoint, err: int) -> None:
        """``act_open_rpl``: the active open failed. A RST to the SYN is
        ``CPL_ERR_CONN_RESET`` (-ECONNRESET, ``status2errno``); a SYN timeout -ETIMEDOUT."""
        status = -ECONNRESET if err != ETIMEDOUT else -ETIMEDOUT
        self.connect_reply_upcall(ep, status)
        self._set_state(ep, S.DEAD, "act_open_rpl", logged=True)
        self.release_ep_resources(ep)

    def send_mpa_req(self, ep: Endpoint, rev: int) -> None:
        """``send_mpa_req``: the request frame; timer; MPA_REQ_SENT."""
        p = self.p
        ep.attr_recv_marker = p.markers_enabled
        if rev == 1:
            ep.tried_with_mpa_v1 = True
            ep.retry_with_mpa_v1 = False
        pdata = bytes(ep.mpa_pkt[mpa.FRAME_SIZE:mpa.FRAME_SIZE + ep.plen])
        data = frames.mpa_request(rev=rev, crc=p.crc_enabled, markers=p.markers_enabled,
                                  ird=ep.ird, ord=ep.ord, peer2peer=p.peer2peer,
                                  p2p_type=p.p2p_type, private_data=pdata)
        old = ep.state.name
        self.start_ep_timer(ep)
        self._set_state(ep, S.MPA_REQ_SENT, "send_mpa_req")
        ep.attr_initiator = True
        self._send(ep, data, f"send_mpa_req: {old} -> MPA_REQ_SENT (MPA v{rev} request)")

    def rx_data(self, ep: Endpoint, data: bytes) -> None:
        """``rx_data``: stream bytes during MPA negotiation; in RDMA mode the firmware's
        (see :meth:`rdma_rx`)."""
        disconnect = 0
        if ep.state == S.MPA_REQ_SENT:
            disconnect = self.process_mpa_reply(ep, data)
        elif ep.state == S.MPA_REQ_WAIT:
            disconnect = self.process_mpa_request(ep, data)
        elif ep.state == S.FPDU_MODE and ep.qp == QpState.RTS:
            self.rdma_rx(ep, data)
        else:
            self.tr("segment_dropped", "rx_data", conn=ep.conn, state=ep.state.name,
                    reason=f"{len(data)} stream bytes in {ep.state.name}: not looked at",
                    len=len(data))
        if disconnect:
            self.c4iw_ep_disconnect(ep, disconnect == 2)

    def process_mpa_reply(self, ep: Endpoint, data: bytes) -> int:
        """``process_mpa_reply``: 0 (incomplete or done), 1 (close), 2 (abort)."""
        p = self.p
        fn = "process_mpa_reply"
        check, ep.mpa_pkt_len = accumulate(ep.mpa_pkt, ep.mpa_pkt_len, data, request=False,
                                           mpa_rev=p.mpa_rev)
        if check.status == INCOMPLETE:
            if check.pd_length:
                ep.plen = check.pd_length & 0xFF
            return 0
        if check.status == BAD:
            if check.log:
                self.klog("err", fn, check.log)
            self.tr("mpa_error", fn, conn=ep.conn, reason=check.reason, errno=-check.errno)
            self.stop_ep_timer(ep)
            self.connect_reply_upcall(ep, -check.errno)
            return 2
        ep.plen = check.pd_length & 0xFF
        if check.flags & mpa.FLAG_REJECT:
            self.stop_ep_timer(ep)
            self.connect_reply_upcall(ep, -ECONNREFUSED)
            return 2
        self.stop_ep_timer(ep)
        self._set_state(ep, S.FPDU_MODE, fn)
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
                insuff_ird = self._negotiate_reply(ep, ird_word, ord_word)
        elif check.rev == 1 and p.peer2peer:
            ep.attr_p2p_type = p.p2p_type
        self.klog("debug", fn, f"crc_enabled={int(ep.attr_crc)}, recv_marker_enabled="
                  f"{int(ep.attr_recv_marker)}, xmit_marker_enabled={int(ep.attr_xmit_marker)}"
                  f", version={ep.attr_version} p2p_type={ep.attr_p2p_type} "
                  f"local-p2p_type = {p.p2p_type}", debug=True)
        rtr_mismatch = False
        if ep.attr_version == 2 and p.peer2peer and ep.attr_p2p_type != p.p2p_type:
            ep.attr_p2p_type = P2pType.DISABLED
            rtr_mismatch = True
        if ep.qp != QpState.IDLE:  # the ULP moved the QP to ERROR: RTS fails
            self.connect_reply_upcall(ep, -EINVAL)
            return 2
        self.rdma_init(ep)
        if rtr_mismatch or insuff_ird:
            what = "RTR mismatch" if rtr_mismatch else "Insufficient IRD"
            self.klog("err", fn, f"{fn}: {what}, sending TERM")
            self.post_terminate(ep, LAYER_MPA | DDP_LLP,
                                MPA_NOMATCH_RTR if rtr_mismatch else MPA_INSUFF_IRD)
            self.connect_reply_upcall(ep, -ENOMEM)
            return 1
        self.connect_reply_upcall(ep, 0)
        return 0

    def _negotiate_reply(self, ep: Endpoint, ird_word: int, ord_word: int) -> bool:
        """The MPA v2 part of ``process_mpa_reply``; True for insufficient IRD."""
        p = self.p
        resp_ird = ird_word & mpa.IRD_ORD_MASK
        resp_ord = ord_word & mpa.IRD_ORD_MASK
        self.klog("debug", "process_mpa_reply", f"responder ird {resp_ird} ord {resp_ord} "
                  f"ep ird {ep.ird} ord {ep.ord}", debug=True)
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

    def process_mpa_request(self, ep: Endpoint, data: bytes) -> int:
        """``process_mpa_request``: 0 (incomplete or delivered) or 2 (abort)."""
        p = self.p
        fn = "process_mpa_request"
        check, ep.mpa_pkt_len = accumulate(ep.mpa_pkt, ep.mpa_pkt_len, data, request=True,
                                           mpa_rev=p.mpa_rev)
        if check.status == INCOMPLETE:
            if check.pd_length:
                ep.plen = check.pd_length & 0xFF
            return 0
        if check.status == BAD:
            if check.log:
                self.klog("err", fn, check.log)
            self.tr("mpa_error", fn, conn=ep.conn, reason=check.reason)
            self.stop_ep_timer(ep)
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
                self.klog("debug", fn, f"initiator ird {ep.ird} ord {ep.ord}", debug=True)
                if ird_word & frames.MPA_V2_PEER2PEER_MODEL and p.peer2peer:
                    if ord_word & frames.MPA_V2_RDMA_WRITE_RTR:
                        ep.attr_p2p_type = P2pType.RDMA_WRITE
                    elif ord_word & frames.MPA_V2_RDMA_READ_RTR:
                        ep.attr_p2p_type = P2pType.READ_REQ
        elif check.rev == 1 and p.peer2peer:
            ep.attr_p2p_type = p.p2p_type
        self.klog("debug", fn, f"crc_enabled={int(ep.attr_crc)}, recv_marker_enabled="
                  f"{int(ep.attr_recv_marker)}, xmit_marker_enabled={int(ep.attr_xmit_marker)}"
                  f", version={ep.attr_version} p2p_type={ep.attr_p2p_type}", debug=True)
        self._set_state(ep, S.MPA_REQ_RCVD, fn)
        parent = None if ep.parent is None else self._listeners.get(ep.parent)
        if parent is None or parent.state == S.DEAD:
            self.tr("upcall_dropped", fn, conn=ep.conn, reason="the listener is DEAD")
            return 2
        self.connect_request_upcall(ep)
        return 0

    def c4iw_accept_cr(self, ep: Endpoint, pdata: bytes, ird: int, ord: int) -> int:
        """``c4iw_accept_cr`` from its checks on: 0 or the negative errno it returns."""
        p = self.p
        fn = "c4iw_accept_cr"
        limit = p.cur_max_read_depth
        if ord > limit or ird > limit:
            self.c4iw_ep_disconnect(ep, True)
            return -EINVAL
        if ep.attr_version == 2 and ep.attr_enhanced:
            if ord > ep.ird:
                if p.relaxed_ird_negotiation:
                    ord = ep.ird
                else:
                    ep.ird, ep.ord = ird, ord
                    self.send_mpa_reject(ep, pdata)
                    self.c4iw_ep_disconnect(ep, True)
                    return -ENOMEM
            if ird < ep.ord:
                if p.relaxed_ird_negotiation and ep.ord <= p.max_ordird_qp:
                    ird = ep.ord
                else:
                    self.c4iw_ep_disconnect(ep, True)
                    return -ENOMEM
        ep.ird, ep.ord = ird, ord
        if ep.attr_version == 1:
            if p.peer2peer and ep.ird == 0:
                ep.ird = 1
        elif p.peer2peer and ep.attr_p2p_type != P2pType.DISABLED \
                and p.p2p_type == P2pType.READ_REQ and ep.ird == 0:
            ep.ird = 1
        self.klog("debug", fn, f"ird {ep.ird} ord {ep.ord}", debug=True)
        ep.has_cm_id = True
        ep.qp = QpState.IDLE
        self.rdma_init(ep)
        self.send_mpa_reply(ep, pdata)
        self._set_state(ep, S.FPDU_MODE, fn)
        # fw4_ack with STOP_MPA_TIMER: the model takes the reply as acknowledged at once.
        self.stop_ep_timer(ep)
        self.established_upcall(ep)
        return 0

    def c4iw_reject_cr(self, ep: Endpoint, pdata: bytes) -> None:
        """``c4iw_reject_cr``: reject frame and FIN (``mpa_rev`` 0: RST)."""
        abort = self.p.mpa_rev == 0
        if not abort:
            self.send_mpa_reject(ep, pdata)
        self.stop_ep_timer(ep)
        self.c4iw_ep_disconnect(ep, abort)

    def _reply(self, ep: Endpoint, pdata: bytes, reject: bool) -> bytes:
        p = self.p
        if reject:
            p2p = p.p2p_type
        else:  # send_mpa_reply: A and the local type only with a negotiated RTR
            p2p = p.p2p_type if ep.attr_p2p_type != P2pType.DISABLED else P2pType.DISABLED
        return frames.mpa_reply(
            reject=reject, rev=ep.attr_version, enhanced=ep.attr_enhanced, crc=ep.attr_crc,
            markers=ep.attr_recv_marker, ird=ep.ird, ord=ep.ord,
            peer2peer=p.peer2peer and (reject or ep.attr_p2p_type != P2pType.DISABLED),
            p2p_type=p2p, private_data=pdata, copy_private_data=ep.plen != 0)

    def send_mpa_reject(self, ep: Endpoint, pdata: bytes) -> None:
        """``send_mpa_reject``: R, the v2 block with the request's IRD/ORD when v2 with S.
        In the v2 branch the private data is copied only when ``ep->plen`` (the request's
        PD_Length as a u8) is not 0."""
        data = self._reply(ep, pdata, True)
        self._send(ep, data, f"send_mpa_reject: {ep.state.name} (MPA reject, "
                   f"{len(pdata)} bytes of private data)")

    def send_mpa_reply(self, ep: Endpoint, pdata: bytes) -> None:
        """``send_mpa_reply``: C and M as negotiated, the v2 block, MPA_REP_SENT."""
        data = self._reply(ep, pdata, False)
        self._set_state(ep, S.MPA_REP_SENT, "send_mpa_reply")
        self._send(ep, data, "send_mpa_reply: MPA_REQ_RCVD -> MPA_REP_SENT")

    # ---- RDMA mode (the firmware after FW_RI_INIT_WR) ------------------------------------

    def rdma_init(self, ep: Endpoint) -> None:
        """``c4iw_modify_qp(RTS)`` -> ``rdma_init``: the initiator's firmware sends the
        RTR (``build_rtr_msg``) unless the negotiated type is DISABLED."""
        ep.qp = QpState.RTS
        self.tr("qp_state", "rdma_init", conn=ep.conn, new="RTS", p2p_type=ep.attr_p2p_type)
        if ep.attr_initiator:
            rtr = frames.rtr(ep.attr_p2p_type, crc=ep.attr_crc)
            if rtr is not None:
                kind = "zero-length RDMA Write" if ep.attr_p2p_type == P2pType.RDMA_WRITE \
                    else "zero-length RDMA Read Request"
                self._send(ep, rtr, f"rdma_init: RTR, {kind} (build_rtr_msg)")

    def post_terminate(self, ep: Endpoint, layer_etype: int, ecode: int) -> None:
        """``c4iw_modify_qp(TERMINATE, send_term)`` -> ``post_terminate``."""
        ep.qp = QpState.TERMINATE
        self._send(ep, frames.terminate(layer_etype, ecode, crc=ep.attr_crc),
                   f"post_terminate: Terminate layer_etype {layer_etype:#04x} "
                   f"ecode {ecode:#04x}")

    def rdma_rx(self, ep: Endpoint, data: bytes) -> None:
        """The adapter takes whole FPDUs in order (:func:`fpdu_rx.check`, the RFC rules):
        a Terminate raises ``CPL_RDMA_TERMINATE``, a zero-length Read Request gets its
        zero-length Read Response, a Send fills a posted receive buffer; a refused FPDU
        is an error CQE (:meth:`c4iw_ev_dispatch`)."""
        ep.rx_fpdu += data
        while ep.qp == QpState.RTS and len(ep.rx_fpdu) >= 2:
            try:
                fpdu = mpa.unframe_fpdu(bytes(ep.rx_fpdu))
            except mpa.MpaFormatError:
                return  # wait for the rest of the FPDU
            del ep.rx_fpdu[:fpdu.wire_length]
            partial = None if ep.rx_partial is None else len(ep.rx_partial)
            verdict = fpdu_rx.check(fpdu, crc=ep.attr_crc, recvq=ep.recvq, msn=ep.rx_msn,
                                    partial=partial, room=ep.rx_room)
            if verdict.error is not None:
                self.c4iw_ev_dispatch(ep, verdict.error)
                return
            if verdict.kind == "terminate":
                self.terminate(ep)
                return
            if verdict.kind == "read":
                self._send(ep, frames.read_response(verdict.sink_stag, verdict.sink_to,
                                                    crc=ep.attr_crc),
                           "firmware: RDMA Read Response (zero-length, answers the RTR)")
            elif verdict.kind == "recv":
                if ep.rx_partial is None:
                    ep.rx_partial, ep.rx_room = bytearray(), verdict.room
                ep.rx_partial += verdict.data
                if verdict.last:
                    message, ep.rx_partial = bytes(ep.rx_partial), None
                    ep.rx_msn += 1
                    ep.completions.append(("SUCCESS", message))
                    self.tr("recv_completion", "firmware RDMA", conn=ep.conn,
                            status="SUCCESS", bytes=len(message))
            else:
                raw = fpdu.ulpdu
                self.tr("fpdu_received", "firmware RDMA", conn=ep.conn,
                        opcode=ddp.OPCODE_NAMES.get(raw[1] & 0x0F, str(raw[1] & 0x0F)),
                        len=len(raw))

    def c4iw_ev_dispatch(self, ep: Endpoint, err: fpdu_rx.ErrCqe) -> None:
        """``c4iw_ev_dispatch`` -> ``post_qp_event`` for the adapter's error CQE:
        ``dump_err_cqe`` logs it, the QP goes from RTS to TERMINATE (``c4iw_modify_qp``,
        not internal: ``post_terminate`` and a graceful ``c4iw_ep_disconnect``), then the
        IB event. ``post_terminate`` gets no CQE from ``c4iw_modify_qp`` (it passes
        NULL), so the Terminate carries ``build_term_codes(NULL)``: RDMAP local
        catastrophic, 0, not the codes the CQE status maps to."""
        mapped = fpdu_rx.build_term_codes(err)
        self.tr("err_cqe", "c4iw_ev_dispatch", conn=ep.conn, status=err.name,
                opcode=err.opcode, rq=err.rq, term_codes_for_status=list(mapped))
        self.klog("err", "dump_err_cqe", f"AE qpid {ep.conn} opcode {err.opcode} status "
                  f"{err.status:#x} type {0 if err.rq else 1} len {err.length:#x} wrid.hi 0x0 "
                  "wrid.lo 0x0")
        if ep.qp == QpState.RTS:
            ep.qp = QpState.TERMINATE
            self.tr("qp_state", "c4iw_modify_qp", conn=ep.conn, new="TERMINATE")
            layer_etype, ecode = fpdu_rx.build_term_codes(None)
            self._send(ep, frames.terminate(layer_etype, ecode, crc=ep.attr_crc),
                       f"post_terminate: Terminate layer_etype {layer_etype:#04x} ecode "
                       f"{ecode:#04x} (after {err.name})")
            self.c4iw_ep_disconnect(ep, False)
        self.tr("qp_event", "post_qp_event", conn=ep.conn, event=fpdu_rx.ib_event(err))

    def terminate(self, ep: Endpoint) -> None:
        """``terminate``: a Terminate arrived: QP to TERMINATE and an abortive close."""
        self.klog("warn", "terminate", f"TERM received tid {ep.conn} qpid {ep.conn}")
        ep.qp = QpState.TERMINATE
        self.c4iw_ep_disconnect(ep, True)

    # ---- closing -------------------------------------------------------------------------

    def _modify_qp_from_ulp(self, ep: Endpoint, target: QpState) -> None:
        """``c4iw_modify_qp`` with ``internal`` 0 and NEXT_STATE (iwcm_modify_qp_sqd/err)."""
        if ep.qp == QpState.RTS:
            ep.qp = target
            self.tr("qp_state", "c4iw_modify_qp", conn=ep.conn, new=target.name)
            self.c4iw_ep_disconnect(ep, target == QpState.ERROR)
        elif ep.qp == QpState.CLOSING and target == QpState.ERROR:
            ep.qp = QpState.ERROR
            self.tr("qp_state", "c4iw_modify_qp", conn=ep.conn, new="ERROR")
        else:
            state = "no QP" if ep.qp is None else f"QP in {ep.qp.name}"
            raise CmError(EINVAL, f"c4iw_modify_qp to {target.name}: {state}")

    def c4iw_ep_disconnect(self, ep: Endpoint, abrupt: bool) -> None:
        """``c4iw_ep_disconnect``: FIN (CLOSING/MORIBUND) or RST (ABORTING)."""
        fn = "c4iw_ep_disconnect"
        self.klog("debug", fn, f"ep#{ep.conn} state {STATE_TEXT[ep.state]}, abrupt "
                  f"{int(abrupt)}", debug=True)
        close = False
        old = ep.state
        if ep.state in (S.MPA_REQ_WAIT, S.MPA_REQ_SENT, S.MPA_REQ_RCVD, S.MPA_REP_SENT,
                        S.FPDU_MODE, S.CONNECTING):
            close = True
            if abrupt:
                self._set_state(ep, S.ABORTING, fn)
            else:
                # the model stops the MPA timer at accept (fw4_ack taken as immediate),
                # so the STOP_MPA_TIMER fix-up never applies; a running timer stays
                # (start_ep_timer's "already started" pr_err)
                self._set_state(ep, S.CLOSING, fn)
                self.start_ep_timer(ep)
            ep.close_sent = True
        elif ep.state == S.CLOSING:
            if not ep.close_sent:
                ep.close_sent = True
                close = True
                if abrupt:
                    self.stop_ep_timer(ep)
                    self._set_state(ep, S.ABORTING, fn)
                else:
                    self._set_state(ep, S.MORIBUND, fn)
        else:
            self.klog("debug", fn, f"ignoring disconnect ep#{ep.conn} state {int(ep.state)}",
                      debug=True)
        if not close:
            return
        if abrupt:
            self.send_abort(ep, old)
        else:
            self.send_halfclose(ep, old)

    def send_halfclose(self, ep: Endpoint, old: EpState) -> None:
        """``send_halfclose``: ``CPL_CLOSE_CON_REQ``, the FIN."""
        if ep.sock is None:
            return
        self.tcp.shutdown(ep.sock, self._now,
                          f"send_halfclose: {old.name} -> {ep.state.name} (FIN)")
        self._fin_sent.add(ep.sock)

    def send_abort(self, ep: Endpoint, old: EpState) -> None:
        """``send_abort``: ``CPL_ABORT_REQ``, the RST; ``CPL_ABORT_RPL_RSS`` follows."""
        if ep.sock is not None:
            self.tcp.abort(ep.sock, self._now,
                           f"send_abort: {old.name} -> {ep.state.name} (RST)")
            self._fin_sent.discard(ep.sock)
        self.abort_rpl(ep)

    def abort_rpl(self, ep: Endpoint) -> None:
        """``abort_rpl``: ABORTING -> DEAD, CLOSE -ECONNRESET, resources released."""
        if ep.state != S.ABORTING:
            self.klog("err", "abort_rpl", f"abort_rpl ep#{ep.conn} state {int(ep.state)}")
            return
        self._set_state(ep, S.DEAD, "abort_rpl")
        self.close_complete_upcall(ep, -ECONNRESET)
        self.release_ep_resources(ep)

    def close_con_rpl(self, ep: Endpoint) -> None:
        """``close_con_rpl``: our FIN acknowledged."""
        if ep.state == S.CLOSING:
            self._set_state(ep, S.MORIBUND, "close_con_rpl")
        elif ep.state == S.MORIBUND:
            self.stop_ep_timer(ep)
            if ep.has_cm_id and ep.qp is not None:
                ep.qp = self._qp_after_close(ep.qp)
            self.close_complete_upcall(ep, 0)
            self._set_state(ep, S.DEAD, "close_con_rpl")
            self.release_ep_resources(ep)

    @staticmethod
    def _qp_after_close(qp: QpState) -> QpState:
        """``c4iw_modify_qp(IDLE, internal)`` at the end of a close: CLOSING -> IDLE; from
        TERMINATE the internal move fails into ERROR (the ``err`` path)."""
        return QpState.ERROR if qp == QpState.TERMINATE else QpState.IDLE

    def peer_close(self, ep: Endpoint) -> None:
        """``peer_close``: the peer's FIN (``CPL_PEER_CLOSE``)."""
        fn = "peer_close"
        disconnect = True
        release = False
        st = ep.state
        if st == S.MPA_REQ_WAIT:
            self._set_state(ep, S.CLOSING, fn)
        elif st == S.MPA_REQ_SENT:
            self._set_state(ep, S.CLOSING, fn)
            self.connect_reply_upcall(ep, -ECONNRESET)
        elif st in (S.MPA_REQ_RCVD, S.MPA_REP_SENT):
            self._set_state(ep, S.CLOSING, fn)
        elif st == S.FPDU_MODE:
            self.start_ep_timer(ep)
            self._set_state(ep, S.CLOSING, fn)
            if ep.qp == QpState.RTS:
                ep.qp = QpState.CLOSING
            # c4iw_modify_qp(CLOSING) returns 0, or -EINVAL from another QP state; only
            # -ECONNRESET (rdma_fini woken by a peer abort) would skip the upcall
            self.peer_close_upcall(ep)
        elif st == S.CLOSING:
            self._set_state(ep, S.MORIBUND, fn)
            disconnect = False
        elif st == S.MORIBUND:
            self.stop_ep_timer(ep)
            if ep.has_cm_id and ep.qp is not None:
                ep.qp = self._qp_after_close(ep.qp)
            self.close_complete_upcall(ep, 0)
            self._set_state(ep, S.DEAD, fn)
            release = True
            disconnect = False
        else:  # ABORTING, DEAD
            disconnect = False
        if disconnect:
            self.c4iw_ep_disconnect(ep, False)
        if release:
            self.release_ep_resources(ep)

    def peer_abort(self, ep: Endpoint, status: int) -> None:
        """``peer_abort``: the peer's RST (``CPL_ABORT_REQ_RSS``)."""
        fn = "peer_abort"
        st = ep.state
        p = self.p
        if ep.sock is not None:
            self._fin_sent.discard(ep.sock)
        if st == S.MPA_REQ_WAIT:
            self.stop_ep_timer(ep)
        elif st == S.MPA_REQ_SENT:
            self.stop_ep_timer(ep)
            if status != CPL_ERR_CONN_RESET or p.mpa_rev == 1 or \
                    (p.mpa_rev == 2 and ep.tried_with_mpa_v1):
                self.connect_reply_upcall(ep, -ECONNRESET)
            else:
                self.klog("info", fn, f"{fn}: mpa_rev={p.mpa_rev}. Retrying with mpav1")
                ep.retry_with_mpa_v1 = True
        elif st in (S.MORIBUND, S.CLOSING, S.FPDU_MODE):
            self.stop_ep_timer(ep)
            if ep.has_cm_id and ep.qp is not None:
                ep.qp = QpState.ERROR
            self.peer_abort_upcall(ep)
        elif st == S.DEAD:
            self.klog("warn", fn, f"{fn} PEER_ABORT IN DEAD STATE!!!!")
            return
        if st == S.ABORTING:
            return
        self._set_state(ep, S.DEAD, fn)
        if ep.retry_with_mpa_v1:
            self.c4iw_reconnect(ep)
        else:
            self.release_ep_resources(ep)

    def c4iw_reconnect(self, ep: Endpoint) -> None:
        """``c4iw_reconnect``: a new TCP connection from the same local address and port
        (the cm_id's), CONNECTING; ``act_establish`` then sends a v1 request."""
        if ep.sock is not None:
            self._by_sock.pop(ep.sock, None)
        try:
            sock = self.tcp.connect(ep.local_ip, ep.remote_ip, ep.remote_port,
                                    ep.local_port, self._now)
        except OSError:
            self.connect_reply_upcall(ep, -ECONNRESET)
            self.release_ep_resources(ep)
            return
        ep.sock = sock
        self._by_sock[sock] = ep
        self._set_state(ep, S.CONNECTING, "c4iw_reconnect", logged=True)

    def release_ep_resources(self, ep: Endpoint) -> None:
        """``release_ep_resources``: the endpoint leaves the tables (a request the ULP
        still holds stays until it answers)."""
        if ep.sock is not None:
            self._by_sock.pop(ep.sock, None)
            self._fin_sent.discard(ep.sock)
        self.stop_ep_timer(ep)
        if not ep.held:
            self._eps.pop(ep.conn, None)
            self._unwatch(ep)

    def _release_if_dead(self, ep: Endpoint) -> None:
        if ep.state == S.DEAD and ep.sock not in self._by_sock:
            self._eps.pop(ep.conn, None)
            self._unwatch(ep)
