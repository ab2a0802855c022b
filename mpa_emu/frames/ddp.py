"""Scapy layers for DDP segments (RFC 5041) with their RDMAP headers (RFC 5040).

RDMAP's control byte lives in DDP's RsvdULP field, so each DDP layer carries both: the
DDP control bits (``T``, ``L``, ``dv``) and the RDMAP ones (``rv``, ``opcode``).
:class:`DDP` picks :class:`DDPTagged` or :class:`DDPUntagged` from the T bit. Read
Request and Terminate bodies follow as :class:`RDMAPReadRequest` and
:class:`RDMAPTerminate`; Send and Write data as Raw. The byte layout is the one of
:mod:`mpa_emu.wire.ddp`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from scapy.config import conf
from scapy.fields import (
    BitEnumField,
    BitField,
    ConditionalField,
    IntField,
    ShortField,
    StrField,
    StrFixedLenField,
    XIntField,
    XLongField,
)
from scapy.packet import Packet

from mpa_emu.frames.base import GuardedPacket, NoteField
from mpa_emu.wire import ddp as pure

OPCODE_NAMES = {op: name.removeprefix("RDMA ") for op, name in pure.OPCODE_NAMES.items()}
TERM_LAYER_NAMES = {0: "RDMAP", 1: "DDP", 2: "LLP"}


def _control_fields(tagged: int, opcode: int) -> list[Any]:
    return [
        BitField("T", tagged, 1),
        BitField("L", 1, 1),
        BitField("ddp_res", 0, 4),
        BitField("dv", pure.DDP_VERSION, 2),
        BitField("rv", pure.RDMAP_VERSION, 2),
        BitField("rdmap_res", 0, 2),
        BitEnumField("opcode", opcode, 4, OPCODE_NAMES),
    ]


class DDP(Packet):
    """Entry point for a ULPDU: ``DDP(raw)`` returns the tagged or untagged layer."""

    name = "DDP"
    fields_desc: ClassVar[list[Any]] = []

    @classmethod
    def dispatch_hook(cls, _pkt: bytes | None = None, *args: Any, **kargs: Any) -> Any:
        if _pkt and _pkt[0] & pure.DDP_FLAG_TAGGED:
            return DDPTagged
        return DDPUntagged


class DDPTagged(GuardedPacket):
    """Tagged DDP header (RFC 5041 section 4.3) with the RDMAP control byte: Write and
    Read Response. The data to place follows as Raw."""

    name = "DDP tagged / RDMAP"
    fields_desc: ClassVar[list[Any]] = [
        *_control_fields(1, pure.Opcode.WRITE),
        XIntField("stag", 0),
        XLongField("to", 0),
        NoteField("problem"),
    ]

    def required_length(self, s: bytes) -> int:
        return pure.TAGGED_HEADER_LEN

    def diagnose(self) -> list[str]:
        return _control_problems(self, tagged=True)

    def describe(self) -> str:
        return f"DDP/RDMA {OPCODE_NAMES.get(self.opcode, self.opcode)} STag {self.stag:#x}"


class DDPUntagged(GuardedPacket):
    """Untagged DDP header (RFC 5041 section 4.4) with the RDMAP control byte: Send
    variants (``rsvd_ulp`` is the Invalidate STag for the Invalidate ones), Read
    Request, Terminate."""

    name = "DDP untagged / RDMAP"
    fields_desc: ClassVar[list[Any]] = [
        *_control_fields(0, pure.Opcode.SEND),
        XIntField("rsvd_ulp", 0),
        IntField("qn", pure.QN_SEND),
        IntField("msn", 1),
        IntField("mo", 0),
        NoteField("problem"),
    ]

    def required_length(self, s: bytes) -> int:
        return pure.UNTAGGED_HEADER_LEN

    def diagnose(self) -> list[str]:
        return _control_problems(self, tagged=False)

    def guess_payload_class(self, payload: bytes) -> Any:
        if self.truncated:
            return conf.raw_layer
        if self.opcode == pure.Opcode.READ_REQUEST:
            return RDMAPReadRequest
        if self.opcode == pure.Opcode.TERMINATE:
            return RDMAPTerminate
        return conf.raw_layer

    def describe(self) -> str:
        return (f"DDP/RDMA {OPCODE_NAMES.get(self.opcode, self.opcode)} QN {self.qn} "
                f"MSN {self.msn} MO {self.mo}")


def _control_problems(pkt: Packet, tagged: bool) -> list[str]:
    problems = []
    if pkt.dv != pure.DDP_VERSION:
        problems.append(f"DDP version {pkt.dv}, expected {pure.DDP_VERSION} (RFC 5041)")
    if pkt.rv != pure.RDMAP_VERSION:
        problems.append(f"RDMAP version {pkt.rv}, expected {pure.RDMAP_VERSION} (RFC 5040)")
    op = pkt.opcode
    if op not in OPCODE_NAMES:
        problems.append(f"RDMAP opcode {op} undefined")
    elif tagged != (op in (pure.Opcode.WRITE, pure.Opcode.READ_RESPONSE)):
        problems.append(f"{OPCODE_NAMES[op]} in the {'' if tagged else 'un'}tagged model "
                        "(RFC 5040 section 4.2)")
    return problems


class RDMAPReadRequest(GuardedPacket):
    """The RDMA Read Request header (RFC 5040 section 4.4), 28 bytes."""

    name = "RDMAP Read Request"
    fields_desc: ClassVar[list[Any]] = [
        XIntField("sink_stag", pure.RTR_READ_SINK_STAG),
        XLongField("sink_to", 0),
        IntField("size", 0),
        XIntField("src_stag", pure.RTR_READ_SOURCE_STAG),
        XLongField("src_to", 0),
        NoteField("problem"),
    ]

    def required_length(self, s: bytes) -> int:
        return pure.READ_REQUEST_LEN


class TerminatedDDPHeaderField(StrField):
    """The copied DDP header in a Terminate: 14 bytes when its own T bit is set, else 18."""

    def getfield(self, pkt: Packet, s: bytes) -> tuple[bytes, bytes]:
        size = pure.TAGGED_HEADER_LEN if s and s[0] & pure.DDP_FLAG_TAGGED else \
            pure.UNTAGGED_HEADER_LEN
        return s[size:], s[:size]


def _has_segment_length(pkt: Packet) -> bool:
    return bool(pkt.M or pkt.D)


def _has_ddp_header(pkt: Packet) -> bool:
    return bool(pkt.D)


def _has_rdmap_header(pkt: Packet) -> bool:
    return bool(pkt.R)


class RDMAPTerminate(GuardedPacket):
    """The Terminate body (RFC 5040 section 4.8): Layer, EType, Error Code, header
    control bits M, D, R; with M or D the DDP Segment Length, with D the terminated DDP
    header, with R the terminated RDMAP header (28 bytes); see
    :class:`mpa_emu.wire.ddp.TerminateHeader`."""

    name = "RDMAP Terminate"
    fields_desc: ClassVar[list[Any]] = [
        BitEnumField("layer", 0, 4, TERM_LAYER_NAMES),
        BitField("etype", 0, 4),
        BitField("error_code", 0, 8),
        BitField("M", 0, 1),
        BitField("D", 0, 1),
        BitField("R", 0, 1),
        BitField("reserved", 0, 13),
        ConditionalField(ShortField("ddp_segment_length", 0), _has_segment_length),
        ConditionalField(TerminatedDDPHeaderField("ddp_header", b""), _has_ddp_header),
        ConditionalField(StrFixedLenField("rdmap_header", b"", pure.READ_REQUEST_LEN),
                         _has_rdmap_header),
        NoteField("problem"),
    ]

    def required_length(self, s: bytes) -> int:
        need = pure.TERMINATE_CONTROL_LEN
        if len(s) < need:
            return need
        hdrct = s[2]
        if hdrct & (pure.TERM_HDRCT_M | pure.TERM_HDRCT_D):
            need += pure.TERMINATE_SEGMENT_LENGTH_LEN
        if hdrct & pure.TERM_HDRCT_D:
            if len(s) <= need:
                return need + 1
            need += (pure.TAGGED_HEADER_LEN if s[need] & pure.DDP_FLAG_TAGGED
                     else pure.UNTAGGED_HEADER_LEN)
        if hdrct & pure.TERM_HDRCT_R:
            need += pure.READ_REQUEST_LEN
        return need
