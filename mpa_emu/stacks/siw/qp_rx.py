"""siw's QP receive path in RDMA mode (siw_qp_rx.c), sans-IO.

:class:`RxStream` is ``struct siw_rx_stream`` with the receive queue, the ORQ and the
memory the QP can reach. :meth:`RxStream.process` takes the bytes the socket holds (a
``bytearray`` the caller fills as segments arrive) the way siw_tcp_rx_data walks an skb:
FPDUs are read across segments in three steps, header (siw_get_hdr), data (the
``iwarp_pktinfo[op].rx_data`` handler) and trailer (siw_get_trailer, the CRC checked
only when it was negotiated), then the message is completed (siw_rdmap_complete). What
the QP must do about it comes back as :class:`Effect` values: FPDUs to send, a received
message, a kernel log line, and the connection drop (siw_qp_cm_drop) with the
Terminate siw_init_terminate recorded in :attr:`RxStream.term`.
"""

from __future__ import annotations

import errno
import struct
from dataclasses import dataclass, field

from mpa_emu.stacks.siw import rdma
from mpa_emu.stacks.siw.rdma import TermInfo
from mpa_emu.wire import ddp
from mpa_emu.wire.mpa import crc32c

GET_HDR = 0
GET_DATA_START = 1
GET_DATA_MORE = 2
GET_TRAILER = 3
MIN_DDP_HDR = rdma.CTRL_TAGGED_LEN
"""siw_get_hdr first copies ``sizeof(struct iwarp_ctrl_tagged)`` bytes, then checks."""

_SENDS = (ddp.Opcode.SEND, ddp.Opcode.SEND_INVALIDATE, ddp.Opcode.SEND_SE,
          ddp.Opcode.SEND_SE_INVALIDATE)
_TAGGED_OPS = (ddp.Opcode.WRITE, ddp.Opcode.READ_RESPONSE)

# enum siw_access_state (siw_mem.h), as siw_check_mem returns them.
E_ACCESS_OK = 0
E_STAG_INVALID = 1
E_BASE_BOUNDS = 2
E_ACCESS_PERM = 3


@dataclass(slots=True)
class Mr:
    """A registered memory region (``struct siw_mem``): its STag, base address, bytes
    and remote access rights."""

    stag: int
    va: int
    buf: bytearray
    remote_write: bool = True
    remote_read: bool = True
    valid: bool = True

    def check(self, addr: int, length: int, *, write: bool) -> int:
        """siw_check_mem: valid STag, access right (remote write only: siw_check_sgl_tx
        checks none for a Read Response source), then the bounds."""
        if not self.valid:
            return E_STAG_INVALID
        if write and not self.remote_write:
            return E_ACCESS_PERM
        if addr < self.va or addr + length > self.va + len(self.buf):
            return E_BASE_BOUNDS
        return E_ACCESS_OK


def tagged_error(state: int) -> int:
    """siw_tagged_error: an access error as a DDP tagged-buffer ecode (no access right is
    "invalid STag": RFC 5041 has no better code)."""
    return rdma.DDP_ECODE_T_BASE_BOUNDS if state == E_BASE_BOUNDS \
        else rdma.DDP_ECODE_T_INVALID_STAG


def rdmap_error(state: int) -> int:
    """siw_rdmap_error: an access error as an RDMAP ecode."""
    return {E_STAG_INVALID: rdma.RDMAP_ECODE_INVALID_STAG,
            E_BASE_BOUNDS: rdma.RDMAP_ECODE_BASE_BOUNDS,
            E_ACCESS_PERM: rdma.RDMAP_ECODE_ACCESS_RIGHTS}.get(state,
                                                                rdma.RDMAP_ECODE_UNSPECIFIED)


@dataclass(frozen=True, slots=True)
class Completion:
    """A receive work completion: ``status`` is the ``SIW_WC_*`` name without the prefix
    (SUCCESS, LOC_LEN_ERR, GENERAL_ERR, REM_INV_REQ_ERR, WR_FLUSH_ERR), ``data`` the
    bytes placed in the buffer."""

    status: str
    data: bytes
    length: int


