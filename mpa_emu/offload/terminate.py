"""The Terminate irdma sends after an error, and how it reads one it receives.

Pure functions of the AE and the offending frame, kept apart from the QP so that each
AE's mapping is testable on its own:

* :func:`terminate_fields` is the switch of ``irdma_bld_terminate_hdr`` (ctrl.c): the
  Layer, EType and Error Code for an AE (RFC 5040 section 4.8 for the format, RFC 5040
  section 7 and RFC 5041 section 7 for the codes).
* :func:`build_terminate` adds the copy ``irdma_bld_termhdr_ddp_rdma`` makes of the
  offending segment (its ULPDU_LENGTH, DDP header and, for a Read Request, its RDMAP
  header) and frames the result as an untagged DDP segment on QN 2, MSN 1.
* :func:`check_received_terminate` is the validation ``irdma_terminate_received`` runs
  on a Terminate the peer sent, and :func:`remote_error` its choice between closing at
  once and sending a FIN first.

Model choice: the NIC writes the offending frame to the QP's q2 buffer
(``info->q2_data_written``) for every AE it raises on a received FPDU, so the copy is made
whenever there is a frame; AEs without one (``None``) get the header alone.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from mpa_emu.stacks.irdma.offload.states import (
    AE_AMP_BAD_PD,
    AE_AMP_BAD_QP,
    AE_AMP_BAD_STAG_INDEX,
    AE_AMP_BAD_STAG_KEY,
    AE_AMP_BOUNDS_VIOLATION,
    AE_AMP_INVALID_STAG,
    AE_AMP_INVALIDATE_NO_REMOTE_ACCESS_RIGHTS,
    AE_AMP_RIGHTS_VIOLATION,
    AE_AMP_TO_WRAP,
    AE_AMP_UNALLOCATED_STAG,
    AE_DDP_INVALID_MSN_GAP_IN_MSN,
    AE_DDP_NO_L_BIT,
    AE_DDP_UBE_DDP_MESSAGE_TOO_LONG_FOR_AVAILABLE_BUFFER,
    AE_DDP_UBE_INVALID_DDP_VERSION,
    AE_DDP_UBE_INVALID_MO,
    AE_DDP_UBE_INVALID_MSN_NO_BUFFER_AVAILABLE,
    AE_DDP_UBE_INVALID_QN,
    AE_LCE_QP_CATASTROPHIC,
    AE_LLP_RECEIVED_MPA_CRC_ERROR,
    AE_LLP_SEGMENT_TOO_SMALL,
    AE_PRIV_OPERATION_DENIED,
    AE_RDMAP_ROE_INVALID_RDMAP_VERSION,
    Ae,
)
from mpa_emu.wire import ddp

# irdma type.h: enum irdma_term_layers, irdma_term_error_types and the error codes.
LAYER_RDMA: Final = 0
LAYER_DDP: Final = 1
LAYER_MPA: Final = 2
RDMAP_REMOTE_PROT: Final = 1
RDMAP_REMOTE_OP: Final = 2
DDP_CATASTROPHIC: Final = 0
DDP_TAGGED_BUF: Final = 1
DDP_UNTAGGED_BUF: Final = 2
DDP_LLP: Final = 3

RDMAP_INV_STAG: Final = 0x00
RDMAP_INV_BOUNDS: Final = 0x01
RDMAP_ACCESS: Final = 0x02
RDMAP_UNASSOC_STAG: Final = 0x03
RDMAP_TO_WRAP: Final = 0x04
RDMAP_INV_RDMAP_VER: Final = 0x05
RDMAP_CANT_INV_STAG: Final = 0x09
RDMAP_UNSPECIFIED: Final = 0xFF
DDP_CATASTROPHIC_LOCAL: Final = 0x00
DDP_TAGGED_INV_STAG: Final = 0x00
DDP_TAGGED_BOUNDS: Final = 0x01
DDP_TAGGED_UNASSOC_STAG: Final = 0x02
DDP_TAGGED_INV_DDP_VER: Final = 0x04
DDP_UNTAGGED_INV_QN: Final = 0x01
DDP_UNTAGGED_INV_MSN_NO_BUF: Final = 0x02
DDP_UNTAGGED_INV_MSN_RANGE: Final = 0x03
DDP_UNTAGGED_INV_MO: Final = 0x04
DDP_UNTAGGED_INV_TOO_LONG: Final = 0x05
DDP_UNTAGGED_INV_DDP_VER: Final = 0x06
MPA_CRC: Final = 0x02

_OP_WRITE: Final = ddp.Opcode.WRITE
_OP_SEND_INV: Final = (ddp.Opcode.SEND_INVALIDATE, ddp.Opcode.SEND_SE_INVALIDATE)


@dataclass(frozen=True, slots=True)
class TermFields:
    """What ``irdma_bld_termhdr_ctrl`` writes: Layer, EType, Error Code."""

    layer: int
    etype: int
    error_code: int

    @property
    def layer_etype(self) -> int:
        """The first byte of the Terminate control word."""
        return (self.layer << 4) | self.etype


def _opcode(frame: bytes | None) -> int | None:
    """``irdma_iwarp_opcode``: the RDMAP opcode of the q2 frame (from its ULPDU_LENGTH
    on), ``None`` when the NIC wrote no frame."""
    if frame is None or len(frame) < 4:
        return None
    return frame[3] & ddp.RDMAP_OPCODE_MASK


def terminate_fields(ae: Ae, frame: bytes | None) -> TermFields:
    """The switch of ``irdma_bld_terminate_hdr``: Layer/EType/Error Code for ``ae``.

    ``frame`` is the offending FPDU from its ULPDU_LENGTH on, or ``None`` when the NIC
    wrote none to q2. AEs the switch does not name take its default (RDMAP, remote
    operation, unspecified)."""
    op = _opcode(frame)
    written = frame is not None
    tagged = bool(frame is not None and len(frame) > 2 and frame[2] & ddp.DDP_FLAG_TAGGED
                  and struct.unpack_from("!H", frame)[0] != 0)
    if ae is AE_AMP_UNALLOCATED_STAG:
        if op == _OP_WRITE:
            return TermFields(LAYER_DDP, DDP_TAGGED_BUF, DDP_TAGGED_INV_STAG)
        return TermFields(LAYER_RDMA, RDMAP_REMOTE_PROT, RDMAP_INV_STAG)
    if ae is AE_AMP_BOUNDS_VIOLATION:
        if written:
            return TermFields(LAYER_DDP, DDP_TAGGED_BUF, DDP_TAGGED_BOUNDS)
        return TermFields(LAYER_RDMA, RDMAP_REMOTE_PROT, RDMAP_INV_BOUNDS)
    if ae is AE_AMP_BAD_PD:
        if op == _OP_WRITE:
            return TermFields(LAYER_DDP, DDP_TAGGED_BUF, DDP_TAGGED_UNASSOC_STAG)
        if op in _OP_SEND_INV:
            return TermFields(LAYER_RDMA, RDMAP_REMOTE_PROT, RDMAP_CANT_INV_STAG)
        return TermFields(LAYER_RDMA, RDMAP_REMOTE_PROT, RDMAP_UNASSOC_STAG)
    if ae is AE_AMP_INVALID_STAG:
        return TermFields(LAYER_RDMA, RDMAP_REMOTE_PROT, RDMAP_INV_STAG)
    if ae is AE_AMP_BAD_QP:
        return TermFields(LAYER_DDP, DDP_UNTAGGED_BUF, DDP_UNTAGGED_INV_QN)
    if ae in (AE_AMP_BAD_STAG_KEY, AE_AMP_BAD_STAG_INDEX):
        if op in _OP_SEND_INV:
            return TermFields(LAYER_RDMA, RDMAP_REMOTE_OP, RDMAP_CANT_INV_STAG)
        return TermFields(LAYER_RDMA, RDMAP_REMOTE_OP, RDMAP_INV_STAG)
    if ae in (AE_AMP_RIGHTS_VIOLATION, AE_AMP_INVALIDATE_NO_REMOTE_ACCESS_RIGHTS,
              AE_PRIV_OPERATION_DENIED):
        return TermFields(LAYER_RDMA, RDMAP_REMOTE_PROT, RDMAP_ACCESS)
    if ae is AE_AMP_TO_WRAP:
        return TermFields(LAYER_RDMA, RDMAP_REMOTE_PROT, RDMAP_TO_WRAP)
    if ae is AE_LLP_RECEIVED_MPA_CRC_ERROR:
        return TermFields(LAYER_MPA, DDP_LLP, MPA_CRC)
    if ae in (AE_LLP_SEGMENT_TOO_SMALL, AE_LCE_QP_CATASTROPHIC, AE_DDP_NO_L_BIT):
        return TermFields(LAYER_DDP, DDP_CATASTROPHIC, DDP_CATASTROPHIC_LOCAL)
    if ae is AE_DDP_INVALID_MSN_GAP_IN_MSN:
        return TermFields(LAYER_DDP, DDP_UNTAGGED_BUF, DDP_UNTAGGED_INV_MSN_RANGE)
    if ae is AE_DDP_UBE_DDP_MESSAGE_TOO_LONG_FOR_AVAILABLE_BUFFER:
        return TermFields(LAYER_DDP, DDP_UNTAGGED_BUF, DDP_UNTAGGED_INV_TOO_LONG)
    if ae is AE_DDP_UBE_INVALID_DDP_VERSION:
        if tagged:
            return TermFields(LAYER_DDP, DDP_TAGGED_BUF, DDP_TAGGED_INV_DDP_VER)
        return TermFields(LAYER_DDP, DDP_UNTAGGED_BUF, DDP_UNTAGGED_INV_DDP_VER)
    if ae is AE_DDP_UBE_INVALID_MO:
        return TermFields(LAYER_DDP, DDP_UNTAGGED_BUF, DDP_UNTAGGED_INV_MO)
    if ae is AE_DDP_UBE_INVALID_MSN_NO_BUFFER_AVAILABLE:
        return TermFields(LAYER_DDP, DDP_UNTAGGED_BUF, DDP_UNTAGGED_INV_MSN_NO_BUF)
    if ae is AE_DDP_UBE_INVALID_QN:
        return TermFields(LAYER_DDP, DDP_UNTAGGED_BUF, DDP_UNTAGGED_INV_QN)
    if ae is AE_RDMAP_ROE_INVALID_RDMAP_VERSION:
        return TermFields(LAYER_RDMA, RDMAP_REMOTE_OP, RDMAP_INV_RDMAP_VER)
    return TermFields(LAYER_RDMA, RDMAP_REMOTE_OP, RDMAP_UNSPECIFIED)


def build_terminate(ae: Ae, frame: bytes | None) -> bytes:
    """The Terminate DDP segment irdma sends for ``ae`` (``irdma_bld_terminate_hdr``
    then ``irdma_term_modify_qp(..., IRDMAQP_TERM_SEND_TERM_ONLY, termlen)``)."""
    fields = terminate_fields(ae, frame)
    terminated = frame if frame is not None and len(frame) >= 2 else None
    if terminated is not None:
        # irdma_bld_termhdr_ddp_rdma copies only what the frame holds: cut the copy to
        # the bytes present so that a short frame never asks for more.
        try:
            return ddp.terminate(fields.layer, fields.etype, fields.error_code,
                                 terminated=terminated)
        except ddp.DdpFormatError:
            terminated = terminated[:2]
    return ddp.terminate(fields.layer, fields.etype, fields.error_code,
                         terminated=terminated)


def check_received_terminate(ulpdu: bytes) -> Ae | None:
    """The checks ``irdma_terminate_received`` makes of a Terminate the NIC passed up
    (the DDP segment, from its DDP control byte on): ``None`` when it is well formed, else
    the AE it then reports in a Terminate of its own."""
    if len(ulpdu) < ddp.UNTAGGED_HEADER_LEN:
        return AE_LCE_QP_CATASTROPHIC
    ddp_ctl, rdma_ctl = ulpdu[0], ulpdu[1]
    _, qn, msn, mo = struct.unpack_from("!IIII", ulpdu, 2)
    if ddp_ctl & 0xC0 != 0x40:  # untagged, last
        return AE_LCE_QP_CATASTROPHIC
    if ddp_ctl & ddp.DDP_VERSION_MASK != ddp.DDP_VERSION:
        return AE_DDP_UBE_INVALID_DDP_VERSION
    if qn != ddp.QN_TERMINATE:
        return AE_DDP_UBE_INVALID_QN
    if msn != 1:
        return AE_DDP_INVALID_MSN_GAP_IN_MSN
    if mo != 0:
        return AE_DDP_UBE_INVALID_MO
    if rdma_ctl & ddp.RDMAP_VERSION_MASK != ddp.RDMAP_VERSION << 6:
        return AE_RDMAP_ROE_INVALID_RDMAP_VERSION
    return None


def remote_error(ulpdu: bytes) -> bool:
    """``irdma_terminate_received``: true when the Terminate's Layer/EType byte is an
    RDMAP remote protection or remote operation error (then the driver closes at once,
    ``irdma_terminate_done``); otherwise it starts the terminate timer and sends a FIN."""
    if len(ulpdu) <= ddp.UNTAGGED_HEADER_LEN:
        return False
    return ulpdu[ddp.UNTAGGED_HEADER_LEN] in (RDMAP_REMOTE_PROT, RDMAP_REMOTE_OP)
