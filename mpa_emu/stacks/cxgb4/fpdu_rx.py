"""What the adapter does with an FPDU in RDMA mode, and the codes iw_cxgb4 has for it.

The checks are the firmware's: the driver never sees an FPDU. Which inputs the adapter
refuses is therefore taken from the RFCs the driver's error codes name (t4.h
``T4_ERR_*``, mapped to Terminate codes by qp.c ``build_term_codes``): the MPA CRC when
negotiated (RFC 5044 section 8), the DDP and RDMAP versions (RFC 5041 section 4.2, RFC
5040 section 4.2), the opcode (RFC 5040 section 4.2), a tagged buffer's STag (RFC 5041
section 7.2: no memory is registered in the model, so any STag a non-empty Write or
Read Request names is invalid), an untagged Send's queue number, MSN and buffer (RFC
5041 section 7.2). A refused FPDU becomes an error CQE, which c4iw_ev_dispatch turns
into an IB event and a move of the QP to TERMINATE (see
:func:`mpa_emu.stacks.cxgb4.rdma.rdma_rx`).
"""

from __future__ import annotations

from dataclasses import dataclass

from mpa_emu.wire import ddp
from mpa_emu.wire.mpa import Fpdu

# t4.h: the CQE status values (T4_ERR_*).
T4_ERR_STAG = 0x1
T4_ERR_CRC = 0x10
T4_ERR_PDU_LEN_ERR = 0x12
T4_ERR_OUT_OF_RQE = 0x13
T4_ERR_DDP_VERSION = 0x14
T4_ERR_RDMA_VERSION = 0x15
T4_ERR_OPCODE = 0x16
T4_ERR_DDP_QUEUE_NUM = 0x17
T4_ERR_MO = 0x1A
T4_ERR_MSN_RANGE = 0x1C

STATUS_NAMES = {T4_ERR_STAG: "T4_ERR_STAG", T4_ERR_CRC: "T4_ERR_CRC",
                T4_ERR_PDU_LEN_ERR: "T4_ERR_PDU_LEN_ERR", T4_ERR_OUT_OF_RQE: "T4_ERR_OUT_OF_RQE",
                T4_ERR_DDP_VERSION: "T4_ERR_DDP_VERSION",
                T4_ERR_RDMA_VERSION: "T4_ERR_RDMA_VERSION", T4_ERR_OPCODE: "T4_ERR_OPCODE",
                T4_ERR_DDP_QUEUE_NUM: "T4_ERR_DDP_QUEUE_NUM", T4_ERR_MO: "T4_ERR_MO",
                T4_ERR_MSN_RANGE: "T4_ERR_MSN_RANGE"}

# iw_cxgb4.h: enum c4iw_layers_types and the ecodes build_term_codes uses.
LAYER_RDMAP = 0x00
LAYER_DDP = 0x10
LAYER_MPA = 0x20
RDMAP_LOCAL_CATA = 0x00
RDMAP_REMOTE_PROT = 0x01
RDMAP_REMOTE_OP = 0x02
DDP_LOCAL_CATA = 0x00
DDP_TAGGED_ERR = 0x01
DDP_UNTAGGED_ERR = 0x02
DDP_LLP = 0x03
RDMAP_INV_STAG = 0x00
RDMAP_INV_VERS = 0x05
RDMAP_INV_OPCODE = 0x06
RDMAP_CANT_INV_STAG = 0x09
DDPT_INV_VERS = 0x04
DDPU_INV_QN = 0x01
DDPU_INV_MSN_NOBUF = 0x02
DDPU_INV_MSN_RANGE = 0x03
DDPU_INV_MO = 0x04
DDPU_MSG_TOOBIG = 0x05
DDPU_INV_VERS = 0x06
MPA_CRC_ERR = 0x02

_SENDS = (ddp.Opcode.SEND, ddp.Opcode.SEND_INVALIDATE, ddp.Opcode.SEND_SE,
          ddp.Opcode.SEND_SE_INVALIDATE)


