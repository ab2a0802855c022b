"""DDP (RFC 5041) and RDMAP (RFC 5040) headers as small typed values, built and parsed
with :mod:`struct`, plus builders for the DDP segments an irdma NIC sends after offload.

This module is on the NIC model's hot path, so it does not touch scapy. The scapy view of
the same bytes lives in :mod:`mpa_emu.frames.ddp`; tests check that both agree byte for
byte and that tshark's ``iwarp_ddp.*``/``iwarp_rdma.*`` fields read them back.

Layout (bit 0 is the most significant bit of byte 0):

* byte 0, DDP control (RFC 5041 section 4.2): T 0x80, L 0x40, reserved 0x3C, DV 0x03.
* byte 1, RsvdULP[0:7], which RDMAP uses as its control field (RFC 5040 section 4.2):
  RV 0xC0, reserved 0x30, opcode 0x0F.
* tagged (T=1, RFC 5041 section 4.3): STag (4), TO (8); 14 bytes in all.
* untagged (T=0, RFC 5041 section 4.4): RsvdULP[8:39] (4; the Invalidate STag for
  Send with Invalidate, RFC 5040 section 4.3), QN (4), MSN (4), MO (4); 18 bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Final, TypedDict

from mpa_emu.errors import MpaEmuError
from mpa_emu.wire.mpa import frame_fpdu

DDP_FLAG_TAGGED: Final = 0x80  # T
DDP_FLAG_LAST: Final = 0x40  # L
DDP_RESERVED_MASK: Final = 0x3C
DDP_VERSION_MASK: Final = 0x03
RDMAP_VERSION_MASK: Final = 0xC0
RDMAP_RESERVED_MASK: Final = 0x30
RDMAP_OPCODE_MASK: Final = 0x0F

DDP_VERSION: Final = 1  # RFC 5041 section 4.2: DV is 01b
RDMAP_VERSION: Final = 1  # RFC 5040 section 4.2: RV is 01b; irdma_cm_init_tsa_conn sets both to 1

TAGGED_HEADER_LEN: Final = 14
UNTAGGED_HEADER_LEN: Final = 18
READ_REQUEST_LEN: Final = 28  # RFC 5040 section 4.4
TERMINATE_CONTROL_LEN: Final = 4  # RFC 5040 section 4.8
TERMINATE_SEGMENT_LENGTH_LEN: Final = 2

# RFC 5040 section 5.1: the untagged queues RDMAP uses.
QN_SEND: Final = 0
QN_READ_REQUEST: Final = 1
QN_TERMINATE: Final = 2

# irdma_sc_send_rtt: the zero-length RDMA READ used as RTR (ctrl.c; RFC 6581 section 5).
RTR_READ_SINK_STAG: Final = 0xABCD
RTR_READ_SOURCE_STAG: Final = 0x1234

# RFC 5040 section 4.8, Terminate control header-control bits (third byte).
TERM_HDRCT_M: Final = 0x80  # DDP Segment Length valid
TERM_HDRCT_D: Final = 0x40  # Terminated DDP header included
TERM_HDRCT_R: Final = 0x20  # Terminated RDMAP header included


class Opcode(IntEnum):
    """RDMAP opcodes (RFC 5040 section 4.2, table 1); names as tshark shows them."""

    WRITE = 0
    READ_REQUEST = 1
    READ_RESPONSE = 2
    SEND = 3
    SEND_INVALIDATE = 4
    SEND_SE = 5
    SEND_SE_INVALIDATE = 6
    TERMINATE = 7


OPCODE_NAMES: Final[dict[int, str]] = {
    Opcode.WRITE: "RDMA Write",
    Opcode.READ_REQUEST: "RDMA Read Request",
    Opcode.READ_RESPONSE: "RDMA Read Response",
    Opcode.SEND: "Send",
    Opcode.SEND_INVALIDATE: "Send with Invalidate",
    Opcode.SEND_SE: "Send with SE",
    Opcode.SEND_SE_INVALIDATE: "Send with SE and Invalidate",
    Opcode.TERMINATE: "Terminate",
}
"""The name of each RDMAP opcode (RFC 5040 section 4.2, table 1), as reports print it.
The scapy layer drops the ``RDMA`` prefix, as tshark's opcode field does."""


