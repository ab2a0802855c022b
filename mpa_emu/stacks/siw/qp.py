"""siw's QP in RDMA mode as the core drives it: the receive path of
:mod:`mpa_emu.stacks.siw.qp_rx` on the socket's bytes (siw_qp_llp_data_ready, and
siw_rtr_data_ready for a responder waiting for the RTR), the Terminate
(siw_send_terminate) and the connection drop (siw_qp_cm_drop), and the application's
verbs: receive buffers, Sends and memory regions."""

from __future__ import annotations

from errno import EINVAL

from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.siw import rdma
from mpa_emu.stacks.siw.cep import Cep, dbg_cep
from mpa_emu.stacks.siw.mpa_rules import SiwMpa
from mpa_emu.stacks.siw.qp_rx import Completion, Effect, Mr
from mpa_emu.stacks.siw.states import SiwQpState, SiwState, SiwWork

S = SiwState
MAX_RECV_LEN = 1 << 31


class SiwQp(SiwMpa):
    """The QP half of a siw host (see the module docstring)."""

    # ---- the application's verbs -----------------------------------------------------------

    def post_recv(self, conn: int, length: int, *, now_ns: int = 0) -> None:
        """siw_post_receive: a receive buffer of ``length`` bytes for the next Send. Before
        RDMA mode the buffer waits on the QP; a QP past RTS refuses it (-EINVAL)."""
        self.base.now_ns = max(self.base.now_ns, now_ns)
        cep = self._qp_cep(conn, "post_recv")
        if not 0 <= length < MAX_RECV_LEN:
            raise CmError(EINVAL, f"post_recv: length {length} out of range 0..{MAX_RECV_LEN - 1}")
        if cep.qp_state > SiwQpState.RTS:
            raise CmError(EINVAL, f"post_recv: the QP is in {cep.qp_state.name}")
        cep.recvq.append(length)

    def post_send(self, conn: int, payload: bytes, *, now_ns: int = 0) -> None:
        """siw_post_send of an RDMA Send: one FPDU per TCP segment, the next MSN. Only an
        RTS QP in RDMA mode sends (-EINVAL otherwise)."""
        self.base.now_ns = max(self.base.now_ns, now_ns)
        cep = self._qp_cep(conn, "post_send")
        rxs = cep.rxs
        if rxs is None or cep.state != SiwState.RDMA_MODE or cep.sock is None \
                or cep.qp_state != SiwQpState.RTS:
            raise CmError(EINVAL, f"post_send: connection {conn} is not in RDMA mode with an "
                          "RTS QP")
        rxs.mss = self.tcp.mss(cep.sock) or rxs.mss
        for index, data in enumerate(rxs.post_send(bytes(payload))):
            self.tcp.send(cep.sock, data, self.base.now_ns, f"siw_qp_sq_process: RDMA Send MSN "
                          f"{rxs.tx_msn[0]} (FPDU {index + 1})")

    def post_read(self, conn: int, sink_stag: int, sink_to: int, length: int,
                  src_stag: int, src_to: int, *, now_ns: int = 0) -> None:
        """siw_post_send of an RDMA Read (SIW_OP_READ): siw_qp_prepare_tx writes the Read
        Request (QN 1, the next ``ddp_msn[RDMAP_UNTAGGED_QN_RDMA_READ]``, sink STag the
        SGE's lkey), siw_read_to_orq puts it on the ORQ for its Read Response. Only an
        RTS QP in RDMA mode sends (-EINVAL otherwise)."""
        self.base.now_ns = max(self.base.now_ns, now_ns)
        cep = self._qp_cep(conn, "post_read")
        rxs = cep.rxs
        if rxs is None or cep.state != SiwState.RDMA_MODE or cep.sock is None \
                or cep.qp_state != SiwQpState.RTS:
            raise CmError(EINVAL, f"post_read: connection {conn} is not in RDMA mode with an "
                          "RTS QP")
        cep.orq_msn += 1
        rxs.expect_read_response(sink_stag, sink_to, length)
        ulpdu = rdma.read_request(cep.orq_msn, sink_stag, sink_to, length, src_stag, src_to)
        self._send_fpdu_raw(cep, rxs.fpdu(ulpdu), f"siw_qp_sq_process: RDMA Read Request "
                            f"MSN {cep.orq_msn}, {length} bytes")

    def register_mr(self, stag: int, length: int, *, va: int = 0, remote_write: bool = True,
                    remote_read: bool = True, data: bytes = b"") -> None:
        """siw_reg_user_mr for the emulator: memory of ``length`` bytes at ``va`` under
        ``stag`` (its index is ``stag >> 8``, the low byte the key), filled with ``data``."""
        if not 0 < stag <= 0xFFFFFFFF or not 0 <= length < MAX_RECV_LEN \
                or not 0 <= va <= 0xFFFFFFFFFFFFFFFF:
            raise CmError(EINVAL, "register_mr: STag 1..0xffffffff, length and va in range")
        if len(data) > length:
            raise CmError(EINVAL, f"register_mr: {len(data)} bytes of data for {length}")
        self._mrs[stag >> 8] = Mr(stag, va, bytearray(data.ljust(length, b"\0")),
                                  remote_write, remote_read)

    def mr_data(self, stag: int) -> bytes:
        """The bytes of the region ``stag`` (RDMA Writes land there)."""
        mr = self._mrs.get(stag >> 8)
        if mr is None or mr.stag != stag:
            raise CmError(EINVAL, f"no memory region with STag {stag:#x}")
        return bytes(mr.buf)

    def completions(self, conn: int) -> list[Completion]:
        """The receive completions of ``conn`` so far (received Sends, flushed buffers)."""
        cep = self._ceps.get(conn)
        return list(cep.completions) if cep is not None else list(self._done.get(conn, []))

    def _qp_cep(self, conn: int, verb: str) -> Cep:
        cep = self._ceps.get(conn)
        if cep is None or cep.listener:
            raise CmError(EINVAL, f"{verb}: no connection {conn}")
        return cep

    # ---- RDMA mode -------------------------------------------------------------------------

    def _qp_rx(self, cep: Cep) -> None:
        """siw_qp_llp_data_ready (only for an RTS QP) or, for a responder whose reply
        picked an RTR, siw_rtr_data_ready: the first read that does not fail gives
        ESTABLISHED; a failed one has already scheduled the drop, and no ESTABLISHED
        comes."""
        rxs = cep.rxs
        if rxs is None or cep.qp_state != SiwQpState.RTS or rxs.suspended:
            return
        if cep.sock is not None:
            rxs.mss = self.tcp.mss(cep.sock) or rxs.mss
        self._apply(cep, rxs.process(cep.rx))
        if cep.wait_rtr:
            cep.wait_rtr = False
            if not rxs.suspended:
                self._upcall(cep, IwEvent.ESTABLISHED, 0)  # siw_rtr_data_ready

    def _apply(self, cep: Cep, effects: list[Effect]) -> None:
        for eff in effects:
            if eff.kind == "send":
                self._send_fpdu_raw(cep, eff.data, eff.text)
            elif eff.kind == "log":
                self.base.kernel_log(eff.level, eff.fn, eff.text,
                                     dynamic_debug=eff.level == "debug")
            elif eff.kind == "completion" and eff.completion is not None:
                cep.completions.append(eff.completion)
                self.base.record("recv_completion", "siw_rqe_complete", conn=cep.ident,
                                 status=eff.completion.status, bytes=eff.completion.length)
            elif eff.kind == "drop":
                if eff.schedule:
                    # siw_qp_cm_drop(qp, 1): SIW_CM_WORK_CLOSE_LLP
                    self._workq.append((cep.ident, SiwWork.CLOSE_LLP))
                else:
                    self._cm_drop(cep)

    def _send_fpdu_raw(self, cep: Cep, data: bytes, comment: str) -> None:
        if cep.sock is not None:
            self.tcp.send(cep.sock, data, self.base.now_ns, comment)

    def _send_terminate(self, cep: Cep) -> None:
        """siw_send_terminate for the error siw_init_terminate recorded, if any."""
        rxs = cep.rxs
        if rxs is None or rxs.term is None:
            return
        info = rxs.term
        ulpdu = rxs.take_terminate()
        if ulpdu is None or cep.sock is None:
            return
        data = rxs.fpdu(ulpdu)
        dbg_cep(self.base, cep, "siw_send_terminate", f"sent TERM: success, layer {info.layer}, "
                f"type {info.etype}, code {info.ecode} ({len(data) - 2} bytes)")
        self._send_fpdu_raw(cep, data, f"siw_send_terminate: layer {info.layer}, etype "
                            f"{info.etype}, ecode {info.ecode:#04x} ({cep.state.name})")

    def _cm_drop(self, cep: Cep) -> None:
        """siw_qp_cm_drop(qp, 0): AWAIT_MPAREP -> CONNECT_REPLY(-EINVAL), RDMA_MODE ->
        CLOSE(0); the endpoint CLOSED and its socket released at once."""
        if cep.state == S.CLOSED:
            dbg_cep(self.base, cep, "siw_qp_cm_drop", "already closed")
            return
        dbg_cep(self.base, cep, "siw_qp_cm_drop", f"immediate close, state {int(cep.state)}")
        if cep.rxs is not None:
            cep.rxs.suspended = True  # rx_suspend, tx_suspend
        self._send_terminate(cep)
        if cep.cm_id:
            if cep.state == S.AWAIT_MPAREP:
                self._upcall(cep, IwEvent.CONNECT_REPLY, -EINVAL)
            elif cep.state == S.RDMA_MODE:
                self._close_upcall(cep, "siw_qp_cm_drop")
            cep.cm_id = False
        self.base.set_state(cep, S.CLOSED, "siw_qp_cm_drop", cep.ident, ports=cep.ports())
        self._release_socket(cep, "siw_qp_cm_drop")
        self._forget(cep)

    def _close_llp(self, cep: Cep) -> None:
        """SIW_CM_WORK_CLOSE_LLP: the Terminate, if one was recorded, then CLOSE."""
        if cep.qp:
            self._send_terminate(cep)
        if cep.cm_id:
            self._close_upcall(cep, "siw_cm_work_handler")

    def _close_upcall(self, cep: Cep, fn: str) -> None:
        """CLOSE(0) to iw_cm. Before ESTABLISHED went up (a responder still waiting for
        the peer's RTR) iw_cm holds the id in CONN_RECV, where cm_close_handler BUG()s:
        siw does send it so (siw_cm_work_handler, siw_qp_cm_drop check only cm_id), and
        the trace says it is the kernel's own."""
        if not cep.active and not cep.established:
            cep.deferred_disconnect = None
            self.base.record("kernel_bug", fn, conn=cep.ident,
                             what="CLOSE upcalled before ESTABLISHED: iw_cm's id is still in "
                            "CONN_RECV, where cm_close_handler BUG()s")
        self._upcall(cep, IwEvent.CLOSE, 0)

    def _flush(self, cep: Cep) -> None:
        """siw_rq_flush: posted receive buffers complete with WR_FLUSH_ERR."""
        rxs = cep.rxs
        flushed = rxs.flush() if rxs is not None else [Completion("WR_FLUSH_ERR", b"", n)
                                                       for n in cep.recvq]
        cep.recvq.clear()
        cep.completions.extend(flushed)
        self._done[cep.ident] = cep.completions