@dataclass(frozen=True, slots=True)
class ErrCqe:
    """The error CQE the adapter writes: ``status`` (T4_ERR_*), ``opcode`` (the
    FW_RI opcode, numbered as RDMAP's), ``rq`` (RQ_TYPE: an inbound operation) and the
    payload length of the FPDU."""

    status: int
    opcode: int
    rq: bool = True
    length: int = 0

    @property
    def name(self) -> str:
        """The status as t4.h names it."""
        return STATUS_NAMES.get(self.status, f"{self.status:#x}")


@dataclass(frozen=True, slots=True)
class Verdict:
    """One FPDU's fate: ``error`` (a refused FPDU), else what it asks for: ``kind`` is
    ``terminate`` (a Terminate arrived: CPL_RDMA_TERMINATE), ``read`` (a zero-length
    Read Request: answer it), ``recv`` (a Send segment placed in a receive buffer of
    ``room`` bytes; ``data``, ``last``), or ``none``."""

    kind: str = "none"
    error: ErrCqe | None = None
    data: bytes = b""
    sink_stag: int = 0
    sink_to: int = 0
    last: bool = True
    room: int = 0


def check(fpdu: Fpdu, *, crc: bool, recvq: list[int], msn: int,
          partial: int | None = None, room: int = 0) -> Verdict:
    """The adapter's checks on one whole FPDU (see the module docstring), in the order
    the layers see it: MPA CRC, DDP version, RDMAP version, opcode, then the operation.
    ``recvq`` holds the posted receive buffers (lengths; a new Send takes one), ``msn``
    the MSN the Send must carry; ``partial`` the bytes a Send in progress has placed in
    its buffer of ``room`` bytes (None between messages)."""
    raw = fpdu.ulpdu
    if len(raw) < 2:
        return Verdict(error=ErrCqe(T4_ERR_PDU_LEN_ERR, 0, length=len(raw)))
    tagged = bool(raw[0] & ddp.DDP_FLAG_TAGGED)
    opcode = raw[1] & ddp.RDMAP_OPCODE_MASK
    if crc and not fpdu.crc_ok:
        return Verdict(error=ErrCqe(T4_ERR_CRC, opcode, length=len(raw)))
    if raw[0] & ddp.DDP_VERSION_MASK != ddp.DDP_VERSION:
        return Verdict(error=ErrCqe(T4_ERR_DDP_VERSION, opcode, length=len(raw)))
    if raw[1] >> 6 != ddp.RDMAP_VERSION:
        return Verdict(error=ErrCqe(T4_ERR_RDMA_VERSION, opcode, length=len(raw)))
    if opcode > ddp.Opcode.TERMINATE:
        return Verdict(error=ErrCqe(T4_ERR_OPCODE, opcode, length=len(raw)))
    if opcode == ddp.Opcode.TERMINATE:
        return Verdict("terminate")
    try:
        seg = ddp.parse_segment(raw)
    except ddp.DdpFormatError:
        return Verdict(error=ErrCqe(T4_ERR_PDU_LEN_ERR, opcode, length=len(raw)))
    size = len(seg.payload)
    if opcode == ddp.Opcode.WRITE and tagged:
        if size:  # RFC 5041 section 7.2: no region has this STag
            return Verdict(error=ErrCqe(T4_ERR_STAG, opcode, length=size))
        return Verdict()
    if opcode == ddp.Opcode.READ_REQUEST and seg.read_request is not None:
        rr = seg.read_request
        if rr.size:  # the source STag names no region
            return Verdict(error=ErrCqe(T4_ERR_STAG, opcode, length=rr.size))
        return Verdict("read", sink_stag=rr.sink_stag, sink_to=rr.sink_to)
    if opcode in _SENDS:
        head = seg.header
        if not isinstance(head, ddp.UntaggedHeader) or head.qn != ddp.QN_SEND:
            return Verdict(error=ErrCqe(T4_ERR_DDP_QUEUE_NUM, opcode, length=size))
        if head.msn != msn:
            return Verdict(error=ErrCqe(T4_ERR_MSN_RANGE, opcode, length=size))
        new = partial is None
        if new:
            if not recvq:
                return Verdict(error=ErrCqe(T4_ERR_OUT_OF_RQE, opcode, length=size))
            room = recvq[0]
        placed = partial or 0
        if head.mo != placed:
            return Verdict(error=ErrCqe(T4_ERR_MO, opcode, length=size))
        if placed + size > room:
            return Verdict(error=ErrCqe(T4_ERR_PDU_LEN_ERR, opcode, length=size))
        if new:
            recvq.pop(0)
        return Verdict("recv", data=bytes(seg.payload), last=head.last, room=room)
    return Verdict()