@dataclass(frozen=True, slots=True)
class Effect:
    """What the QP must do: ``kind`` is ``send`` (``data`` an FPDU, ``text`` its
    comment), ``log`` (``level``, ``fn``, ``text``), ``drop`` (siw_qp_cm_drop;
    ``schedule`` False for the immediate drop of the send path), ``completion``."""

    kind: str
    data: bytes = b""
    text: str = ""
    fn: str = ""
    level: str = ""
    schedule: bool = True
    completion: Completion | None = None


@dataclass(slots=True)
class _RecvWqe:
    """The receive WQE in progress (``rx_untagged.wqe_active``)."""

    length: int
    data: bytearray = field(default_factory=bytearray)
    status: str = "SUCCESS"


@dataclass(slots=True)
class _OrqEntry:
    """An outstanding Read Request of this QP (the RTR, or one the application issued):
    its sink STag, TO, length."""

    lkey: int
    laddr: int
    length: int
    processed: int = 0
    """Bytes of the Read Response placed so far (``wqe->processed``)."""


@dataclass(slots=True)
class _Ctx:
    """``struct siw_rx_fpdu``: one of the tagged and untagged receive contexts."""

    more_segs: bool = False
    first_seg: bool = True
    prev_op: int = 0


class RxStream:
    """``struct siw_rx_stream`` of one QP and what it reaches (see the module docstring).

    ``crc`` is ``mpa_crc_enabled``; ``mrs`` the device's memory (STag index -> region);
    ``mss`` the socket's ``mss_cache`` (one FPDU per TCP segment, gso_seg_limit 1)."""

    __slots__ = ("crc", "ddp_stag", "ddp_to", "fpdu_bytes", "hdr", "inval_stag", "last_hdr",
                 "mrs", "msn", "mss", "orq", "out", "pad", "qp_id", "rcvd", "recvq", "rem",
                 "state", "suspended", "tagged", "term", "term_rreq", "tx_msn", "untagged",
                 "wqe", "write_mr")

    def __init__(self, crc: bool, mrs: dict[int, Mr], qp_id: int,
                 recvq: list[int] | None = None) -> None:
        self.crc = crc
        self.mrs = mrs
        self.qp_id = qp_id
        self.mss = 1448
        self.state = GET_HDR
        self.hdr = bytearray()
        """``srx->hdr``: the header of the FPDU being read, MPA length first."""
        self.fpdu_bytes = bytearray()
        self.rem = 0
        self.rcvd = 0
        self.pad = 0
        self.msn = [1, 1, 1]
        """``ddp_msn[]`` expected next (siw_qp_nextstate_from_idle sets 1 each)."""
        self.tx_msn = [0, 0, 0]
        self.suspended = False
        self.term: TermInfo | None = None
        self.term_rreq = b""
        self.last_hdr = b""
        """``srx->hdr`` keeps the last header read until the next one overwrites it."""
        self.recvq: list[int] = [] if recvq is None else recvq
        """Posted receive buffers, by length (the RQ)."""
        self.wqe: _RecvWqe | None = None
        self.orq: list[_OrqEntry] = []
        self.untagged = _Ctx()
        self.tagged = _Ctx()
        self.write_mr: Mr | None = None
        self.ddp_stag = 0
        self.ddp_to = 0
        self.inval_stag = 0
        self.out: list[Effect] = []

    # ---- helpers -----------------------------------------------------------------------

    @property
    def opcode(self) -> int:
        """The RDMAP opcode of ``srx->hdr``."""
        return self.hdr[3] & ddp.RDMAP_OPCODE_MASK if len(self.hdr) > 3 else 0

    def _ctx(self) -> _Ctx:
        return self.tagged if self.opcode in _TAGGED_OPS else self.untagged

    def _log(self, level: str, fn: str, text: str) -> None:
        self.out.append(Effect("log", level=level, fn=fn, text=text))

    def init_terminate(self, layer: int, etype: int, ecode: int, *, in_tx: bool = False,
                       rreq: bytes = b"") -> None:
        """siw_init_terminate: the first error is kept until siw_send_terminate."""
        if self.term is None:
            self.term = TermInfo(layer, etype, ecode, in_tx)
            self.term_rreq = rreq
        self._log("debug", "siw_init_terminate", f"init TERM: layer {layer}, type {etype}, "
                  f"code {ecode}, in tx {'yes' if in_tx else 'no'}")

    def take_terminate(self) -> bytes | None:
        """siw_send_terminate: the Terminate ULPDU for the recorded error (once)."""
        if self.term is None:
            return None
        hdr = bytes(self.hdr) if len(self.hdr) >= 4 else self.last_hdr
        ulpdu = rdma.terminate_for(self.term, hdr.ljust(4, b"\0"), self.term_rreq)
        self.term = None
        return ulpdu

    def expect_read_response(self, lkey: int, laddr: int, length: int) -> None:
        """A Read Request this QP sent goes on the ORQ (siw_read_to_orq)."""
        self.orq.append(_OrqEntry(lkey, laddr, length))

    def fpdu(self, ulpdu: bytes) -> bytes:
        """MPA framing with this QP's CRC setting."""
        return rdma.fpdu(ulpdu, self.crc)

    # ---- siw_tcp_rx_data -------------------------------------------------------------------

    def process(self, rx: bytearray) -> list[Effect]:
        """siw_tcp_rx_data over what ``rx`` holds; bytes it consumes leave ``rx``. After an
        error (or once suspended) every byte is consumed unread, as the suspended
        receive path does (``rx_suspend``)."""
        while rx:
            if self.suspended:
                rx.clear()
                break
            run_completion = True
            if self.state == GET_HDR:
                rv = self._get_hdr(rx)
                if rv == 0:
                    mpa_len = struct.unpack_from("!H", self.hdr)[0]
                    self.rem = mpa_len - len(self.hdr) + 2
                    if self.rem < 0:
                        self._log("debug", "siw_tcp_rx_data", "ULPDU_Length "
                                  f"{mpa_len} shorter than the header: not modelled")
                        rv = -errno.EPROTO
                        run_completion = False
                    else:
                        self.pad = -self.rem & 3 if self.rem else 0
                        self.state = GET_DATA_START
                        self.rcvd = 0
            elif self.state in (GET_DATA_START, GET_DATA_MORE):
                if self.state == GET_DATA_MORE:
                    self._ctx().first_seg = False
                rv = self._rx_data(rx)
                if rv == 0:
                    self.rem = self.pad + 4
                    self.rcvd = 0
                    self.state = GET_TRAILER
                elif rv == -errno.ECONNRESET:
                    run_completion = False
                else:
                    self.state = GET_DATA_MORE
            else:
                rv = self._get_trailer(rx)
                if rv == 0:
                    self.state = GET_HDR
                    if self.hdr[2] & ddp.DDP_FLAG_LAST:
                        rv = self._rdmap_complete(0)
                        run_completion = False
                    self.last_hdr = bytes(self.hdr)
                    self.hdr = bytearray()
                    self.fpdu_bytes = bytearray()
            if rv not in (0, -errno.EAGAIN):
                if (self.state > GET_HDR or self._ctx().more_segs) and run_completion:
                    self._rdmap_complete(rv)
                self._log("debug", "siw_tcp_rx_data", f"rx error {rv}, rx state {self.state}")
                self.suspended = True
                self.out.append(Effect("drop", schedule=True))  # siw_qp_cm_drop(qp, 1)
                rx.clear()
                break
            if rv:
                break
        out, self.out = self.out, []
        return out

    def _take(self, rx: bytearray, count: int) -> bytes:
        chunk = bytes(rx[:count])
        del rx[:count]
        self.fpdu_bytes += chunk
        return chunk

    def _get_hdr(self, rx: bytearray) -> int:
        """siw_get_hdr: the tagged-size control part first (then the version and opcode
        checks), the rest of the opcode's header when it is all there, then the
        tagged/untagged context (more segments of an unfinished message)."""
        if len(self.hdr) < MIN_DDP_HDR:
            self.hdr += self._take(rx, MIN_DDP_HDR - len(self.hdr))
            if len(self.hdr) < MIN_DDP_HDR:
                return -errno.EAGAIN
            ddp_ctrl, rdmap_ctrl = self.hdr[2], self.hdr[3]
            if ddp_ctrl & ddp.DDP_VERSION_MASK != ddp.DDP_VERSION:
                self._log("warn", "siw_get_hdr", "siw: received ddp version unsupported "
                          f"{ddp_ctrl & ddp.DDP_VERSION_MASK}")
                if ddp_ctrl & ddp.DDP_FLAG_TAGGED:
                    self.init_terminate(rdma.TERM_ERROR_LAYER_DDP, rdma.DDP_ETYPE_TAGGED_BUF,
                                        rdma.DDP_ECODE_T_VERSION)
                else:
                    self.init_terminate(rdma.TERM_ERROR_LAYER_DDP,
                                        rdma.DDP_ETYPE_UNTAGGED_BUF, rdma.DDP_ECODE_UT_VERSION)
                return -errno.EINVAL
            if rdmap_ctrl >> 6 != ddp.RDMAP_VERSION:
                self._log("warn", "siw_get_hdr", "siw: received rdmap version unsupported "
                          f"{rdmap_ctrl >> 6}")
                self.init_terminate(rdma.TERM_ERROR_LAYER_RDMAP,
                                    rdma.RDMAP_ETYPE_REMOTE_OPERATION, rdma.RDMAP_ECODE_VERSION)
                return -errno.EINVAL
            if rdmap_ctrl & ddp.RDMAP_OPCODE_MASK > ddp.Opcode.TERMINATE:
                self._log("warn", "siw_get_hdr", "siw: received unknown packet type "
                          f"{rdmap_ctrl & ddp.RDMAP_OPCODE_MASK}")
                self.init_terminate(rdma.TERM_ERROR_LAYER_RDMAP,
                                    rdma.RDMAP_ETYPE_REMOTE_OPERATION, rdma.RDMAP_ECODE_OPCODE)
                return -errno.EINVAL
        opcode = self.opcode
        need = rdma.HDR_LEN[opcode] - len(self.hdr)
        if need > 0:
            if len(rx) < need:
                return -errno.EAGAIN
            self.hdr += self._take(rx, need)
        ctx = self._ctx()
        if ctx.more_segs:
            ctx.first_seg = False
            if ctx.prev_op != opcode:
                self._log("warn", "siw_get_hdr", f"siw: packet intersection: {ctx.prev_op} : "
                          f"{opcode}")
                return -errno.EPROTO
        else:
            ctx.prev_op = opcode
            ctx.first_seg = True
        ctx.more_segs = not self.hdr[2] & ddp.DDP_FLAG_LAST
        return 0

    def _get_trailer(self, rx: bytearray) -> int:
        """siw_get_trailer: pad and CRC; a CRC that does not match (checked only when
        negotiated) is an LLP error, ``LLP_ECODE_RECEIVED_CRC``."""
        if len(rx) < self.rem:
            return -errno.EAGAIN
        body = bytes(self.fpdu_bytes) + bytes(rx[:self.pad])
        trailer = bytes(rx[self.pad:self.rem])
        del rx[:self.rem]
        if not self.crc:
            return 0
        crc_in = struct.unpack("<I", trailer)[0]
        crc_own = crc32c(body)
        if crc_in != crc_own:
            self._log("warn", "siw_get_trailer", f"siw: crc error. in: {crc_in:08x}, own "
                      f"{crc_own:08x}, op {self.opcode}")
            self.init_terminate(rdma.TERM_ERROR_LAYER_LLP, rdma.LLP_ETYPE_MPA,
                                rdma.LLP_ECODE_RECEIVED_CRC)
            return -errno.EINVAL
        return 0

    # ---- the rx_data handlers ------------------------------------------------------------

    def _rx_data(self, rx: bytearray) -> int:
        op = self.opcode
        if op == ddp.Opcode.WRITE:
            return self._proc_write(rx)
        if op == ddp.Opcode.READ_REQUEST:
            return self._proc_rreq()
        if op == ddp.Opcode.READ_RESPONSE:
            return self._proc_rresp(rx)
        if op == ddp.Opcode.TERMINATE:
            return self._proc_terminate()
        return self._proc_send(rx)

    def _consume(self, rx: bytearray) -> bytes:
        chunk = self._take(rx, min(self.rem, len(rx)))
        self.rem -= len(chunk)
        self.rcvd += len(chunk)
        return chunk

    def _proc_write(self, rx: bytearray) -> int:
        """siw_proc_write: a zero-length Write is taken without a look at its STag; else
        siw_write_check_ntoh, the STag (siw_mem_id2obj: none is "invalid STag"), its key,
        siw_check_mem for remote write, then the bytes are placed."""
        ctx = self.tagged
        stag, to = struct.unpack_from("!IQ", self.hdr, 4)
        if self.state == GET_DATA_START:
            if self.rem == 0:
                return 0
            if ctx.first_seg:
                self.ddp_stag, self.ddp_to = stag, to
            elif self.ddp_stag != stag or self.ddp_to != to:
                bad_stag = self.ddp_stag != stag
                self._log("warn", "siw_write_check_ntoh", f"siw: [QP {self.qp_id}]: write "
                          f"{'stag' if bad_stag else 'off'}: mismatch")
                self.init_terminate(rdma.TERM_ERROR_LAYER_DDP, rdma.DDP_ETYPE_TAGGED_BUF,
                                    rdma.DDP_ECODE_T_INVALID_STAG if bad_stag
                                    else rdma.DDP_ECODE_T_BASE_BOUNDS)
                return -errno.EINVAL
        if ctx.first_seg and self.state == GET_DATA_START:
            self.write_mr = self.mrs.get(self.ddp_stag >> 8)
            if self.write_mr is None:
                self._log("debug", "siw_proc_write", "sink stag not found/invalid, stag "
                          f"0x{self.ddp_stag:08x}")
                self.init_terminate(rdma.TERM_ERROR_LAYER_DDP, rdma.DDP_ETYPE_TAGGED_BUF,
                                    rdma.DDP_ECODE_T_INVALID_STAG)
                return -errno.EINVAL
        mr = self.write_mr
        if mr is None or mr.stag != self.ddp_stag:
            self.init_terminate(rdma.TERM_ERROR_LAYER_DDP, rdma.DDP_ETYPE_TAGGED_BUF,
                                rdma.DDP_ECODE_T_INVALID_STAG)
            return -errno.EINVAL
        count = min(self.rem, len(rx))
        addr = self.ddp_to + self.rcvd
        state = mr.check(addr, count, write=True)
        if state != E_ACCESS_OK:
            self.init_terminate(rdma.TERM_ERROR_LAYER_DDP, rdma.DDP_ETYPE_TAGGED_BUF,
                                tagged_error(state))
            return -errno.EINVAL
        chunk = self._consume(rx)
        mr.buf[addr - mr.va:addr - mr.va + len(chunk)] = chunk
        if self.rem == 0:
            self.ddp_to += self.rcvd
            return 0
        return -errno.EAGAIN

    def _proc_rreq(self) -> int:
        """siw_proc_rreq: an inbound Read Request carries no payload."""
        if self.rem == 0:
            return 0
        self._log("warn", "siw_proc_rreq", f"siw: [QP {self.qp_id}]: rreq with mpa len "
                  f"{struct.unpack_from('!H', self.hdr)[0]}")
        return -errno.EPROTO

    def _proc_rresp(self, rx: bytearray) -> int:
        """siw_proc_rresp: the first segment must answer the Read Request at the head of
        the ORQ (siw_orqe_start_rx, siw_rresp_check_ntoh: its sink STag, TO and, for a
        one-segment response, its length); the sink memory is resolved on the first
        bytes (siw_check_sge for local write: an access error is a DDP tagged buffer
        error), then the bytes are placed at the sink TO plus what came before."""
        ctx = self.tagged
        if ctx.first_seg and self.state == GET_DATA_START:
            if not self.orq:
                self._log("warn", "siw_proc_rresp", f"siw: [QP {self.qp_id}]: ORQ empty at "
                          "idx 0")
                self.init_terminate(rdma.TERM_ERROR_LAYER_DDP, rdma.DDP_ETYPE_CATASTROPHIC,
                                    rdma.DDP_ECODE_CATASTROPHIC)
                return -errno.EPROTO
            head = self.orq[0]
            stag, to = struct.unpack_from("!IQ", self.hdr, 4)
            ecode = None
            if head.lkey != stag:
                self._log("warn", "siw_rresp_check_ntoh", f"siw: [QP {self.qp_id}]: rresp "
                          f"stag: {stag:08x} != {head.lkey:08x}")
                ecode = rdma.DDP_ECODE_T_INVALID_STAG
            elif head.laddr + head.processed != to:
                self._log("warn", "siw_rresp_check_ntoh", f"siw: [QP {self.qp_id}]: rresp "
                          f"off: {to:016x} != {head.laddr + head.processed:016x}")
                ecode = rdma.DDP_ECODE_T_BASE_BOUNDS
            elif not ctx.more_segs and head.processed + self.rem != head.length:
                self._log("warn", "siw_rresp_check_ntoh", f"siw: [QP {self.qp_id}]: rresp "
                          f"len: {head.processed + self.rem} != {head.length}")
                ecode = rdma.DDP_ECODE_T_BASE_BOUNDS
            if ecode is not None:
                self.init_terminate(rdma.TERM_ERROR_LAYER_DDP, rdma.DDP_ETYPE_TAGGED_BUF,
                                    ecode)
                return -errno.EINVAL
        if self.rem == 0:
            return 0
        if not self.orq:
            return -errno.EPROTO
        head = self.orq[0]
        mr = self.mrs.get(head.lkey >> 8)
        state = E_STAG_INVALID if mr is None or mr.stag != head.lkey \
            else mr.check(head.laddr, head.length, write=False)
        if state != E_ACCESS_OK or mr is None:
            self._log("debug", "siw_proc_rresp", f"target mem check: {-errno.EINVAL}, "
                      f"lkey 0x{head.lkey:08x}")
            self.init_terminate(rdma.TERM_ERROR_LAYER_DDP, rdma.DDP_ETYPE_TAGGED_BUF,
                                tagged_error(state))
            return -errno.EINVAL
        addr = head.laddr + head.processed
        chunk = self._consume(rx)
        mr.buf[addr - mr.va:addr - mr.va + len(chunk)] = chunk
        head.processed += len(chunk)
        return 0 if self.rem == 0 else -errno.EAGAIN

    def _proc_send(self, rx: bytearray) -> int:
        """siw_proc_send: the first segment takes a receive WQE (siw_rqe_get; none posted
        is ``DDP_ECODE_UT_INVALID_MSN_NOBUF``), siw_send_check_ntoh checks QN, MSN, MO
        and the room left, then the bytes are placed."""
        ctx = self.untagged
        if ctx.first_seg and self.state == GET_DATA_START:
            if not self.recvq:
                self.init_terminate(rdma.TERM_ERROR_LAYER_DDP, rdma.DDP_ETYPE_UNTAGGED_BUF,
                                    rdma.DDP_ECODE_UT_INVALID_MSN_NOBUF)
                return -errno.ENOENT
            self.wqe = _RecvWqe(self.recvq.pop(0))
        wqe = self.wqe
        if wqe is None:
            return -errno.EPROTO
        if self.state == GET_DATA_START:
            inval, qn, msn, mo = struct.unpack_from("!IIII", self.hdr, 4)
            ecode = None
            if qn != ddp.QN_SEND:
                self._log("warn", "siw_send_check_ntoh", f"siw: [QP {self.qp_id}]: invalid "
                          f"ddp qn {qn} for send")
                ecode = rdma.DDP_ECODE_UT_INVALID_QN
            elif msn != self.msn[ddp.QN_SEND]:
                self._log("warn", "siw_send_check_ntoh", f"siw: [QP {self.qp_id}]: send msn: "
                          f"{msn} != {self.msn[ddp.QN_SEND]}")
                ecode = rdma.DDP_ECODE_UT_INVALID_MSN_RANGE
            elif mo != len(wqe.data):
                self._log("warn", "siw_send_check_ntoh", f"siw: [QP {self.qp_id}], send mo: "
                          f"{mo} != {len(wqe.data)}")
                ecode = rdma.DDP_ECODE_UT_INVALID_MO
            elif wqe.length < len(wqe.data) + self.rem:
                self._log("debug", "siw_send_check_ntoh", f"receive space short: "
                          f"{wqe.length} - {len(wqe.data)} < {self.rem}")
                wqe.status = "LOC_LEN_ERR"
                ecode = rdma.DDP_ECODE_UT_INVALID_MSN_NOBUF
            if ecode is not None:
                self.init_terminate(rdma.TERM_ERROR_LAYER_DDP, rdma.DDP_ETYPE_UNTAGGED_BUF,
                                    ecode)
                return -errno.EINVAL
            if ctx.first_seg:
                self.inval_stag = inval
            if self.rem == 0:
                return 0
        wqe.data += self._consume(rx)
        return 0 if self.rem == 0 else -errno.EAGAIN

    def _proc_terminate(self) -> int:
        """siw_proc_terminate: log what the Terminate says, read through siw's bit-fields
        (a Terminate in RFC 5040 layout shows its Layer as the type and its EType as the
        layer), check QN/MSN/MO, and drop the connection: -ECONNRESET, no Terminate back."""
        layer, etype, ecode = self.hdr[20] & 0xF, self.hdr[20] >> 4, self.hdr[21]
        self._log("warn", "siw_proc_terminate", f"siw: got TERMINATE. layer {layer}, type "
                  f"{etype}, code {ecode}")
        qn, msn, mo = struct.unpack_from("!III", self.hdr, 8)
        if qn != ddp.QN_TERMINATE or msn != self.msn[ddp.QN_TERMINATE] or mo != 0:
            self._log("warn", "siw_proc_terminate", f"siw: rx bogus TERM [QN x{qn:08x}, MSN "
                      f"x{msn:08x}, MO x{mo:08x}]")
        return -errno.ECONNRESET

    # ---- siw_rdmap_complete --------------------------------------------------------------

    def _rdmap_complete(self, error: int) -> int:
        """siw_rdmap_complete: a Send completes its receive WQE (the MSN moves on; a Send
        with Invalidate invalidates its STag, and an unknown STag records a Terminate
        without dropping the connection); a Read Request becomes a Read Response
        (siw_init_rresp); a Read Response frees its ORQ entry."""
        op = self.opcode
        if op in _SENDS:
            wqe, self.wqe = self.wqe, None
            if wqe is None:
                return 0
            self.msn[ddp.QN_SEND] += 1
            status = wqe.status
            if error and status == "SUCCESS":
                status = "GENERAL_ERR"
            if status == "SUCCESS" and op in (ddp.Opcode.SEND_INVALIDATE,
                                              ddp.Opcode.SEND_SE_INVALIDATE):
                mr = self.mrs.get(self.inval_stag >> 8)
                if mr is None:
                    self.init_terminate(rdma.TERM_ERROR_LAYER_RDMAP,
                                        rdma.RDMAP_ETYPE_REMOTE_OPERATION,
                                        rdma.RDMAP_ECODE_CANNOT_INVALIDATE)
                    status = "REM_INV_REQ_ERR"
                else:
                    mr.valid = False
            done = Completion(status, bytes(wqe.data), len(wqe.data))
            self.out.append(Effect("completion", completion=done))
            return 0
        if op == ddp.Opcode.READ_REQUEST and not error:
            rv = self._init_rresp()
            self.msn[ddp.QN_READ_REQUEST] += 1
            return rv
        if op == ddp.Opcode.READ_RESPONSE and self.orq and not error:
            self.orq.pop(0)  # siw_check_tx_fence: orq_get++
        if op == ddp.Opcode.WRITE:
            self.write_mr = None
        return 0

    def _init_rresp(self) -> int:
        """siw_init_rresp: the Read Request's MSN must be the one expected
        (``DDP_ECODE_UT_INVALID_MSN_RANGE``); the Read Response goes out at once from the
        source STag (siw_qp_sq_proc_tx: siw_check_sgl_tx; an access error is an RDMAP
        remote protection error found while sending, and the connection is dropped at
        once)."""
        msn = struct.unpack_from("!I", self.hdr, 12)[0]
        sink_stag, sink_to, size, src_stag, src_to = struct.unpack_from("!IQIIQ", self.hdr,
                                                                         20)
        if msn != self.msn[ddp.QN_READ_REQUEST]:
            self.init_terminate(rdma.TERM_ERROR_LAYER_DDP, rdma.DDP_ETYPE_UNTAGGED_BUF,
                                rdma.DDP_ECODE_UT_INVALID_MSN_RANGE)
            return -errno.EPROTO
        if size == 0:
            self.out.append(Effect("send", data=self.fpdu(rdma.read_response(sink_stag,
                                                                             sink_to)),
                                   text="siw_qp_sq_process: zero-length RDMA Read Response"))
            return 0
        mr = self.mrs.get(src_stag >> 8)
        state = E_STAG_INVALID if mr is None or mr.stag != src_stag \
            else mr.check(src_to, size, write=False)
        if state != E_ACCESS_OK or mr is None:
            # siw_check_sge -> siw_mem_id2obj ("STag unknown") or siw_check_mem
            self._log("debug", "siw_check_sge", f"STag unknown: 0x{src_stag:08x}"
                      if state == E_STAG_INVALID else f"source STag 0x{src_stag:08x}: "
                      f"TO 0x{src_to:x} + {size} bytes out of the region's bounds")
            # siw_send_terminate rebuilds the Read Request from the TX WQE; it writes the
            # read size where the MSN belongs (wqe->sqe.sge[0].length)
            rreq = struct.pack("!HBBIIII", rdma.RREQ_LEN - 2, rdma.DDP_RDMAP_CTRL_UNTAGGED,
                               rdma.RDMAP_V1 | ddp.Opcode.READ_REQUEST, 0,
                               ddp.QN_READ_REQUEST, size, 0)
            rreq += struct.pack("!IQIIQ", sink_stag, sink_to, size, src_stag, src_to)
            self.init_terminate(rdma.TERM_ERROR_LAYER_RDMAP,
                                rdma.RDMAP_ETYPE_REMOTE_PROTECTION, rdmap_error(state),
                                in_tx=True, rreq=rreq)
            self.suspended = True
            self.out.append(Effect("drop", schedule=False))  # siw_qp_cm_drop(qp, 0)
            return 0
        data = bytes(mr.buf[src_to - mr.va:src_to - mr.va + size])
        room = max(4, self.mss - rdma.CTRL_TAGGED_LEN - 4)
        room -= room % 4
        for pos in range(0, size, room):
            piece = data[pos:pos + room]
            last = pos + room >= size
            seg = rdma.read_response_segment(piece, sink_stag, sink_to + pos, last=last)
            self.out.append(Effect("send", data=self.fpdu(seg),
                                   text=f"siw_qp_sq_process: RDMA Read Response, {len(piece)} "
                                        f"bytes at TO {sink_to + pos:#x}"))
        return 0

    # ---- the application's side --------------------------------------------------------------

    def post_send(self, payload: bytes) -> list[bytes]:
        """siw_qp_prepare_tx / siw_prepare_fpdu for a Send: the next MSN, the payload cut
        so that each FPDU fits one TCP segment (``tcp_seglen`` = ``mss_cache``)."""
        self.tx_msn[ddp.QN_SEND] += 1
        msn = self.tx_msn[ddp.QN_SEND]
        room = max(4, self.mss - rdma.CTRL_UNTAGGED_LEN - 4)
        room -= room % 4
        out = []
        pos = 0
        while True:
            piece = payload[pos:pos + room]
            last = pos + room >= len(payload)
            out.append(self.fpdu(rdma.send(piece, msn, pos, last=last)))
            pos += len(piece)
            if last:
                return out

    def flush(self) -> list[Completion]:
        """siw_rq_flush: the WQE in progress and every posted receive complete with
        WR_FLUSH_ERR."""
        out = []
        if self.wqe is not None:
            out.append(Completion("WR_FLUSH_ERR", b"", self.wqe.length))
            self.wqe = None
        out.extend(Completion("WR_FLUSH_ERR", b"", n) for n in self.recvq)
        self.recvq.clear()
        return out
