"""siw's MPA exchange: siw_proc_mpareq, siw_proc_mpareply, siw_send_mpareqrep, the QP to
RTS, the RTR (siw_qp_mpa_rts) and the Terminate of an MPA error (siw_send_terminate).
RDMA mode itself is :mod:`mpa_emu.stacks.siw.qp`."""

from __future__ import annotations

import errno
import struct
from errno import ECONNRESET, EINVAL, ENOMEM, EOPNOTSUPP

from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.siw import rdma
from mpa_emu.stacks.siw.base import SiwBase
from mpa_emu.stacks.siw.cep import (
    FLAG_CRC,
    FLAG_ENHANCED,
    FLAG_MARKERS,
    FLAG_REJECT,
    IRD_ORD_MASK,
    V2_PEER_TO_PEER,
    V2_READ_RTR,
    V2_WRITE_RTR,
    Cep,
    dbg_cep,
)
from mpa_emu.stacks.siw.params import SIW_MAX_IRD_QP, SIW_MAX_ORD_QP
from mpa_emu.stacks.siw.qp_rx import RxStream
from mpa_emu.stacks.siw.states import SiwQpState, SiwState
from mpa_emu.wire.mpa import KEY_REP, KEY_REQ

S = SiwState


class SiwMpa(SiwBase):
    """The MPA rules of siw_cm.c and the FPDUs siw's QP sends for the CM."""

    def _proc_mpareq(self, cep: Cep) -> int:
        """siw_proc_mpareq: read the request (siw_recv_mpa_rr), check revision and key,
        take the RFC 6581 block, refuse markers and (with mpa_crc_strict) CRC with a
        reject frame, negotiate IRD/ORD and the RTR, CONNECT_REQUEST."""
        rv = cep.reader.step(cep.rx)
        if rv:
            self._recv_log(cep, rv)
            return rv
        head = bytes(cep.reader.hdr)
        cep.key, cep.flags, cep.rev = head[:16], head[16], head[17]
        cep.pd_len = cep.reader.pd_len
        cep.pdata = bytes(cep.reader.pdata)
        if cep.rev > 2:
            return -errno.EPROTO  # "allow for 0, 1, and 2 only"
        if cep.key != KEY_REQ:
            return -errno.EPROTO
        cep.key = KEY_REP  # "Prepare for sending MPA reply"
        p = self.params
        reject = False
        if cep.rev == 2 and cep.flags & FLAG_ENHANCED:
            if cep.pd_len < 4:
                reject = True
            else:
                cep.enhanced = True
        if not reject and cep.flags & FLAG_MARKERS:
            reject = True  # "MPA Markers: currently not supported"
        if not reject and cep.flags & FLAG_CRC and not p.mpa_crc_required \
                and p.mpa_crc_strict:
            reject = True  # "'mpa_crc_strict' parameter to reject connection with CRC"
        if reject:
            dbg_cep(self.base, cep, "siw_proc_mpareq", "reject: crc "
                    f"{1 if cep.flags & FLAG_CRC else 0}:{int(p.mpa_crc_required)}:"
                    f"{int(p.mpa_crc_strict)}, m {1 if cep.flags & FLAG_MARKERS else 0}:0")
            cep.flags = (cep.flags & ~FLAG_MARKERS) | FLAG_REJECT
            if not p.mpa_crc_required and p.mpa_crc_strict:
                cep.flags &= ~FLAG_CRC
            cep.pdata = b""
            # cep->mpa.v2_ctrl is still zero here (kzalloc)
            self._send_mpareqrep(cep, b"", "siw_send_mpareqrep (siw_proc_mpareq): reject, "
                                 "AWAIT_MPAREQ -> CLOSED")
            return -EOPNOTSUPP
        if cep.enhanced:
            ird_word, ord_word = struct.unpack_from("!HH", cep.pdata)
            cep.ord = min(ird_word & IRD_ORD_MASK, SIW_MAX_ORD_QP)
            cep.ird = min(ord_word & IRD_ORD_MASK, SIW_MAX_IRD_QP)
            cep.v2_ird, cep.v2_ord = cep.ird, cep.ord
            if ird_word & V2_PEER_TO_PEER:
                cep.v2_ird |= V2_PEER_TO_PEER
                # "Writes are preferred"; Write proposed when neither is offered
                if ord_word & V2_WRITE_RTR:
                    cep.v2_ord |= V2_WRITE_RTR
                elif ord_word & V2_READ_RTR:
                    cep.v2_ord |= V2_READ_RTR
                else:
                    cep.v2_ord |= V2_WRITE_RTR
        self.base.set_state(cep, S.RECVD_MPAREQ, "siw_proc_mpareq", cep.ident, ports=cep.ports())
        cep.held = True
        self._upcall(cep, IwEvent.CONNECT_REQUEST, 0)
        return 0

    def _proc_mpareply(self, cep: Cep) -> int:
        """siw_proc_mpareply: the reply read whole, then revision, key (a Terminate),
        R (CONNECT_REPLY -ECONNRESET), M and C against the CRC settings (-ECONNREFUSED),
        the RFC 6581 block (-ECONNRESET without it), IRD and the RTR (a Terminate each),
        QP to RTS, the RTR, CONNECT_REPLY 0 and RDMA mode."""
        rv = cep.reader.step(cep.rx)
        if rv:
            self._recv_log(cep, rv)
            return self._reply_err(cep, rv)
        cep.mpa_timer = None  # siw_cancel_mpatimer
        head = bytes(cep.reader.hdr)
        cep.key, flags, rev = head[:16], head[16], head[17]
        cep.flags, cep.rev = flags, rev
        cep.pd_len = cep.reader.pd_len
        cep.pdata = bytes(cep.reader.pdata)
        p = self.params
        if rev > 2:
            return self._reply_err(cep, -errno.EPROTO)
        if cep.key != KEY_REP:
            self._terminate(cep, rdma.LLP_ECODE_INVALID_REQ_RESP)
            return self._reply_err(cep, -errno.EPROTO)
        if flags & FLAG_REJECT:
            dbg_cep(self.base, cep, "siw_proc_mpareply", "got mpa reject")
            self._upcall(cep, IwEvent.CONNECT_REPLY, -ECONNRESET)
            return -ECONNRESET
        if (flags & FLAG_MARKERS or (p.mpa_crc_required and not flags & FLAG_CRC)
                or (p.mpa_crc_strict and not p.mpa_crc_required and flags & FLAG_CRC)):
            dbg_cep(self.base, cep, "siw_proc_mpareply", "reply unsupp: crc "
                    f"{1 if flags & FLAG_CRC else 0}:{int(p.mpa_crc_required)}:"
                    f"{int(p.mpa_crc_strict)}, m {1 if flags & FLAG_MARKERS else 0}:0")
            self._upcall(cep, IwEvent.CONNECT_REPLY, -errno.ECONNREFUSED)
            return -EINVAL
        rtr = 0
        if cep.enhanced:
            if rev < 2 or not flags & FLAG_ENHANCED:
                dbg_cep(self.base, cep, "siw_proc_mpareply", f"mpa reply error: vers {rev}, "
                        f"enhcd {1 if flags & FLAG_ENHANCED else 0}")
                self._upcall(cep, IwEvent.CONNECT_REPLY, -ECONNRESET)
                return -EINVAL
            if len(cep.pdata) < 4:
                # the kernel reads mpa_v2_data from a buffer PD_Length did not fill
                self.base.record("kernel_quirk", "siw_proc_mpareply",
                                 what="RFC 6581 block read past PD_Length", pd_len=cep.pd_len)
            ird_word, ord_word = struct.unpack_from("!HH", cep.pdata.ljust(4, b"\0"))
            rep_ird, rep_ord = ird_word & IRD_ORD_MASK, ord_word & IRD_ORD_MASK
            insufficient = False
            if cep.ird < rep_ord and (not p.relaxed_ird_negotiation
                                      or rep_ord > SIW_MAX_IRD_QP):
                dbg_cep(self.base, cep, "siw_proc_mpareply", f"ird {cep.ird}, rep_ord {rep_ord}, "
                        f"max_ord {SIW_MAX_ORD_QP}")
                insufficient = True
            if cep.ord > rep_ird and not p.relaxed_ird_negotiation:
                dbg_cep(self.base, cep, "siw_proc_mpareply", f"ord {cep.ord}, rep_ird {rep_ird}")
                insufficient = True
            # "Always report negotiated peer values to user"
            cep.ird, cep.ord = rep_ord, rep_ird
            if insufficient:
                self._terminate(cep, rdma.LLP_ECODE_INSUFFICIENT_IRD)
                return self._reply_err(cep, -ENOMEM)
            if cep.req_ird & V2_PEER_TO_PEER:
                rtr = cep.req_ord & (V2_WRITE_RTR | V2_READ_RTR)
            if rtr:
                if not rtr & ord_word:
                    dbg_cep(self.base, cep, "siw_proc_mpareply", f"rtr mode:  req {rtr >> 8:2x}, "
                            f"got {(ord_word & (V2_WRITE_RTR | V2_READ_RTR)) >> 8:2x}")
                    self._terminate(cep, rdma.LLP_ECODE_NO_MATCHING_RTR)
                    return self._reply_err(cep, -errno.EPROTO)
                rtr = ord_word & (V2_WRITE_RTR | V2_READ_RTR)
        if cep.qp_state > SiwQpState.RTR:
            return self._reply_err(cep, -EINVAL)  # the QP left IDLE/RTR meanwhile
        cep.crc = bool(flags & FLAG_CRC)
        self._qp_to_rts(cep)
        if rtr:
            self._send_rtr(cep, rtr)
        self._upcall(cep, IwEvent.CONNECT_REPLY, 0)
        self.base.set_state(cep, S.RDMA_MODE, "siw_proc_mpareply", cep.ident, ports=cep.ports())
        return 0

    def _reply_err(self, cep: Cep, rv: int) -> int:
        """siw_proc_mpareply's out_err: CONNECT_REPLY(-EINVAL) unless more bytes are due."""
        if rv != -errno.EAGAIN:
            self._upcall(cep, IwEvent.CONNECT_REPLY, -EINVAL)
        return rv

    def _recv_log(self, cep: Cep, rv: int) -> None:
        reader = cep.reader
        if rv == -errno.EPROTO and reader.extra:
            dbg_cep(self.base, cep, "siw_recv_mpa_rr", f"peer sent extra data: {reader.extra}")

    def _send_mpareqrep(self, cep: Cep, private_data: bytes, comment: str) -> None:
        """siw_send_mpareqrep: ``struct mpa_rr`` (key, bits, PD_Length), the
        ``mpa_v2_data`` block when enhanced (PD_Length counts it), the private data; one
        kernel_sendmsg."""
        pd_len = len(private_data) + (4 if cep.enhanced else 0)
        frame = cep.key + struct.pack("!BBH", cep.flags & 0xFF, cep.rev & 0xFF, pd_len & 0xFFFF)
        if cep.enhanced:
            frame += struct.pack("!HH", cep.v2_ird & 0xFFFF, cep.v2_ord & 0xFFFF)
        frame += private_data
        if cep.sock is not None:
            self.tcp.send(cep.sock, frame, self.base.now_ns, comment)

    # ---- RDMA mode -------------------------------------------------------------------

    def _qp_to_rts(self, cep: Cep) -> None:
        """siw_qp_modify to RTS (siw_qp_nextstate_from_idle): CRC as negotiated, the
        expected MSNs at 1, the receive stream ready."""
        cep.qp_state = SiwQpState.RTS
        cep.rxs = RxStream(cep.crc, self._mrs, cep.ident, cep.recvq)

    def _send_rtr(self, cep: Cep, rtr: int) -> None:
        """siw_qp_mpa_rts: a zero-length Write when the reply picked Write, else a
        zero-length Read Request."""
        if rtr & V2_WRITE_RTR:
            ulpdu, what = rdma.write_rtr(), "zero-length RDMA Write"
        else:
            cep.orq_msn += 1
            ulpdu, what = rdma.read_rtr(cep.orq_msn), "zero-length RDMA Read Request"
            if cep.rxs is not None:  # siw_read_to_orq: sink lkey 0, laddr 0, length 0
                cep.rxs.expect_read_response(0, 0, 0)
        self._send_fpdu(cep, ulpdu, f"siw_qp_mpa_rts: RTR, {what} (AWAIT_MPAREP)")

    def _send_fpdu(self, cep: Cep, ulpdu: bytes, comment: str) -> None:
        if cep.sock is not None:
            self.tcp.send(cep.sock, rdma.fpdu(ulpdu, cep.crc), self.base.now_ns, comment)

    def _terminate(self, cep: Cep, ecode: int) -> None:
        """siw_init_terminate + siw_send_terminate (LLP layer, MPA error type): the
        Terminate goes out on the endpoint's socket before RTS, CRC field zero."""
        dbg_cep(self.base, cep, "siw_init_terminate", f"init TERM: layer "
                f"{rdma.TERM_ERROR_LAYER_LLP}, type {rdma.LLP_ETYPE_MPA}, code {ecode}, "
                "in tx no")
        self._send_fpdu(cep, rdma.terminate(rdma.TERM_ERROR_LAYER_LLP, rdma.LLP_ETYPE_MPA,
                                            ecode),
                        f"siw_send_terminate: LLP/MPA ecode {ecode} ({cep.state.name})")