def build_term_codes(err: ErrCqe | None) -> tuple[int, int]:
    """qp.c ``build_term_codes``: the Terminate's layer/etype byte and ecode for an error
    CQE; without one (``NULL``) RDMAP local catastrophic, 0."""
    if err is None:
        return LAYER_RDMAP | DDP_LOCAL_CATA, 0
    send_inv = err.opcode in (ddp.Opcode.SEND_INVALIDATE, ddp.Opcode.SEND_SE_INVALIDATE)
    tagged = err.opcode == ddp.Opcode.WRITE or (err.rq and err.opcode
                                                 == ddp.Opcode.READ_RESPONSE)
    status = err.status
    if status == T4_ERR_STAG:
        return (LAYER_RDMAP | RDMAP_REMOTE_OP, RDMAP_CANT_INV_STAG) if send_inv \
            else (LAYER_RDMAP | RDMAP_REMOTE_PROT, RDMAP_INV_STAG)
    if status == T4_ERR_OUT_OF_RQE:
        return LAYER_DDP | DDP_UNTAGGED_ERR, DDPU_INV_MSN_NOBUF
    if status == T4_ERR_CRC:
        return LAYER_MPA | DDP_LLP, MPA_CRC_ERR
    if status == T4_ERR_PDU_LEN_ERR:
        return LAYER_DDP | DDP_UNTAGGED_ERR, DDPU_MSG_TOOBIG
    if status == T4_ERR_DDP_VERSION:
        return (LAYER_DDP | DDP_TAGGED_ERR, DDPT_INV_VERS) if tagged \
            else (LAYER_DDP | DDP_UNTAGGED_ERR, DDPU_INV_VERS)
    if status == T4_ERR_RDMA_VERSION:
        return LAYER_RDMAP | RDMAP_REMOTE_OP, RDMAP_INV_VERS
    if status == T4_ERR_OPCODE:
        return LAYER_RDMAP | RDMAP_REMOTE_OP, RDMAP_INV_OPCODE
    if status == T4_ERR_DDP_QUEUE_NUM:
        return LAYER_DDP | DDP_UNTAGGED_ERR, DDPU_INV_QN
    if status == T4_ERR_MSN_RANGE:
        return LAYER_DDP | DDP_UNTAGGED_ERR, DDPU_INV_MSN_RANGE
    if status == T4_ERR_MO:
        return LAYER_DDP | DDP_UNTAGGED_ERR, DDPU_INV_MO
    return LAYER_RDMAP | DDP_LOCAL_CATA, 0


def ib_event(err: ErrCqe) -> str:
    """c4iw_ev_dispatch: the IB event the error CQE raises (a bad inbound Write is
    IB_EVENT_QP_REQ_ERR before the status is looked at)."""
    if err.rq and err.opcode == ddp.Opcode.WRITE:
        return "IB_EVENT_QP_REQ_ERR"
    if err.status in (T4_ERR_STAG,):
        return "IB_EVENT_QP_ACCESS_ERR"
    return "IB_EVENT_QP_FATAL"