class TermLayer(IntEnum):
    """The Layer nibble of a Terminate (RFC 5040 section 4.8)."""

    RDMAP = 0
    DDP = 1
    LLP = 2


class DdpFormatError(MpaEmuError, ValueError):
    """Bytes too short or inconsistent to be the DDP/RDMAP header asked for."""


def _control(tagged: bool, last: bool, opcode: int, ddp_version: int, rdmap_version: int,
             ddp_reserved: int, rdmap_reserved: int) -> bytes:
    ddp = (DDP_FLAG_TAGGED if tagged else 0) | (DDP_FLAG_LAST if last else 0)
    ddp |= (ddp_reserved << 2) & DDP_RESERVED_MASK
    ddp |= ddp_version & DDP_VERSION_MASK
    rdmap = ((rdmap_version << 6) & RDMAP_VERSION_MASK) | ((rdmap_reserved << 4) & 0x30)
    rdmap |= opcode & RDMAP_OPCODE_MASK
    return bytes((ddp, rdmap))


class _ControlFields(TypedDict):
    opcode: int
    last: bool
    ddp_version: int
    rdmap_version: int
    ddp_reserved: int
    rdmap_reserved: int


def _control_fields(ddp: int, rdmap: int) -> _ControlFields:
    """The inverse of :func:`_control`: the header fields the two control bytes carry."""
    return _ControlFields(opcode=rdmap & RDMAP_OPCODE_MASK, last=bool(ddp & DDP_FLAG_LAST),
                          ddp_version=ddp & DDP_VERSION_MASK, rdmap_version=rdmap >> 6,
                          ddp_reserved=(ddp & DDP_RESERVED_MASK) >> 2,
                          rdmap_reserved=(rdmap & RDMAP_RESERVED_MASK) >> 4)


@dataclass(slots=True, unsafe_hash=True)
class TaggedHeader:
    """A tagged DDP header with its RDMAP control byte (14 bytes): Write, Read Response."""

    opcode: int
    stag: int
    to: int
    last: bool = True
    ddp_version: int = DDP_VERSION
    rdmap_version: int = RDMAP_VERSION
    ddp_reserved: int = 0
    rdmap_reserved: int = 0

    def __init__(self, opcode: int, stag: int, to: int, last: bool = True, ddp_version: int = 1,
                 rdmap_version: int = 1, ddp_reserved: int = 0,
                 rdmap_reserved: int = 0) -> None:
        self.opcode = opcode
        self.stag = stag
        self.to = to
        self.last = last
        self.ddp_version = ddp_version
        self.rdmap_version = rdmap_version
        self.ddp_reserved = ddp_reserved
        self.rdmap_reserved = rdmap_reserved

    def to_bytes(self) -> bytes:
        """Serialise: control bytes, STag (u32 BE), TO (u64 BE)."""
        ctl = _control(True, self.last, self.opcode, self.ddp_version, self.rdmap_version,
                       self.ddp_reserved, self.rdmap_reserved)
        return ctl + struct.pack("!IQ", self.stag & 0xFFFFFFFF, self.to & 0xFFFFFFFFFFFFFFFF)

    @classmethod
    def from_bytes(cls, raw: bytes) -> TaggedHeader:
        """Parse the first 14 bytes of ``raw``; the T bit must be set."""
        if len(raw) < TAGGED_HEADER_LEN:
            raise DdpFormatError(f"tagged DDP header needs {TAGGED_HEADER_LEN} bytes, "
                                 f"got {len(raw)}")
        ddp, rdmap = raw[0], raw[1]
        if not ddp & DDP_FLAG_TAGGED:
            raise DdpFormatError("T bit clear: this is an untagged DDP header")
        stag, to = struct.unpack_from("!IQ", raw, 2)
        return cls(stag=stag, to=to, **_control_fields(ddp, rdmap))


