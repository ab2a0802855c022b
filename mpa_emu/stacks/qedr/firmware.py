"""The FastLinQ firmware's side of a connection: what the adapter does with the TCP
events and stream bytes of an offloaded connection, and the async events it raises for
qed_iwarp_async_event.

The driver never sees an MPA frame: the firmware reads the request or reply into
``in_pdata`` and reports the outcome as ``fw_return_code`` (qed_iwarp_connect_complete for
the passive side's request, qed_iwarp_mpa_reply_arrived / qed_iwarp_mpa_complete for the
rest). How the firmware checks a frame, how long it waits, which RTR it sends and how it
tears the TCP connection down are not in the source; the model's choices are listed in
docs/stacks/qedr.md and, where a setting could differ, are parameters
(:mod:`mpa_emu.stacks.qedr.params`). The checks it makes follow the return codes the
driver knows: a bad key or a PD_Length over the 512-byte ULP buffer is
IWARP_CONN_ERROR_MPA_INVALID_PACKET, a revision above 2 MPA_NOT_SUPPORTED_VER, the R bit
MPA_ERROR_REJECT, a reply whose RTR shares no type with the request MPA_RTR_MISMATCH, a
reply IRD below the request's ORD MPA_INSUF_IRD, a RST MPA_RST, a FIN MPA_FIN, the timer
MPA_TIMEOUT.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from errno import ETIMEDOUT
from typing import Any

from mpa_emu.stacks.contract.api import NodeWatch
from mpa_emu.stacks.contract.events import Upcall
from mpa_emu.stacks.contract.trace import Trace, make_record
from mpa_emu.stacks.qedr import frames
from mpa_emu.stacks.qedr.endpoint import Ep, Listener
from mpa_emu.stacks.qedr.params import QED_MAX_PRIV_DATA_LEN, RTR_ORDERS, QedrParams
from mpa_emu.stacks.qedr.states import (
    EXCEPTION_LLP_CLOSED,
    EXCEPTION_LLP_RESET,
    EXCEPTION_TERMINATE_RECEIVED,
    MPA_ERROR_REJECT,
    MPA_FIN,
    MPA_INSUF_IRD,
    MPA_INVALID_PACKET,
    MPA_NOT_SUPPORTED_VER,
    MPA_RST,
    MPA_RTR_MISMATCH,
    MPA_TIMEOUT,
    MPA_V2_IRD_ORD_MASK,
    MPA_V2_PEER2PEER_MODEL,
    MPA_V2_READ_RTR,
    MPA_V2_SEND_RTR,
    MPA_V2_WRITE_RTR,
    QP_IN_ERROR_BAD_CLOSE,
    QP_IN_ERROR_GOOD_CLOSE,
    RDMA_RETURN_OK,
    RTR_NAMES,
    TCP_CONNECT_TIMEOUT,
    TCP_CONNECTION_RST,
    ConnectMode,
    EpState,
    MpaMode,
    QpState,
    RtrType,
)
from mpa_emu.stacks.qedr.tcp import QedTcp
from mpa_emu.stacks.tcp.stack import TcpEvent
from mpa_emu.wire import ddp, mpa, untagged

SECOND = 1_000_000_000
_DONE_STATES = frozenset({"TIME_WAIT", "CLOSED"})


def rtr_bits(ird_word: int, ord_word: int) -> RtrType:
    """The RTR types an RFC 6581 block offers (qed_iwarp_mpa_received's reading)."""
    out = RtrType.NONE
    if ird_word & MPA_V2_PEER2PEER_MODEL:
        if ord_word & MPA_V2_WRITE_RTR:
            out |= RtrType.ZERO_WRITE
        if ord_word & MPA_V2_READ_RTR:
            out |= RtrType.ZERO_READ
        if ird_word & MPA_V2_SEND_RTR:
            out |= RtrType.ZERO_SEND
    return out


class Firmware:
    """The adapter under qed: its TCP (:class:`QedTcp`), its MPA engine and the async
    events it raises. Subclassed by the qed layer (:mod:`mpa_emu.stacks.qedr.qed_iwarp`),
    which defines the handlers the events reach."""

    name: str
    p: QedrParams
    trace: Trace | None
    tcp: QedTcp
    _eps: dict[int, Ep]
    _by_sock: dict[int, Ep]
    _listeners: dict[int, Listener]
    _by_tcp_listener: dict[int, Listener]
    _upcalls: deque[Upcall]
    _work: deque[Callable[[], None]]
    _now: int
    _watch: NodeWatch | None
    _watched: set[int]

    # ---- implemented by the qed layer ------------------------------------------------

    def qed_iwarp_connect_complete(self, ep: Ep, fw_return_code: str) -> None:
        """IWARP_EVENT_TYPE_ASYNC_CONNECT_COMPLETE (qed_iwarp.py)."""
        raise NotImplementedError

    def qed_iwarp_mpa_reply_arrived(self, ep: Ep) -> None:
        """IWARP_EVENT_TYPE_ASYNC_ENHANCED_MPA_REPLY_ARRIVED (qed_iwarp.py)."""
        raise NotImplementedError

    def qed_iwarp_mpa_complete(self, ep: Ep, fw_return_code: str) -> None:
        """IWARP_EVENT_TYPE_ASYNC_MPA_HANDSHAKE_COMPLETE (qed_iwarp.py)."""
        raise NotImplementedError

    def qed_iwarp_exception_received(self, ep: Ep, fw_ret_code: str) -> None:
        """IWARP_EVENT_TYPE_ASYNC_EXCEPTION_DETECTED (qed_iwarp.py)."""
        raise NotImplementedError

    def qed_iwarp_qp_in_error(self, ep: Ep, fw_return_code: str) -> None:
        """IWARP_EVENT_TYPE_ASYNC_QP_IN_ERROR_STATE (qed_iwarp.py)."""
        raise NotImplementedError

    def qed_iwarp_ll2_comp_syn_pkt(self, sock: int, tcp_listener: int | None) -> None:
        """A passive connection the firmware took (qed_iwarp.py)."""
        raise NotImplementedError

    # ---- trace -------------------------------------------------------------------------

    def tr(self, kind: str, fn: str, **fields: Any) -> None:
        """One trace record at the current time."""
        if self.trace is not None:
            self.trace.emit(make_record(self._now, self.name, kind, fn, fields))

    def klog(self, level: str, fn: str, text: str, *, debug: bool = False) -> None:
        """A line the driver writes to the kernel log (DP_NOTICE/DP_ERR: ``notice``,
        ``err``; ``debug`` for DP_VERBOSE/DP_DEBUG, seen only with the debug module
        parameter set)."""
        self.tr("kernel_log", fn, level=level, text=text, dynamic_debug=debug)

    def _set_state(self, ep: Ep, new: EpState, fn: str) -> None:
        """The one place an endpoint's ``ep->state`` changes."""
        old = ep.state
        ep.state = new
        self.tr("state_changed", fn, conn=ep.conn, old=old.name, new=new.name)
        watch = self._watch
        if watch is not None and old != new:
            if ep.conn not in self._watched:
                self._watched.add(ep.conn)
                watch.node_created(ep.conn, ep.local_port, ep.remote_ip, ep.remote_port)
            watch.state_changed(ep.conn, new)

    def _send(self, ep: Ep, data: bytes, comment: str) -> None:
        if ep.sock is not None:
            self.tcp.send(ep.sock, data, self._now, comment)

    # ---- timers ------------------------------------------------------------------------

    def fw_start_timer(self, ep: Ep, wait: str) -> None:
        """The firmware's MPA timer: ``fw_mpa_timeout_secs`` for ``wait``."""
        ep.fw_wait = wait
        ep.fw_due = self._now + self.p.fw_mpa_timeout_secs * SECOND

    def fw_stop_timer(self, ep: Ep) -> None:
        """The awaited frame came (or the connection went)."""
        ep.fw_wait = ""
        ep.fw_due = None

    def fw_timeout(self, ep: Ep) -> None:
        """IWARP_CONN_ERROR_MPA_TIMEOUT: the awaited MPA frame or RTR never came; the
        firmware aborts the connection (RST) and reports it."""
        wait = ep.fw_wait
        self.fw_stop_timer(ep)
        self.tr("timer_fired", "firmware MPA timer", conn=ep.conn, waiting_for=wait)
        self.fw_abort(ep, f"firmware: MPA timeout waiting for the {wait} (RST)")
        if wait == "request":
            self.qed_iwarp_connect_complete(ep, MPA_TIMEOUT)
        else:
            self.qed_iwarp_mpa_complete(ep, MPA_TIMEOUT)

    # ---- the TCP connection ------------------------------------------------------------

    def fw_abort(self, ep: Ep, comment: str) -> None:
        """The firmware resets the connection."""
        if ep.sock is not None:
            self.tcp.abort(ep.sock, self._now, comment)

    def fw_close(self, ep: Ep, comment: str) -> None:
        """The firmware closes the connection gracefully (a FIN)."""
        if ep.sock is not None and not ep.closing:
            ep.closing = True
            self.tcp.shutdown(ep.sock, self._now, comment)

    def fw_tcp_event(self, ev: TcpEvent) -> None:
        """One event of the firmware's TCP for the connection it belongs to."""
        if ev.kind == "accepted":
            self.qed_iwarp_ll2_comp_syn_pkt(ev.sock, ev.listener)
            return
        ep = self._by_sock.get(ev.sock)
        if ep is None:
            return
        if ev.kind == "connected":
            self.tr("fw_event", "IWARP_EVENT_TYPE_ASYNC_CONNECT_COMPLETE", conn=ep.conn,
                    fw_return_code=RDMA_RETURN_OK)
            self.qed_iwarp_connect_complete(ep, RDMA_RETURN_OK)
        elif ev.kind == "failed" and ep.state == EpState.INIT \
                and ep.connect_mode == ConnectMode.ACTIVE:
            code = TCP_CONNECT_TIMEOUT if ev.errno == ETIMEDOUT else TCP_CONNECTION_RST
            self.qed_iwarp_connect_complete(ep, code)
        elif ev.kind == "data":
            self.fw_rx(ep, ev.data)
        elif ev.kind == "peer_fin":
            self.fw_peer_fin(ep)
        elif ev.kind in ("reset", "failed"):
            self.fw_reset(ep)
        elif ev.kind == "closed":
            self.fw_check_closed(ep)

    def fw_check_closed(self, ep: Ep) -> None:
        """IWARP_EVENT_TYPE_ASYNC_QP_IN_ERROR_STATE with IWARP_QP_IN_ERROR_GOOD_CLOSE once
        a graceful close is done both ways (our FIN acknowledged, the peer's taken)."""
        if not ep.closing or ep.qp is None or ep.state == EpState.CLOSED:
            return
        state = None if ep.sock is None else self.tcp.state(ep.sock)
        if state is None or state in _DONE_STATES:
            self.qed_iwarp_qp_in_error(ep, QP_IN_ERROR_GOOD_CLOSE)

    def fw_peer_fin(self, ep: Ep) -> None:
        """The peer's FIN."""
        ep.fin_from_peer = True
        wait = ep.fw_wait
        if wait:
            self.fw_stop_timer(ep)
            self.fw_close(ep, f"firmware: FIN while waiting for the MPA {wait}")
            if wait == "request":
                self.qed_iwarp_connect_complete(ep, MPA_FIN)
            else:
                self.qed_iwarp_mpa_complete(ep, MPA_FIN)
        elif ep.state == EpState.ESTABLISHED and ep.closing:
            # our close (IWARP_MODIFY_QP_STATE_CLOSING) completes: no exception for it
            self.fw_check_closed(ep)
        elif ep.state == EpState.ESTABLISHED:
            self.tr("fw_event", "IWARP_EVENT_TYPE_ASYNC_EXCEPTION_DETECTED", conn=ep.conn,
                    fw_return_code=EXCEPTION_LLP_CLOSED)
            self.qed_iwarp_exception_received(ep, EXCEPTION_LLP_CLOSED)
        else:
            self.tr("segment_dropped", "firmware", conn=ep.conn,
                    reason=f"FIN in {ep.state.name}: kept until the ULP answers")

    def fw_reset(self, ep: Ep) -> None:
        """The peer's RST (or the firmware gave up retransmitting)."""
        if ep.sock is not None:
            self._by_sock.pop(ep.sock, None)
        ep.sock = None
        wait = ep.fw_wait
        if wait:
            self.fw_stop_timer(ep)
            if wait == "request":
                self.qed_iwarp_connect_complete(ep, MPA_RST)
            else:
                self.qed_iwarp_mpa_complete(ep, MPA_RST)
        elif ep.state == EpState.ESTABLISHED:
            self.tr("fw_event", "IWARP_EVENT_TYPE_ASYNC_EXCEPTION_DETECTED", conn=ep.conn,
                    fw_return_code=EXCEPTION_LLP_RESET)
            self.qed_iwarp_exception_received(ep, EXCEPTION_LLP_RESET)
        elif ep.state == EpState.MPA_REQ_RCVD:
            ep.fin_from_peer = True
            self.tr("segment_dropped", "firmware", conn=ep.conn,
                    reason="RST while the ULP holds the request: kept until it answers")

    # ---- stream bytes --------------------------------------------------------------------

    def fw_rx(self, ep: Ep, data: bytes) -> None:
        """Stream bytes of an offloaded connection."""
        ep.rx += data
        if ep.fw_wait == "request":
            self.fw_mpa_request(ep)
        elif ep.fw_wait == "reply":
            self.fw_mpa_reply(ep)
        elif ep.fw_wait == "rtr" or ep.qp == QpState.RTS:
            self.fw_rdma_rx(ep)
        else:
            self.tr("segment_dropped", "firmware", conn=ep.conn, state=ep.state.name,
                    reason=f"{len(data)} stream bytes not looked at in {ep.state.name}",
                    len=len(data))
            ep.rx.clear()

    def _frame(self, ep: Ep, key: bytes) -> tuple[mpa.MpaHeader, bytes] | str | None:
        """The whole MPA frame at the head of ``ep.rx``: (header, PD), a return code for a
        frame the firmware refuses, or None while bytes are missing."""
        if len(ep.rx) < mpa.FRAME_SIZE:
            return None
        head = mpa.parse_header(bytes(ep.rx[:mpa.FRAME_SIZE]))
        if head.key != key:
            return MPA_INVALID_PACKET
        if head.rev > 2:
            return MPA_NOT_SUPPORTED_VER
        if head.rev == 0 or head.pd_length > QED_MAX_PRIV_DATA_LEN:
            return MPA_INVALID_PACKET
        end = mpa.FRAME_SIZE + head.pd_length
        if len(ep.rx) < end:
            return None
        pd = bytes(ep.rx[mpa.FRAME_SIZE:end])
        del ep.rx[:end]
        if head.rev == 2 and head.flags & mpa.FLAG_ENHANCED and len(pd) < mpa.RTR_MSG_SIZE:
            return MPA_INVALID_PACKET
        ep.in_pdata[:len(pd)] = pd
        ep.ulp_data_len = len(pd)
        return head, pd

    def fw_mpa_request(self, ep: Ep) -> None:
        """The passive side's firmware reads the MPA request into ``in_pdata`` and reports
        it with IWARP_EVENT_TYPE_ASYNC_CONNECT_COMPLETE (``mpa_handshake_mode``,
        ``ulp_data_len``)."""
        got = self._frame(ep, mpa.KEY_REQ)
        if got is None:
            return
        self.fw_stop_timer(ep)
        if isinstance(got, str):
            self.tr("mpa_error", "firmware", conn=ep.conn, fw_return_code=got)
            self.fw_abort(ep, f"firmware: MPA request refused ({got}) (RST)")
            self.qed_iwarp_connect_complete(ep, got)
            return
        head, _pd = got
        enhanced = head.rev == 2 and bool(head.flags & mpa.FLAG_ENHANCED)
        ep.mpa_rev = MpaMode.ENHANCED if enhanced else MpaMode.BASIC
        # RFC 5044 section 7.1: CRC is used when either side sets C.
        ep.crc = bool(head.flags & mpa.FLAG_CRC) or self.p.crc_needed
        self.tr("fw_event", "IWARP_EVENT_TYPE_ASYNC_CONNECT_COMPLETE", conn=ep.conn,
                fw_return_code=RDMA_RETURN_OK, mpa_handshake_mode=ep.mpa_rev.name,
                ulp_data_len=ep.ulp_data_len)
        self.qed_iwarp_connect_complete(ep, RDMA_RETURN_OK)

    def fw_mpa_reply(self, ep: Ep) -> None:
        """The active side's firmware reads the reply (or reject): an enhanced reply is
        IWARP_EVENT_TYPE_ASYNC_ENHANCED_MPA_REPLY_ARRIVED (qed asks for the RTR, then the
        handshake completes), a basic one completes the handshake at once, a refused one
        completes it with its return code."""
        got = self._frame(ep, mpa.KEY_REP)
        if got is None:
            return
        self.fw_stop_timer(ep)
        if isinstance(got, str):
            self.tr("mpa_error", "firmware", conn=ep.conn, fw_return_code=got)
            self.fw_abort(ep, f"firmware: MPA reply refused ({got}) (RST)")
            self.qed_iwarp_mpa_complete(ep, got)
            return
        head, pd = got
        if head.flags & mpa.FLAG_REJECT:
            self.fw_close(ep, "firmware: MPA reject received (FIN)")
            self.qed_iwarp_mpa_complete(ep, MPA_ERROR_REJECT)
            return
        ep.crc = bool(head.flags & mpa.FLAG_CRC) or self.p.crc_needed
        enhanced = head.rev == 2 and bool(head.flags & mpa.FLAG_ENHANCED)
        if not enhanced:
            ep.fw_rtr = ""
            self.qed_iwarp_mpa_complete(ep, RDMA_RETURN_OK)
            return
        ird_word = int.from_bytes(pd[0:2], "big")
        ord_word = int.from_bytes(pd[2:4], "big")
        error = self.fw_check_reply(ep, ird_word, ord_word)
        if error is not None:
            self.tr("mpa_error", "firmware", conn=ep.conn, fw_return_code=error)
            self.fw_abort(ep, f"firmware: MPA reply refused ({error}) (RST)")
            self.qed_iwarp_mpa_complete(ep, error)
            return
        self.tr("fw_event", "IWARP_EVENT_TYPE_ASYNC_ENHANCED_MPA_REPLY_ARRIVED",
                conn=ep.conn, ulp_data_len=ep.ulp_data_len)
        self.qed_iwarp_mpa_reply_arrived(ep)

    def fw_check_reply(self, ep: Ep, ird_word: int, ord_word: int) -> str | None:
        """An enhanced reply's block against the request: the RTR the firmware will send
        (``fw_rtr_order`` among the types both offered), or the return code refusing it."""
        offered = rtr_bits(ird_word, ord_word)
        ep.fw_rtr = ""
        if ird_word & MPA_V2_PEER2PEER_MODEL and ep.rtr_type != RtrType.NONE:
            common = RtrType(int(offered) & int(ep.rtr_type))
            if not common:
                return MPA_RTR_MISMATCH
            for kind in RTR_ORDERS[self.p.fw_rtr_order]:
                bit = next(b for b, n in RTR_NAMES.items() if n == kind)
                if common & bit:
                    ep.fw_rtr = kind
                    break
        if (ird_word & MPA_V2_IRD_ORD_MASK) < ep.ord:
            return MPA_INSUF_IRD
        return None

    def fw_send_rtr(self, ep: Ep) -> None:
        """IWARP_RAMROD_CMD_ID_MPA_OFFLOAD_SEND_RTR: the RTR goes out, and the handshake
        completes."""
        if ep.fw_rtr:
            if ep.fw_rtr == "send":
                ep.tx_msn = 1  # the zero-length Send RTR is the first message on QN 0
            self._send(ep, frames.rtr(ep.fw_rtr, crc=ep.crc),
                       f"qed_iwarp_send_rtr: firmware RTR, zero-length {ep.fw_rtr}")
        self.qed_iwarp_mpa_complete(ep, RDMA_RETURN_OK)

    def fw_send_mpa(self, ep: Ep, *, reject: bool, again: bool = False) -> None:
        """IWARP_RAMROD_CMD_ID_MPA_OFFLOAD: the request (active), reply or reject
        (passive) with ``out_pdata``, and what the firmware waits for next.

        ``again``: a second ramrod for a connection whose handshake the first one (the
        accept's reply) already runs: qed_iwarp_reject posts it when the application
        rejects after accepting (iw_cm_reject lets it through while its id is in
        CONN_RECV). What the firmware does with it is not in qed; the model has the
        firmware ignore it (nothing on the wire) and carry on with the handshake."""
        if again:
            self.tr("fw_ramrod_ignored", "firmware", conn=ep.conn,
                    reason="a second MPA offload ramrod (a reject after the accept): the "
                           "handshake the first one started goes on")
            return
        request = ep.connect_mode == ConnectMode.ACTIVE
        if ep.sock is None:  # the peer reset the connection while the ULP held it
            self.qed_iwarp_mpa_complete(ep, MPA_RST)
            return
        data = frames.frame(request=request, mode=ep.mpa_rev, crc=self.p.crc_needed,
                            reject=reject, ulp=ep.out_pdata)
        what = "request" if request else "reject" if reject else "reply"
        self._send(ep, data, f"qed_iwarp_mpa_offload: firmware MPA v{data[17]} {what}, "
                             f"{len(ep.out_pdata)} bytes of ULP data")
        if request:
            self.fw_start_timer(ep, "reply")
        elif reject:
            self.fw_close(ep, "firmware: after the MPA reject (FIN)")
            self.qed_iwarp_mpa_complete(ep, MPA_ERROR_REJECT)
        elif ep.fin_from_peer:
            self.fw_close(ep, "firmware: the peer closed while the ULP held the request")
            self.qed_iwarp_mpa_complete(ep, MPA_FIN)
        elif ep.mpa_rev == MpaMode.ENHANCED and ep.rtr_type != RtrType.NONE \
                and self.p.fw_passive_waits_rtr:
            self.fw_start_timer(ep, "rtr")
            if ep.rx:  # an RTR that came with (or right after) the request
                self.fw_rdma_rx(ep)
        else:
            self.qed_iwarp_mpa_complete(ep, RDMA_RETURN_OK)

    # ---- RDMA mode ---------------------------------------------------------------------

    def fw_rdma_rx(self, ep: Ep) -> None:
        """Whole FPDUs in order: the first one on a responder waiting for the RTR
        completes the handshake; a zero-length Read Request gets its Read Response; a
        Terminate is IWARP_EXCEPTION_DETECTED_TERMINATE_RECEIVED."""
        while len(ep.rx) >= 2:
            try:
                fpdu = mpa.unframe_fpdu(bytes(ep.rx))
            except mpa.MpaFormatError:
                return
            del ep.rx[:fpdu.wire_length]
            raw = fpdu.ulpdu
            opcode = raw[1] & ddp.RDMAP_OPCODE_MASK if len(raw) >= 2 else -1
            name = ddp.OPCODE_NAMES.get(opcode, str(opcode))
            ep.received.append(name)
            self.tr("fpdu_received", "firmware RDMA", conn=ep.conn, opcode=name,
                    len=len(raw), crc_ok=fpdu.crc_ok)
            was_rtr = ep.fw_wait == "rtr"
            if was_rtr:
                self.fw_stop_timer(ep)
                self.qed_iwarp_mpa_complete(ep, RDMA_RETURN_OK)
            if opcode in untagged.SEND_OPCODES:
                self.fw_place_send(ep, raw, fpdu.crc_ok, rtr=was_rtr)
                continue
            if opcode == ddp.Opcode.TERMINATE:
                self.qed_iwarp_exception_received(ep, EXCEPTION_TERMINATE_RECEIVED)
                continue
            if opcode == ddp.Opcode.READ_REQUEST:
                try:
                    seg = ddp.parse_segment(raw)
                except ddp.DdpFormatError:
                    continue
                rr = seg.read_request
                if rr is not None and rr.size == 0:
                    self._send(ep, frames.read_response(rr.sink_stag, rr.sink_to,
                                                        crc=ep.crc),
                               "firmware: RDMA Read Response (zero-length, answers the "
                               "Read Request)")

    def fw_place_send(self, ep: Ep, raw: bytes, crc_ok: bool, *, rtr: bool) -> None:
        """A Send segment in RDMA mode, placed as RFC 5041 section 5.3 places an untagged
        segment (:class:`mpa_emu.wire.untagged.SendReceiver`): a new message takes the
        oldest receive buffer qedr_post_recv posted, the message completes with its last
        segment (a receive completion of status SUCCESS). A zero-length Send RTR that
        completed the handshake only moves the MSN on (RFC 6581 section 5: it carries no
        data and the model posts no buffer for it). With CRCs negotiated, a segment whose
        CRC32c is bad is not placed (RFC 5044 section 8). What the firmware does with a
        segment it cannot place (no buffer, too long, a wrong MSN or MO) qed does not
        show: it is traced and dropped (docs/stacks/qedr.md)."""
        if ep.qp != QpState.RTS:
            self.tr("segment_dropped", "firmware RDMA", conn=ep.conn,
                    reason=f"Send segment with the QP in {ep.qp.name if ep.qp else 'none'}")
            return
        if ep.crc and not crc_ok:
            self.tr("fpdu_not_placed", "firmware RDMA", conn=ep.conn,
                    reason="MPA CRC error (RFC 5044 section 8): not modelled past the drop")
            return
        try:
            seg = ddp.parse_segment(raw)
        except ddp.DdpFormatError as exc:
            self.tr("fpdu_not_placed", "firmware RDMA", conn=ep.conn, reason=str(exc))
            return
        head = seg.header
        assert isinstance(head, ddp.UntaggedHeader)
        if rtr and not seg.payload and head.msn == ep.rq.msn and ep.rq.partial is None:
            ep.rq.msn += 1
            return
        got = ep.rq.place(head, seg.payload)
        if got.error:
            self.tr("fpdu_not_placed", "firmware RDMA", conn=ep.conn,
                    reason=f"RFC 5041 section 7.2: {got.reason}", ecode=got.error,
                    msn=head.msn, mo=head.mo, len=len(seg.payload))
            return
        if got.message is not None:
            ep.completions.append(("SUCCESS", got.message))
            self.tr("recv_completion", "firmware RDMA", conn=ep.conn, status="SUCCESS",
                    bytes=len(got.message))

    def fw_post_send(self, ep: Ep, payload: bytes) -> None:
        """The firmware sends a Send the SQ holds (qedr_post_send rings the doorbell):
        the next MSN on queue 0, one FPDU per TCP segment of the connection's MSS, CRC32c
        as negotiated (``crc_needed``), no markers (RFC 5044 section 4.1, RFC 5041
        section 4.4)."""
        if ep.sock is None:
            return
        ep.tx_msn += 1
        room = untagged.send_room(self.tcp.mss(ep.sock))
        segments = untagged.send_segments(payload, ep.tx_msn, room)
        for index, ulpdu in enumerate(segments):
            self._send(ep, mpa.frame_fpdu(ulpdu, crc=None if ep.crc else 0),
                       f"firmware: RDMA Send MSN {ep.tx_msn} (FPDU {index + 1} of "
                       f"{len(segments)})")

    # ---- the close ramrods ---------------------------------------------------------------

    def fw_modify_qp(self, ep: Ep, closing: bool) -> None:
        """qed_iwarp_modify_fw: IWARP_MODIFY_QP_STATE_CLOSING is a graceful close (FIN),
        IWARP_MODIFY_QP_STATE_ERROR an abortive one (RST, then the QP in error with
        IWARP_QP_IN_ERROR_BAD_CLOSE)."""
        if ep.state != EpState.ESTABLISHED:
            return
        if closing:
            self.fw_close(ep, "qed_iwarp_modify_fw: IWARP_MODIFY_QP_STATE_CLOSING (FIN)")
            self.fw_check_closed(ep)
            return
        self.fw_abort(ep, "qed_iwarp_modify_fw: IWARP_MODIFY_QP_STATE_ERROR (RST)")
        if ep.sock is not None:
            self._by_sock.pop(ep.sock, None)
        ep.sock = None
        self.qed_iwarp_qp_in_error(ep, QP_IN_ERROR_BAD_CLOSE)


