"""The FPDUs siw sends itself once an MPA exchange is done: the zero-length RTR
(siw_qp_mpa_rts, built by siw_qp_prepare_tx), Sends and Read Responses
(siw_qp_prepare_tx, siw_prepare_fpdu), and the Terminate (siw_init_terminate,
siw_send_terminate), with the error codes of iwarp.h.

siw keeps the Terminate control word as C bit-fields (iwarp.h, ``struct
iwarp_terminate``). With ``__LITTLE_ENDIAN_BITFIELD`` the fields fill the 32-bit word from
its least significant bit: ``layer:4, etype:4, ecode:8, flag_m:1, flag_d:1, flag_r:1,
reserved:13``. Stored little-endian, byte 0 holds ``etype << 4 | layer``, byte 1 the
ecode, byte 2 ``flag_r << 2 | flag_d << 1 | flag_m``. RFC 5040 section 4.8 puts Layer in
the high nibble of byte 0 and M, D, R in the top bits of byte 2: on an x86 (little-endian)
host siw's Terminate therefore has Layer and EType swapped and the header-control bits
reversed, which is what :func:`terminate` writes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from mpa_emu.wire import ddp
from mpa_emu.wire.mpa import crc32c, fpdu_pad_len

DDP_RDMAP_CTRL_UNTAGGED = 0x41  # DDP_FLAG_LAST | DDP version 1
DDP_RDMAP_CTRL_TAGGED = 0xC1  # DDP_FLAG_TAGGED | DDP_FLAG_LAST | DDP version 1
RDMAP_V1 = 0x40  # RDMAP version 1 << 6
RTR_RKEY = 1
"""siw_qp_mpa_rts: ``wqe->sqe.rkey = 1`` ("some HW may treat STag 0 special")."""

# enum term_elayer, ddp_etype, ddp_ecode, rdmap_etype, rdmap_ecode, llp_ecode (iwarp.h).
TERM_ERROR_LAYER_RDMAP = 0
TERM_ERROR_LAYER_DDP = 1
TERM_ERROR_LAYER_LLP = 2
DDP_ETYPE_CATASTROPHIC = 0
DDP_ETYPE_TAGGED_BUF = 1
DDP_ETYPE_UNTAGGED_BUF = 2
DDP_ECODE_CATASTROPHIC = 0x00
DDP_ECODE_T_INVALID_STAG = 0x00
DDP_ECODE_T_BASE_BOUNDS = 0x01
DDP_ECODE_T_STAG_NOT_ASSOC = 0x02
DDP_ECODE_T_VERSION = 0x04
DDP_ECODE_UT_INVALID_QN = 0x01
DDP_ECODE_UT_INVALID_MSN_NOBUF = 0x02
DDP_ECODE_UT_INVALID_MSN_RANGE = 0x03
DDP_ECODE_UT_INVALID_MO = 0x04
DDP_ECODE_UT_VERSION = 0x06
RDMAP_ETYPE_CATASTROPHIC = 0
RDMAP_ETYPE_REMOTE_PROTECTION = 1
RDMAP_ETYPE_REMOTE_OPERATION = 2
RDMAP_ECODE_INVALID_STAG = 0x00
RDMAP_ECODE_BASE_BOUNDS = 0x01
RDMAP_ECODE_ACCESS_RIGHTS = 0x02
RDMAP_ECODE_STAG_NOT_ASSOC = 0x03
RDMAP_ECODE_VERSION = 0x05
RDMAP_ECODE_OPCODE = 0x06
RDMAP_ECODE_CANNOT_INVALIDATE = 0x09
RDMAP_ECODE_UNSPECIFIED = 0xFF
LLP_ETYPE_MPA = 0
LLP_ECODE_RECEIVED_CRC = 0x02
LLP_ECODE_INVALID_REQ_RESP = 0x04
LLP_ECODE_INSUFFICIENT_IRD = 0x06
LLP_ECODE_NO_MATCHING_RTR = 0x07

HDR_LEN: dict[int, int] = {
    ddp.Opcode.WRITE: 16, ddp.Opcode.READ_REQUEST: 48, ddp.Opcode.READ_RESPONSE: 16,
    ddp.Opcode.SEND: 20, ddp.Opcode.SEND_INVALIDATE: 20, ddp.Opcode.SEND_SE: 20,
    ddp.Opcode.SEND_SE_INVALIDATE: 20, ddp.Opcode.TERMINATE: 24}
"""``iwarp_pktinfo[op].hdr_len`` (siw_qp.c): each header's size with the 2-byte MPA
length in front (``struct iwarp_rdma_write``, ``iwarp_rdma_rreq``, ``iwarp_send``...)."""
CTRL_TAGGED_LEN = 16  # sizeof(struct iwarp_ctrl_tagged)
CTRL_UNTAGGED_LEN = 20  # sizeof(struct iwarp_ctrl_untagged), also sizeof(struct iwarp_send)
RREQ_LEN = 48  # sizeof(struct iwarp_rdma_rreq)


@dataclass(frozen=True, slots=True)
class TermInfo:
    """``qp->term_info`` as siw_init_terminate fills it (the first error wins)."""

    layer: int
    etype: int
    ecode: int
    in_tx: bool = False


def fpdu(ulpdu: bytes, crc: bool) -> bytes:
    """MPA framing as siw_tx_hdt/siw_tx_ctrl write it: ULPDU_Length, ULPDU, pad, then the
    CRC32c (stored little-endian, RFC 5044 section 4) when the QP has CRC on, else zero."""
    body = struct.pack("!H", len(ulpdu)) + ulpdu + bytes(fpdu_pad_len(len(ulpdu)))
    return body + struct.pack("<I", crc32c(body) if crc else 0)


def write_rtr() -> bytes:
    """The zero-length RDMA Write RTR: tagged, sink STag 1, sink TO 0, no payload."""
    return ddp.rdma_write(b"", RTR_RKEY, 0)


def read_rtr(msn: int = 1) -> bytes:
    """The zero-length RDMA Read Request RTR (siw_qp_prepare_tx, SIW_OP_READ): QN 1, MSN
    1 (``++ddp_msn[RDMAP_UNTAGGED_QN_RDMA_READ]`` from 0), MO 0, sink STag 0 (the SGE's
    lkey), sink TO 0, read size 0, source STag 1 (rkey), source TO 0."""
    head = struct.pack("!BBIIII", DDP_RDMAP_CTRL_UNTAGGED, RDMAP_V1 | ddp.Opcode.READ_REQUEST,
                       0, ddp.QN_READ_REQUEST, msn, 0)
    return head + struct.pack("!IQIIQ", 0, 0, 0, RTR_RKEY, 0)


def read_request(msn: int, sink_stag: int, sink_to: int, length: int, src_stag: int,
                 src_to: int) -> bytes:
    """An RDMA Read Request (siw_qp_prepare_tx, SIW_OP_READ): QN 1, the MSN, MO 0, then
    the sink STag and TO, the read size, the source STag and TO (RFC 5040 section 4.4)."""
    head = struct.pack("!BBIIII", DDP_RDMAP_CTRL_UNTAGGED, RDMAP_V1 | ddp.Opcode.READ_REQUEST,
                       0, ddp.QN_READ_REQUEST, msn, 0)
    return head + struct.pack("!IQIIQ", sink_stag, sink_to, length, src_stag, src_to)


def read_response(sink_stag: int, sink_to: int) -> bytes:
    """The zero-length Read Response to a zero-length Read Request (siw_init_rresp):
    tagged, the requester's sink STag and TO."""
    return ddp.read_response(b"", sink_stag, sink_to)