@dataclass(slots=True, unsafe_hash=True)
class UntaggedHeader:
    """An untagged DDP header with its RDMAP control byte (18 bytes): Send variants,
    Read Request, Terminate. ``rsvd_ulp`` is RsvdULP[8:39]: the Invalidate STag for the
    Send-with-Invalidate opcodes, zero otherwise (RFC 5040 section 4.3)."""

    opcode: int
    qn: int
    msn: int
    mo: int = 0
    last: bool = True
    rsvd_ulp: int = 0
    ddp_version: int = DDP_VERSION
    rdmap_version: int = RDMAP_VERSION
    ddp_reserved: int = 0
    rdmap_reserved: int = 0

    def __init__(self, opcode: int, qn: int, msn: int, mo: int = 0, last: bool = True,
                 rsvd_ulp: int = 0, ddp_version: int = 1, rdmap_version: int = 1,
                 ddp_reserved: int = 0, rdmap_reserved: int = 0) -> None:
        self.opcode = opcode
        self.qn = qn
        self.msn = msn
        self.mo = mo
        self.last = last
        self.rsvd_ulp = rsvd_ulp
        self.ddp_version = ddp_version
        self.rdmap_version = rdmap_version
        self.ddp_reserved = ddp_reserved
        self.rdmap_reserved = rdmap_reserved

    def to_bytes(self) -> bytes:
        """Serialise: control bytes, RsvdULP, QN, MSN, MO (each u32 BE)."""
        ctl = _control(False, self.last, self.opcode, self.ddp_version, self.rdmap_version,
                       self.ddp_reserved, self.rdmap_reserved)
        return ctl + struct.pack("!IIII", self.rsvd_ulp & 0xFFFFFFFF, self.qn & 0xFFFFFFFF,
                                 self.msn & 0xFFFFFFFF, self.mo & 0xFFFFFFFF)

    @classmethod
    def from_bytes(cls, raw: bytes) -> UntaggedHeader:
        """Parse the first 18 bytes of ``raw``; the T bit must be clear."""
        if len(raw) < UNTAGGED_HEADER_LEN:
            raise DdpFormatError(f"untagged DDP header needs {UNTAGGED_HEADER_LEN} bytes, "
                                 f"got {len(raw)}")
        ddp, rdmap = raw[0], raw[1]
        if ddp & DDP_FLAG_TAGGED:
            raise DdpFormatError("T bit set: this is a tagged DDP header")
        rsvd_ulp, qn, msn, mo = struct.unpack_from("!IIII", raw, 2)
        return cls(qn=qn, msn=msn, mo=mo, rsvd_ulp=rsvd_ulp, **_control_fields(ddp, rdmap))


@dataclass(slots=True, unsafe_hash=True)
class ReadRequest:
    """The RDMA Read Request header after the untagged DDP header (RFC 5040 section 4.4)."""

    sink_stag: int
    sink_to: int
    size: int
    src_stag: int
    src_to: int

    def __init__(self, sink_stag: int, sink_to: int, size: int, src_stag: int,
                 src_to: int) -> None:
        self.sink_stag = sink_stag
        self.sink_to = sink_to
        self.size = size
        self.src_stag = src_stag
        self.src_to = src_to

    def to_bytes(self) -> bytes:
        """Sink STag, sink TO, RDMA read message size, source STag, source TO."""
        return struct.pack("!IQIIQ", self.sink_stag & 0xFFFFFFFF,
                           self.sink_to & 0xFFFFFFFFFFFFFFFF, self.size & 0xFFFFFFFF,
                           self.src_stag & 0xFFFFFFFF, self.src_to & 0xFFFFFFFFFFFFFFFF)

    @classmethod
    def from_bytes(cls, raw: bytes) -> ReadRequest:
        """Parse the first 28 bytes of ``raw``."""
        if len(raw) < READ_REQUEST_LEN:
            raise DdpFormatError(f"RDMA Read Request header needs {READ_REQUEST_LEN} bytes, "
                                 f"got {len(raw)}")
        sink_stag, sink_to, size, src_stag, src_to = struct.unpack_from("!IQIIQ", raw)
        return cls(sink_stag=sink_stag, sink_to=sink_to, size=size, src_stag=src_stag,
                   src_to=src_to)


