"""The FPDUs siw sends itself once an MPA exchange is done: the zero-length RTR
(siw_qp_mpa_rts, built by siw_qp_prepare_tx), the zero-length Read Response that answers
a Read RTR, and the Terminate (siw_send_terminate).

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

from mpa_emu.wire import ddp
from mpa_emu.wire.mpa import crc32c, fpdu_pad_len

DDP_RDMAP_CTRL_UNTAGGED = 0x41  # DDP_FLAG_LAST | DDP version 1
DDP_RDMAP_CTRL_TAGGED = 0xC1  # DDP_FLAG_TAGGED | DDP_FLAG_LAST | DDP version 1
RDMAP_V1 = 0x40  # RDMAP version 1 << 6
RTR_RKEY = 1
"""siw_qp_mpa_rts: ``wqe->sqe.rkey = 1`` ("some HW may treat STag 0 special")."""

# enum llp_ecode (iwarp.h), with LLP_ETYPE_MPA = 0 and TERM_ERROR_LAYER_LLP = 2.
TERM_ERROR_LAYER_LLP = 2
LLP_ETYPE_MPA = 0
LLP_ECODE_INVALID_REQ_RESP = 0x04
LLP_ECODE_INSUFFICIENT_IRD = 0x06
LLP_ECODE_NO_MATCHING_RTR = 0x07


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


def terminate(layer: int, etype: int, ecode: int) -> bytes:
    """siw_send_terminate for an LLP (MPA) error, the only kind siw's CM raises: the
    untagged Terminate header (QN 2 RDMAP_UNTAGGED_QN_TERMINATE, MSN 1, MO 0) and the
    control word; no DDP/RDMAP header is attached, so M, D and R stay clear."""
    head = struct.pack("!BBIIII", DDP_RDMAP_CTRL_UNTAGGED, RDMAP_V1 | ddp.Opcode.TERMINATE,
                       0, ddp.QN_TERMINATE, 1, 0)
    return head + terminate_control(layer, etype, ecode)