def terminate_control(layer: int, etype: int, ecode: int, *, m: bool = False,
                      d: bool = False, r: bool = False) -> bytes:
    """The 4-byte control word as siw's bit-fields put it on the wire from a
    little-endian host (see the module docstring)."""
    word = (layer & 0xF) | (etype & 0xF) << 4 | (ecode & 0xFF) << 8 \
        | int(m) << 16 | int(d) << 17 | int(r) << 18
    return struct.pack("<I", word)


def terminate(layer: int, etype: int, ecode: int, *, m: bool = False, d: bool = False,
              r: bool = False, attached: bytes = b"") -> bytes:
    """The Terminate ULPDU siw_send_terminate writes: the untagged header (QN 2
    RDMAP_UNTAGGED_QN_TERMINATE, MSN 1, MO 0), the control word in siw's bit-field layout
    and ``attached``, the copy of the offending header that M/D/R announce (nothing for
    an LLP error, the only kind siw's CM raises)."""
    head = struct.pack("!BBIIII", DDP_RDMAP_CTRL_UNTAGGED, RDMAP_V1 | ddp.Opcode.TERMINATE,
                       0, ddp.QN_TERMINATE, 1, 0)
    return head + terminate_control(layer, etype, ecode, m=m, d=d, r=r) + attached