@dataclass(frozen=True, slots=True)
class TerminateHeader:
    """The Terminate message body (RFC 5040 section 4.8).

    The control word is Layer (4 bits), EType (4), Error Code (8), the header-control bits
    M, D, R and 13 reserved bits. Then, in order: the DDP Segment Length (the MPA
    ULPDU_LENGTH of the offending segment, 2 bytes) when M or D is set, the terminated
    DDP header when D is set, the terminated RDMAP header (28 bytes) when R is set.
    irdma writes the length whenever it sets M (``irdma_bld_termhdr_ddp_rdma``, which may
    set M alone for a short segment); Wireshark reads it whenever D is set.
    """

    layer: int
    etype: int
    error_code: int
    m: bool = False
    ddp_segment_length: int = 0
    ddp_header: bytes | None = None
    rdmap_header: bytes | None = None
    reserved: int = 0

    @property
    def hdrct(self) -> int:
        """The three header-control bits, in their byte position (M 0x80, D 0x40, R 0x20)."""
        bits = TERM_HDRCT_M if self.m else 0
        bits |= TERM_HDRCT_D if self.ddp_header is not None else 0
        bits |= TERM_HDRCT_R if self.rdmap_header is not None else 0
        return bits

    def to_bytes(self) -> bytes:
        """Serialise the control word and the included headers."""
        word = ((self.layer & 0xF) << 28) | ((self.etype & 0xF) << 24)
        word |= (self.error_code & 0xFF) << 16
        word |= self.hdrct << 8 | (self.reserved & 0x1FFF)
        out = struct.pack("!I", word)
        if self.m or self.ddp_header is not None:
            out += struct.pack("!H", self.ddp_segment_length & 0xFFFF)
        if self.ddp_header is not None:
            out += self.ddp_header
        if self.rdmap_header is not None:
            out += self.rdmap_header
        return out

    @classmethod
    def from_bytes(cls, raw: bytes) -> TerminateHeader:
        """Parse a Terminate body; the terminated DDP header is 14 bytes when its own T bit
        is set, else 18."""
        if len(raw) < TERMINATE_CONTROL_LEN:
            raise DdpFormatError(f"Terminate needs {TERMINATE_CONTROL_LEN} bytes, "
                                 f"got {len(raw)}")
        (word,) = struct.unpack_from("!I", raw)
        hdrct = (word >> 8) & 0xE0
        pos = TERMINATE_CONTROL_LEN
        seg_len = 0
        ddp_header: bytes | None = None
        rdmap_header: bytes | None = None
        if hdrct & (TERM_HDRCT_M | TERM_HDRCT_D):
            if len(raw) < pos + TERMINATE_SEGMENT_LENGTH_LEN:
                raise DdpFormatError("Terminate M/D bit set but no DDP Segment Length")
            (seg_len,) = struct.unpack_from("!H", raw, pos)
            pos += TERMINATE_SEGMENT_LENGTH_LEN
        if hdrct & TERM_HDRCT_D:
            if len(raw) <= pos:
                raise DdpFormatError("Terminate D bit set but no terminated DDP header")
            size = TAGGED_HEADER_LEN if raw[pos] & DDP_FLAG_TAGGED else UNTAGGED_HEADER_LEN
            if len(raw) < pos + size:
                raise DdpFormatError(f"terminated DDP header needs {size} bytes, "
                                     f"got {len(raw) - pos}")
            ddp_header = bytes(raw[pos:pos + size])
            pos += size
        if hdrct & TERM_HDRCT_R:
            if len(raw) < pos + READ_REQUEST_LEN:
                raise DdpFormatError(f"terminated RDMAP header needs {READ_REQUEST_LEN} "
                                     f"bytes, got {len(raw) - pos}")
            rdmap_header = bytes(raw[pos:pos + READ_REQUEST_LEN])
        return cls(layer=word >> 28, etype=(word >> 24) & 0xF, error_code=(word >> 16) & 0xFF,
                   m=bool(hdrct & TERM_HDRCT_M), ddp_segment_length=seg_len,
                   ddp_header=ddp_header, rdmap_header=rdmap_header, reserved=word & 0x1FFF)


