"""erdma's MPA exchange, one method per function of erdma_cm.c: erdma_send_mpareqrep,
erdma_newconn_connected (the request), erdma_proc_mpareq, erdma_proc_mpareply, and the
QP's move to RTS (erdma_modify_qp_state_iwarp -> erdma_modify_qp_state_to_rts) where the
device takes the connection over. erdma_recv_mpa_rr is
:meth:`mpa_emu.stacks.erdma.cep.MpaInfo.recv`."""

from __future__ import annotations

import errno
import struct
from errno import ECONNRESET, EINVAL, EOPNOTSUPP

from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.erdma.base import ErdmaBase
from mpa_emu.stacks.erdma.cep import FLAG_CRC, FLAG_MARKERS, FLAG_REJECT, Cep, MpaInfo
from mpa_emu.stacks.erdma.states import ErdmaQpState, ErdmaState, ErdmaWork
from mpa_emu.wire import erdma_mpa
from mpa_emu.wire.mpa import KEY_REP, KEY_REQ

S = ErdmaState


class ErdmaMpa(ErdmaBase):
    """The MPA rules of erdma_cm.c."""

    def _send_mpareqrep(self, cep: Cep, private_data: bytes, comment: str) -> None:
        """erdma_send_mpareqrep: ``mpa.hdr`` with PD_Length the private data's length (a
        u8 argument), ``mpa.ext_data`` (8 bytes PD_Length does not count), the private
        data; one kernel_sendmsg."""
        if len(private_data) > 0xFF:
            self._note("kernel_quirk", "erdma_send_mpareqrep",
                       what="u8 pd_len argument wraps", length=len(private_data))
            private_data = private_data[:len(private_data) & 0xFF]
        hdr = bytearray(cep.mpa.hdr)
        struct.pack_into("!H", hdr, 18, len(private_data))
        frame = bytes(hdr) + bytes(cep.mpa.ext) + private_data
        if cep.sock is not None:
            self.tcp.send(cep.sock, frame, self._now, comment)

    def _newconn_connected(self, cep: Cep) -> None:
        """erdma_newconn_connected: the request (``bits`` 0 with MPA_REVISION_EXT_1, the
        request key, the QP's cookie and CC in the extension, the held private data)
        sent; AWAIT_MPAREP; ``pd_len`` cleared; the MPA timer (MPAREP_TIMEOUT)."""
        head = KEY_REQ + struct.pack("!BBH", 0, erdma_mpa.REVISION_EXT_1, 0)
        ext = struct.pack("!II", cep.cookie, cep.cc & erdma_mpa.EXT_FLAG_CC)
        cep.mpa = MpaInfo(bytearray(head), bytearray(ext))
        self._send_mpareqrep(cep, cep.private_data, "erdma_send_mpareqrep "
                             "(erdma_newconn_connected): CONNECTING -> AWAIT_MPAREP")
        self._set(cep, S.AWAIT_MPAREP, "erdma_newconn_connected")
        # the reply is read into mpa.hdr afresh (bytes_rcvd is 0): pd_len reads 0
        cep.mpa = MpaInfo()
        self._queue_work(cep, ErdmaWork.MPATIMEOUT)

    def _proc_mpareq(self, cep: Cep) -> int:
        """erdma_proc_mpareq: read the request (erdma_recv_mpa_rr: revision 129 only,
        PD_Length 256 at most), check the key (-EPROTO, nothing sent), turn the header
        into the reply's; M or C set: the reject frame (M and C cleared, R set, the
        request's extension echoed, no private data) and -EOPNOTSUPP; else
        RECVD_MPAREQ and CONNECT_REQUEST."""
        rv = self._recv_mpa_rr(cep)
        if rv:
            return rv
        hdr = cep.mpa.hdr
        if bytes(hdr[:16]) != KEY_REQ:
            self._note("mpa_refused", "erdma_proc_mpareq", conn=cep.ident,
                       why="not the request key")
            return -errno.EPROTO
        hdr[:16] = KEY_REP  # memcpy(req->key, MPA_KEY_REP, MPA_KEY_SIZE)
        if hdr[16] & (FLAG_MARKERS | FLAG_CRC):  # "does not support marker and crc"
            hdr[16] = (hdr[16] & ~(FLAG_MARKERS | FLAG_CRC)) | FLAG_REJECT
            cep.mpa.pdata = None
            self._send_mpareqrep(cep, b"", "erdma_send_mpareqrep (erdma_proc_mpareq): "
                                 "reject, markers or CRC requested")
            return -EOPNOTSUPP
        self._set(cep, S.RECVD_MPAREQ, "erdma_proc_mpareq")
        cep.held = True  # "Keep reference until IWCM accepts/rejects"
        self._upcall(cep, IwEvent.CONNECT_REQUEST, 0)
        return 0

    def _recv_mpa_rr(self, cep: Cep) -> int:
        """erdma_recv_mpa_rr (:meth:`MpaInfo.recv`), with a trace record for a refusal
        and for bytes a short probe read dropped."""
        before = cep.mpa.swallowed
        rv = cep.mpa.recv(cep.rx)
        if cep.mpa.swallowed != before:
            self._note("kernel_quirk", "erdma_recv_mpa_rr", conn=cep.ident,
                       what="bytes past the frame dropped by a short 4-byte read (-EAGAIN)",
                       dropped=cep.mpa.swallowed - before)
        if rv == -errno.EPROTO:
            self._note("mpa_refused", "erdma_recv_mpa_rr", conn=cep.ident, rev=cep.mpa.rev,
                       pd_len=cep.mpa.pd_len, why=self._why_eproto(cep.mpa))
        return rv

    @staticmethod
    def _why_eproto(mpa: MpaInfo) -> str:
        if mpa.pd_len > erdma_mpa.MAX_PRIVDATA:
            return f"PD_Length {mpa.pd_len} over MPA_MAX_PRIVDATA"
        if mpa.rev != erdma_mpa.REVISION_EXT_1:
            return f"revision {mpa.rev}, not MPA_REVISION_EXT_1 ({erdma_mpa.REVISION_EXT_1})"
        return "bytes past the frame"

    def _proc_mpareply(self, cep: Cep) -> int:
        """erdma_proc_mpareply: read the reply (any error but -EAGAIN: CONNECT_REPLY
        -EINVAL), cancel the MPA timer, key (-EPROTO: CONNECT_REPLY -EINVAL), R
        (CONNECT_REPLY -ECONNRESET), M or C (CONNECT_REPLY -ECONNREFUSED), the QP past
        RTR (-EINVAL); else the QP to RTS (COMPROMISE_CC when the peer's CC differs),
        CONNECT_REPLY 0 and RDMA_MODE."""
        rv = self._recv_mpa_rr(cep)
        if rv:
            return self._reply_err(cep, rv)
        cep.mpa_timer = None  # erdma_cancel_mpatimer
        hdr = cep.mpa.hdr
        if bytes(hdr[:16]) != KEY_REP:
            self._note("mpa_refused", "erdma_proc_mpareply", conn=cep.ident,
                       why="not the reply key")
            return self._reply_err(cep, -errno.EPROTO)
        if hdr[16] & FLAG_REJECT:
            self._upcall(cep, IwEvent.CONNECT_REPLY, -ECONNRESET)
            return -ECONNRESET
        if hdr[16] & (FLAG_MARKERS | FLAG_CRC):  # "does not support marker and crc"
            self._upcall(cep, IwEvent.CONNECT_REPLY, -errno.ECONNREFUSED)
            return -EINVAL
        if cep.qp_state > ErdmaQpState.RTR:
            return self._reply_err(cep, -EINVAL)
        self._modify_qp_rts(cep, "erdma_proc_mpareply")
        self._upcall(cep, IwEvent.CONNECT_REPLY, 0)
        self._set(cep, S.RDMA_MODE, "erdma_proc_mpareply")
        return 0

    def _reply_err(self, cep: Cep, rv: int) -> int:
        """erdma_proc_mpareply's out_err: CONNECT_REPLY(-EINVAL) unless more is due."""
        if rv != -errno.EAGAIN:
            self._upcall(cep, IwEvent.CONNECT_REPLY, -EINVAL)
        return rv

    def _modify_qp_rts(self, cep: Cep, fn: str) -> None:
        """erdma_modify_qp_state_iwarp(RTS) from ``fn``: ERDMA_QPA_IWARP_CC with
        COMPROMISE_CC when the peer's extension names another CC than the QP's
        (``__mpa_ext_cc(cep->mpa.ext_data.bits) != qp->attrs.cc``); then
        erdma_modify_qp_state_to_rts gives the device the connection (addresses, ports,
        the peer's cookie, snd_nxt and rcv_nxt; a passive QP's snd_nxt past the reply
        still to be sent, MPA_DEFAULT_HDR_LEN + pd_len)."""
        peer_cc = cep.mpa.ext_bits & erdma_mpa.EXT_FLAG_CC
        if peer_cc != cep.cc:
            self._note("cc_compromise", fn, conn=cep.ident, own=cep.cc, peer=peer_cc,
                       now=erdma_mpa.COMPROMISE_CC)
            cep.cc = erdma_mpa.COMPROMISE_CC
        cep.qp_state = ErdmaQpState.RTS