def _ddp_len_adjusted(hdr: bytes) -> bytes:
    """siw_send_terminate with M set: the attached header's MPA length becomes
    ``mpa_len - (iwarp_pktinfo[op].hdr_len - MPA_HDR_SIZE)``, the payload length (u16)."""
    op = hdr[3] & ddp.RDMAP_OPCODE_MASK
    mpa_len = struct.unpack_from("!H", hdr)[0]
    real = (mpa_len - (HDR_LEN.get(op, CTRL_UNTAGGED_LEN) - 2)) & 0xFFFF
    return struct.pack("!H", real) + hdr[2:]


def terminate_for(info: TermInfo, rx_hdr: bytes, rreq: bytes = b"") -> bytes:
    """siw_send_terminate: which header goes with ``info`` and which of M, D, R are set.

    ``rx_hdr`` is ``srx->hdr``, the header of the FPDU being received (MPA length
    first); ``rreq`` the Read Request siw rebuilds for an error found while sending a
    Read Response (``in_tx``). DDP errors attach the DDP header (16 bytes tagged, 20
    untagged, M and D) except for a version error; RDMAP remote protection errors the
    whole RDMAP header (M, D, R); other RDMAP errors the DDP header unless the error is
    the version or the opcode; catastrophic and LLP errors nothing."""
    tagged = bool(rx_hdr[2:3] and rx_hdr[2] & ddp.DDP_FLAG_TAGGED)
    attach = b""
    m = d = r = False
    if info.layer == TERM_ERROR_LAYER_DDP:
        version = (info.etype, info.ecode) in ((DDP_ETYPE_TAGGED_BUF, DDP_ECODE_T_VERSION),
                                               (DDP_ETYPE_UNTAGGED_BUF, DDP_ECODE_UT_VERSION))
        if not version:
            attach = rx_hdr[:CTRL_TAGGED_LEN if tagged else CTRL_UNTAGGED_LEN]
            m = d = True
    elif info.layer == TERM_ERROR_LAYER_RDMAP and info.etype != RDMAP_ETYPE_CATASTROPHIC:
        if info.etype == RDMAP_ETYPE_REMOTE_PROTECTION:
            m = d = r = True
            if info.in_tx:
                attach = rreq
            else:
                read = rx_hdr[3] & ddp.RDMAP_OPCODE_MASK == ddp.Opcode.READ_REQUEST
                attach = rx_hdr[:RREQ_LEN if read else CTRL_UNTAGGED_LEN]
        elif info.ecode not in (RDMAP_ECODE_VERSION, RDMAP_ECODE_OPCODE):
            attach = rx_hdr[:CTRL_TAGGED_LEN if tagged else CTRL_UNTAGGED_LEN]
            m = d = True
    if m:
        attach = _ddp_len_adjusted(bytes(attach).ljust(4, b"\0"))
    return terminate(info.layer, info.etype, info.ecode, m=m, d=d, r=r,
                     attached=bytes(attach))


def send(payload: bytes, msn: int, mo: int, *, last: bool) -> bytes:
    """An RDMA Send DDP segment as siw_qp_prepare_tx / siw_prepare_fpdu write it: QN 0,
    the message's MSN (``++ddp_msn[RDMAP_UNTAGGED_QN_SEND]`` from 0), MO the offset."""
    return ddp.send(payload, msn, mo, last=last)


def read_response_segment(payload: bytes, stag: int, to: int, *, last: bool) -> bytes:
    """One Read Response DDP segment (siw_prepare_fpdu): tagged, the requester's sink
    STag, its sink TO plus the bytes already sent."""
    return ddp.read_response(payload, stag, to, last=last)
