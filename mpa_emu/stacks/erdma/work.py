"""erdma's socket callbacks and work queue: erdma_cm_llp_state_change and
erdma_cm_llp_data_ready (the TCP stack's events), erdma_cm_work_handler with its
release_cep, erdma_accept_newconn, and the QP side of a drop (erdma_qp_cm_drop,
erdma_qp_llp_close)."""

from __future__ import annotations

import errno
from errno import ECONNRESET, EINVAL

from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.erdma.cep import Cep
from mpa_emu.stacks.erdma.mpa import ErdmaMpa
from mpa_emu.stacks.erdma.states import ErdmaQpState, ErdmaState, ErdmaWork
from mpa_emu.stacks.tcp import TcpEvent
from mpa_emu.wire import ddp, mpa, untagged

S = ErdmaState
Q = ErdmaQpState


class ErdmaWorkQueue(ErdmaMpa):
    """The event side of an erdma host (see the module docstring)."""

    def _drain(self) -> None:
        while (ev := self.tcp.next_event()) is not None:
            self._socket_event(ev)

    def _run_work(self) -> None:
        """erdma_cm_wq: the queued work, in order."""
        while self._workq:
            ident, work = self._workq.popleft()
            if work == ErdmaWork.ACCEPT:
                self._accept_work(ident)
                continue
            cep = self._ceps.get(ident)
            if cep is not None:
                self._work(cep, work)
            self._drain()

    def _socket_event(self, ev: TcpEvent) -> None:
        """erdma_cm_llp_state_change and erdma_cm_llp_data_ready for one socket event."""
        if ev.kind == "accepted":
            # the child has the listener's sk_user_data: TCP_ESTABLISHED on a cep that
            # is not CONNECTING queues ERDMA_CM_WORK_ACCEPT on the listening cep
            lcep = self._listen_by_tcp.get(ev.listener) if ev.listener is not None else None
            if lcep is None:
                self.tcp.abort(ev.sock, self._now)
                return
            self._unclaimed[ev.sock] = (lcep.ident, bytearray())
            self._workq.append((ev.sock, ErdmaWork.ACCEPT))
            return
        if ev.sock in self._unclaimed:
            # still the listener's callbacks: erdma_cm_llp_data_ready sees a LISTENING
            # cep and queues nothing, TCP_CLOSE_WAIT on a LISTENING cep queues nothing
            if ev.kind == "data":
                self._unclaimed[ev.sock][1].extend(ev.data)
            return
        cep = self._by_sock.get(ev.sock)
        if cep is None:
            return
        if ev.kind == "connected":
            # TCP_ESTABLISHED in CONNECTING: ERDMA_CM_WORK_CONNECTED
            if cep.state == S.CONNECTING:
                self._queue_work(cep, ErdmaWork.CONNECTED)
        elif ev.kind == "data":
            self._data_ready(cep, ev.data)
        elif ev.kind in ("peer_fin", "reset", "failed"):
            # TCP_CLOSE_WAIT / TCP_CLOSE on a cep not LISTENING: ERDMA_CM_WORK_PEER_CLOSE
            if ev.kind in ("reset", "failed"):
                self._by_sock.pop(ev.sock, None)
                cep.sock = None
            self._queue_work(cep, ErdmaWork.PEER_CLOSE)

    def _data_ready(self, cep: Cep, data: bytes) -> None:
        """erdma_cm_llp_data_ready: READ_MPAHDR work in AWAIT_MPAREQ or AWAIT_MPAREP;
        nothing in any other state. In RDMA_MODE the device carries the stream (from
        erdma_modify_qp_state_to_rts on): what arrives is the device's, not the kernel
        socket's."""
        if cep.state == S.RDMA_MODE:
            self._device_rx(cep, data)
            return
        cep.rx += data
        if cep.state in (S.AWAIT_MPAREQ, S.AWAIT_MPAREP):
            self._queue_work(cep, ErdmaWork.READ_MPAHDR)

    def _device_rx(self, cep: Cep, data: bytes) -> None:
        """The device's receive side once erdma_modify_qp_state_to_rts handed it the
        connection (its ``recv_nxt``): whole FPDUs in order, RFC 5044 section 4.1 framing
        with no CRC check (erdma_proc_mpareq and erdma_proc_mpareply refuse C, so CRC is
        never negotiated; RFC 5044 section 7.1), and each Send segment placed in the
        receive buffers erdma_post_recv posted (RFC 5041 section 5.3,
        :class:`mpa_emu.wire.untagged.SendReceiver`). The driver shows nothing of what the
        device does with other FPDUs or with a Send it cannot place: they are traced and
        dropped (docs/stacks/erdma.md)."""
        self._note("device_rx", "erdma_modify_qp_state_to_rts", conn=cep.ident,
                   bytes=len(data))
        cep.device_rx += data
        while len(cep.device_rx) >= 2:
            try:
                fpdu = mpa.unframe_fpdu(bytes(cep.device_rx))
            except mpa.MpaFormatError:
                return  # the rest of the FPDU is due
            del cep.device_rx[:fpdu.wire_length]
            raw = fpdu.ulpdu
            opcode = raw[1] & ddp.RDMAP_OPCODE_MASK if len(raw) >= 2 else -1
            if opcode not in untagged.SEND_OPCODES or cep.qp_state != Q.RTS:
                self._note("fpdu_not_placed", "erdma device", conn=cep.ident,
                           opcode=ddp.OPCODE_NAMES.get(opcode, str(opcode)),
                           qp_state=cep.qp_state.name,
                           reason="only Sends on an RTS QP are modelled")
                continue
            try:
                seg = ddp.parse_segment(raw)
            except ddp.DdpFormatError as exc:
                self._note("fpdu_not_placed", "erdma device", conn=cep.ident,
                           reason=str(exc))
                continue
            head = seg.header
            assert isinstance(head, ddp.UntaggedHeader)
            got = cep.rq.place(head, seg.payload)
            if got.error:
                self._note("fpdu_not_placed", "erdma device", conn=cep.ident,
                           reason=f"RFC 5041 section 7.2: {got.reason}", ecode=got.error,
                           msn=head.msn, mo=head.mo, len=len(seg.payload))
            elif got.message is not None:
                cep.completions.append(("SUCCESS", got.message))
                self._note("recv_completion", "erdma device", conn=cep.ident,
                           status="SUCCESS", bytes=len(got.message))

    def _accept_work(self, sock: int) -> None:
        """ERDMA_CM_WORK_ACCEPT: erdma_accept_newconn for the listener that queued it."""
        lident, queued = self._unclaimed.pop(sock, (0, bytearray()))
        lcep = self._ceps.get(lident)
        if lcep is None or lcep.state != S.LISTENING or self.tcp.state(sock) is None:
            self.tcp.abort(sock, self._now)  # erdma_accept_newconn's error path
            return
        self._accept_newconn(lcep, sock, queued)
        self._drain()

    def _accept_newconn(self, lcep: Cep, sock: int, queued: bytearray) -> None:
        """erdma_accept_newconn: kernel_accept, a new endpoint in AWAIT_MPAREQ with the
        MPA timer (MPAREQ_TIMEOUT, 20 s); a request already queued (sk_rmem_alloc) is
        processed at once, and its failure is the error path (CLOSED, socket released)."""
        cep = self._new_cep()
        cep.sock = sock
        self._by_sock[sock] = cep
        addrs = self.tcp.addresses(sock)
        assert addrs is not None
        cep.loc_addr, cep.loc_port, cep.rem_addr, cep.rem_port = addrs
        self._set(cep, S.AWAIT_MPAREQ, "erdma_accept_newconn")
        self._queue_work(cep, ErdmaWork.MPATIMEOUT)
        cep.listen_cep = lcep.ident
        if queued:
            cep.rx += queued
            rv = self._proc_mpareq(cep)
            if rv != -errno.EAGAIN:
                cep.listen_cep = None
                if rv:
                    cep.mpa_timer = None  # erdma_cancel_mpatimer
                    self._set(cep, S.CLOSED, "erdma_accept_newconn")
                    self._release_socket(cep, "erdma_accept_newconn (error)")
                    self._forget(cep)

    def _work(self, cep: Cep, work: ErdmaWork) -> None:
        """erdma_cm_work_handler for one work item, then release_cep."""
        if cep.ident not in self._ceps:
            return
        self._note("erdma_work", "erdma_cm_work_handler", conn=cep.ident, work=work.name,
                   state=cep.state.name)
        release = False
        if work == ErdmaWork.CONNECTED:
            cep.mpa_timer = None  # erdma_cancel_mpatimer: the CONNECTTIMEOUT
            if cep.state == S.CONNECTING:
                self._newconn_connected(cep)
        elif work == ErdmaWork.CONNECTTIMEOUT:
            if cep.state == S.CONNECTING:
                self._upcall(cep, IwEvent.CONNECT_REPLY, -errno.ETIMEDOUT)
                release = True
        elif work == ErdmaWork.READ_MPAHDR:
            rv = 0
            if cep.state == S.AWAIT_MPAREQ:
                if cep.listen_cep is not None:
                    lcep = self._ceps.get(cep.listen_cep)
                    rv = self._proc_mpareq(cep) if lcep is not None and \
                        lcep.state == S.LISTENING else -errno.EFAULT
                    if rv != -errno.EAGAIN:
                        cep.listen_cep = None
            elif cep.state == S.AWAIT_MPAREP:
                rv = self._proc_mpareply(cep)
            release = rv != 0 and rv != -errno.EAGAIN
        elif work == ErdmaWork.CLOSE_LLP:
            if cep.cm_id:
                self._upcall(cep, IwEvent.CLOSE, 0)
            release = True
        elif work == ErdmaWork.PEER_CLOSE:
            if cep.cm_id:
                if cep.state in (S.CONNECTING, S.AWAIT_MPAREP):
                    # "MPA reply not received, but connection drop"
                    self._upcall(cep, IwEvent.CONNECT_REPLY, -ECONNRESET)
                elif cep.state == S.RDMA_MODE:
                    # "IW_CM_EVENT_DISCONNECT is given just to transition IWCM into
                    # CLOSING"
                    self._upcall(cep, IwEvent.DISCONNECT, 0)
                    self._upcall(cep, IwEvent.CLOSE, 0)
            elif cep.state == S.AWAIT_MPAREQ:
                cep.listen_cep = None  # "Socket close before MPA request received."
            release = True
        elif work == ErdmaWork.MPATIMEOUT:
            if cep.state == S.AWAIT_MPAREP:
                cep.mpa.pd_len = 0  # "Hide any partially received private data"
                if cep.cm_id:
                    self._upcall(cep, IwEvent.CONNECT_REPLY, -errno.ETIMEDOUT)
                release = True
            elif cep.state == S.AWAIT_MPAREQ:
                cep.listen_cep = None  # "No MPA req received after peer TCP stream setup."
                release = True
        if release:
            self._release(cep, work)

    def _release(self, cep: Cep, work: ErdmaWork) -> None:
        """erdma_cm_work_handler's release_cep: the MPA timer cancelled, CLOSED, the QP
        closed (erdma_qp_llp_close), the socket released, the cm_id dropped."""
        cep.mpa_timer = None
        self._set(cep, S.CLOSED, f"erdma_cm_work_handler ({work.name})")
        if cep.qp:
            self._qp_llp_close(cep)
            cep.qp = False
        self._release_socket(cep, f"erdma_cm_work_handler ({work.name})")
        cep.cm_id = False
        self._forget(cep)

    def _qp_llp_close(self, cep: Cep) -> None:
        """erdma_qp_llp_close: a QP in RTS, RTR, IDLE or TERMINATE is asked to CLOSING
        (erdma_modify_qp_state_iwarp moves only an RTS QP: erdma_modify_qp_state_to_stop);
        a CLOSING QP goes to IDLE."""
        if cep.qp_state == Q.RTS:
            cep.qp_state = Q.CLOSING
        elif cep.qp_state == Q.CLOSING:
            cep.qp_state = Q.IDLE

    def _qp_cm_drop(self, cep: Cep, *, abort: bool) -> None:
        """erdma_qp_cm_drop, from erdma_modify_qp_state_iwarp taking an RTS QP to
        CLOSING, TERMINATE or ERROR: nothing once CLOSED; with a cm_id, CONNECT_REPLY
        -EINVAL in AWAIT_MPAREP or CLOSE 0 in RDMA_MODE, the cm_id dropped; CLOSED; the
        socket released; the QP unbound. ``abort``: the QP went to ERROR and the
        ``abort_sends_rst`` parameter says the device resets the connection."""
        if cep.state == S.CLOSED:
            return
        if cep.cm_id:
            if cep.state == S.AWAIT_MPAREP:
                self._upcall(cep, IwEvent.CONNECT_REPLY, -EINVAL)
            elif cep.state == S.RDMA_MODE:
                self._upcall(cep, IwEvent.CLOSE, 0)
            cep.cm_id = False
        cep.mpa_timer = None
        self._set(cep, S.CLOSED, "erdma_qp_cm_drop")
        self._release_socket(cep, "erdma_qp_cm_drop", abort=abort)
        cep.qp = False
        self._forget(cep)