@dataclass(slots=True, unsafe_hash=True)
class DdpSegment:
    """One parsed DDP segment: its header, the RDMAP body for Read Request and Terminate,
    and the ULP payload that follows."""

    header: TaggedHeader | UntaggedHeader
    read_request: ReadRequest | None = None
    terminate: TerminateHeader | None = None
    payload: bytes = b""

    def __init__(self, header: TaggedHeader | UntaggedHeader,
                 read_request: ReadRequest | None = None,
                 terminate: TerminateHeader | None = None, payload: bytes = b"") -> None:
        self.header = header
        self.read_request = read_request
        self.terminate = terminate
        self.payload = payload

    @property
    def opcode(self) -> int:
        """The RDMAP opcode."""
        return self.header.opcode

    @property
    def tagged(self) -> bool:
        """True for the tagged buffer model."""
        return isinstance(self.header, TaggedHeader)


def parse_segment(ulpdu: bytes) -> DdpSegment:
    """Parse a DDP segment (an FPDU's ULPDU). Raise :class:`DdpFormatError` on short data."""
    if not ulpdu:
        raise DdpFormatError("empty ULPDU: no DDP header")
    if ulpdu[0] & DDP_FLAG_TAGGED:
        tagged = TaggedHeader.from_bytes(ulpdu)
        return DdpSegment(header=tagged, payload=bytes(ulpdu[TAGGED_HEADER_LEN:]))
    untagged = UntaggedHeader.from_bytes(ulpdu)
    body = bytes(ulpdu[UNTAGGED_HEADER_LEN:])
    if untagged.opcode == Opcode.READ_REQUEST:
        rr = ReadRequest.from_bytes(body)
        return DdpSegment(header=untagged, read_request=rr, payload=body[READ_REQUEST_LEN:])
    if untagged.opcode == Opcode.TERMINATE:
        term = TerminateHeader.from_bytes(body)
        return DdpSegment(header=untagged, terminate=term,
                          payload=body[len(term.to_bytes()):])
    return DdpSegment(header=untagged, payload=body)


# ---- what irdma's NIC sends ------------------------------------------------------------
# These builders run per message in the NIC model, so they pack straight from ints with
# precompiled structs (DDP and RDMAP version 1, reserved bits zero) instead of going
# through the header values above; tests check both give the same bytes.

_UNTAGGED: Final = struct.Struct("!BBIIII")
_TAGGED: Final = struct.Struct("!BBIQ")
_DDP_UNTAGGED_CTL: Final = (DDP_FLAG_LAST | DDP_VERSION, DDP_VERSION)  # indexed by "not last"
_DDP_TAGGED_CTL: Final = (DDP_FLAG_TAGGED | DDP_FLAG_LAST | DDP_VERSION,
                   DDP_FLAG_TAGGED | DDP_VERSION)
_RDMAP_CTL: Final = RDMAP_VERSION << 6
_READ_RTR_BODY: Final = ReadRequest(sink_stag=RTR_READ_SINK_STAG, sink_to=0, size=0,
                             src_stag=RTR_READ_SOURCE_STAG, src_to=0).to_bytes()
_WRITE_RTR: Final = _TAGGED.pack(_DDP_TAGGED_CTL[0], _RDMAP_CTL | Opcode.WRITE, 0, 0)


def _untagged(opcode: int, qn: int, msn: int, mo: int, last: bool, rsvd_ulp: int) -> bytes:
    return _UNTAGGED.pack(_DDP_UNTAGGED_CTL[not last], _RDMAP_CTL | opcode,
                          rsvd_ulp & 0xFFFFFFFF, qn & 0xFFFFFFFF, msn & 0xFFFFFFFF,
                          mo & 0xFFFFFFFF)


def _tagged(opcode: int, stag: int, to: int, last: bool) -> bytes:
    return _TAGGED.pack(_DDP_TAGGED_CTL[not last], _RDMAP_CTL | opcode, stag & 0xFFFFFFFF,
                        to & 0xFFFFFFFFFFFFFFFF)


def read_rtr(msn: int = 1) -> bytes:
    """The zero-length RDMA Read Request the initiator sends as RTR (``irdma_sc_send_rtt``
    with read0): untagged QN 1, MSN ``msn`` (the first message on a queue has MSN 1,
    RFC 5041 section 5.1), sink STag 0xabcd, source STag 0x1234, TOs 0, size 0."""
    return _untagged(1, QN_READ_REQUEST, msn, 0, True, 0) + _READ_RTR_BODY


def write_rtr() -> bytes:
    """The zero-length RDMA Write the initiator sends as RTR (``irdma_sc_send_rtt`` without
    read0): tagged, STag 0, TO 0, no payload."""
    return _WRITE_RTR


def send(payload: bytes, msn: int, mo: int = 0, *, last: bool = True,
         solicited: bool = False, invalidate_stag: int | None = None) -> bytes:
    """An RDMA Send segment (untagged, QN 0). ``solicited`` picks the SE opcodes,
    ``invalidate_stag`` the with-Invalidate ones (RFC 5040 section 4.3)."""
    if invalidate_stag is None:
        opcode = 5 if solicited else 3  # Send with SE, Send
        return _untagged(opcode, QN_SEND, msn, mo, last, 0) + payload
    opcode = 6 if solicited else 4  # Send with SE and Invalidate, Send with Invalidate
    return _untagged(opcode, QN_SEND, msn, mo, last, invalidate_stag) + payload


def rdma_write(payload: bytes, stag: int, to: int, *, last: bool = True) -> bytes:
    """An RDMA Write segment (tagged)."""
    return _tagged(0, stag, to, last) + payload


def read_response(payload: bytes, stag: int, to: int, *, last: bool = True) -> bytes:
    """An RDMA Read Response segment (tagged, STag/TO of the requester's sink buffer)."""
    return _tagged(2, stag, to, last) + payload


def terminate(layer: int, etype: int, error_code: int, *, msn: int = 1,
              terminated: bytes | None = None) -> bytes:
    """A Terminate segment (untagged, QN 2, RFC 5040 section 4.8).

    ``terminated`` is the offending FPDU from its ULPDU_LENGTH field on, or ``None``. What
    is copied follows ``irdma_bld_termhdr_ddp_rdma``: nothing when ULPDU_LENGTH is 0;
    otherwise the length (M), the DDP header when ULPDU_LENGTH covers it (D: 14 bytes
    tagged, 18 untagged), and for an untagged Read Request of at least 18 + 28 bytes its
    RDMAP header (R). Raises :class:`DdpFormatError` if ``terminated`` holds fewer bytes
    than that copy needs.
    """
    head = _untagged(Opcode.TERMINATE, QN_TERMINATE, msn, 0, True, 0)
    if terminated is None or len(terminated) < 2:
        if terminated is not None:
            raise DdpFormatError("terminated segment needs its 2-byte ULPDU_LENGTH")
        return head + TerminateHeader(layer, etype, error_code).to_bytes()
    (seg_len,) = struct.unpack_from("!H", terminated)
    if seg_len == 0:
        return head + TerminateHeader(layer, etype, error_code).to_bytes()
    ulpdu = terminated[2:]
    ddp_size = 0
    rdmap_size = 0
    if ulpdu and ulpdu[0] & DDP_FLAG_TAGGED:
        ddp_size = TAGGED_HEADER_LEN if seg_len >= TAGGED_HEADER_LEN else 0
    elif ulpdu:
        ddp_size = UNTAGGED_HEADER_LEN if seg_len >= UNTAGGED_HEADER_LEN else 0
        if (seg_len >= UNTAGGED_HEADER_LEN + READ_REQUEST_LEN
                and ulpdu[1] & RDMAP_OPCODE_MASK == Opcode.READ_REQUEST):
            rdmap_size = READ_REQUEST_LEN
    if len(ulpdu) < ddp_size + rdmap_size:
        raise DdpFormatError(f"terminated segment holds {len(ulpdu)} bytes after its "
                             f"length, {ddp_size + rdmap_size} needed")
    body = TerminateHeader(
        layer, etype, error_code, m=True, ddp_segment_length=seg_len,
        ddp_header=bytes(ulpdu[:ddp_size]) if ddp_size else None,
        rdmap_header=bytes(ulpdu[ddp_size:ddp_size + rdmap_size]) if rdmap_size else None)
    return head + body.to_bytes()


def fpdu(ulpdu: bytes) -> bytes:
    """Frame a DDP segment as an FPDU with its CRC32c (see :func:`mpa_emu.wire.mpa.frame_fpdu`)."""
    return frame_fpdu(ulpdu)
