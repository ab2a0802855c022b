"""MPA wire format as pure functions: request/reply frames (RFC 5044 section 7.1),
the RFC 6581 enhanced connection data, and FPDU framing with CRC32c (RFC 5044 section 4).

This module knows the bytes, not irdma's policy: the checks and reactions of
``irdma_parse_mpa`` and ``irdma_negotiate_mpa_v2_ird_ord`` live in the CM.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final, Literal

import crc32c as _crc32c

from mpa_emu.errors import MpaEmuError

KEY_REQ: Final = b"MPA ID Req Frame"
KEY_REP: Final = b"MPA ID Rep Frame"
KEY_SIZE: Final = 16  # IETF_MPA_KEY_SIZE
FRAME_SIZE: Final = 20  # IETF_MPA_FRAME_SIZE: key + flags + rev + PD_Length
RTR_MSG_SIZE: Final = 4  # IETF_RTR_MSG_SIZE: the RFC 6581 block
MAX_PRIV_DATA_LEN: Final = 512  # IETF_MAX_PRIV_DATA_LEN (RFC 5044 section 7.1)

# Byte 16 of the frame (RFC 5044 section 7.1; 0x10 from RFC 6581 section 5).
FLAG_MARKERS: Final = 0x80  # M
FLAG_CRC: Final = 0x40  # C
FLAG_REJECT: Final = 0x20  # R
FLAG_ENHANCED: Final = 0x10  # S: IETF_MPA_V2_FLAG in cm.h
FLAG_RESERVED: Final = 0x0F

# RFC 6581 section 5: the IRD word carries A and B, the ORD word C and D.
RTR_PEER_TO_PEER: Final = 0x8000  # A, IETF_PEER_TO_PEER (IRD word)
RTR_ZERO_LEN_SEND: Final = 0x4000  # B, IETF_FLPDU_ZERO_LEN (IRD word)
RTR_WRITE0: Final = 0x8000  # C, IETF_RDMA0_WRITE (ORD word)
RTR_READ0: Final = 0x4000  # D, IETF_RDMA0_READ (ORD word)
IRD_ORD_MASK: Final = 0x3FFF  # IETF_NO_IRD_ORD: irdma reads 0x3FFF as "no value"


class MpaFormatError(MpaEmuError, ValueError):
    """Bytes that cannot be an MPA request/reply frame at all."""


@dataclass(slots=True, unsafe_hash=True)
class RtrBlock:
    """The 4-byte RFC 6581 Enhanced RDMA Connection Establishment Data."""

    ird: int
    ord: int
    peer_to_peer: bool = True
    zero_len_send: bool = False
    write0: bool = False
    read0: bool = False

    def __init__(self, ird: int, ord: int, peer_to_peer: bool = True,
                 zero_len_send: bool = False, write0: bool = False,
                 read0: bool = False) -> None:
        self.ird = ird
        self.ord = ord
        self.peer_to_peer = peer_to_peer
        self.zero_len_send = zero_len_send
        self.write0 = write0
        self.read0 = read0

    def to_bytes(self) -> bytes:
        """Two big-endian u16 words: A|B|IRD, C|D|ORD."""
        ird_word = (self.ird & IRD_ORD_MASK) | (RTR_PEER_TO_PEER if self.peer_to_peer else 0)
        ird_word |= RTR_ZERO_LEN_SEND if self.zero_len_send else 0
        ord_word = (self.ord & IRD_ORD_MASK) | (RTR_WRITE0 if self.write0 else 0)
        ord_word |= RTR_READ0 if self.read0 else 0
        return struct.pack("!HH", ird_word, ord_word)

    @classmethod
    def from_bytes(cls, raw: bytes) -> RtrBlock:
        """Parse the first 4 bytes of ``raw``."""
        if len(raw) < RTR_MSG_SIZE:
            raise MpaFormatError(f"RFC 6581 block needs 4 bytes, got {len(raw)}")
        ird_word, ord_word = struct.unpack_from("!HH", raw)
        return cls(
            ird=ird_word & IRD_ORD_MASK,
            ord=ord_word & IRD_ORD_MASK,
            peer_to_peer=bool(ird_word & RTR_PEER_TO_PEER),
            zero_len_send=bool(ird_word & RTR_ZERO_LEN_SEND),
            write0=bool(ord_word & RTR_WRITE0),
            read0=bool(ord_word & RTR_READ0),
        )


@dataclass(slots=True, unsafe_hash=True)
class MpaFrame:
    """An MPA request or reply as it sits in a TCP payload.

    ``private_data`` is the ULP private data *after* the RFC 6581 block; ``rtr`` is that
    block when present. On the wire PD_Length counts both (RFC 6581 section 5), unless
    ``pd_length`` overrides it (for building deliberately broken frames).
    """

    request: bool
    rev: int
    flags: int = FLAG_CRC
    rtr: RtrBlock | None = None
    private_data: bytes = b""
    pd_length: int | None = None

    def __init__(self, request: bool, rev: int, flags: int = 64, rtr: RtrBlock | None = None,
                 private_data: bytes = b"", pd_length: int | None = None) -> None:
        self.request = request
        self.rev = rev
        self.flags = flags
        self.rtr = rtr
        self.private_data = private_data
        self.pd_length = pd_length

    @property
    def key(self) -> bytes:
        """The 16-byte key."""
        return KEY_REQ if self.request else KEY_REP

    @property
    def reject(self) -> bool:
        """The R flag."""
        return bool(self.flags & FLAG_REJECT)

    @property
    def wire_pd_length(self) -> int:
        """PD_Length as written: private data plus the RFC 6581 block."""
        if self.pd_length is not None:
            return self.pd_length
        return len(self.private_data) + (RTR_MSG_SIZE if self.rtr is not None else 0)

    def to_bytes(self) -> bytes:
        """Serialise: key, flags, rev, PD_Length (big-endian), block, private data."""
        head = self.key + struct.pack("!BBH", self.flags & 0xFF, self.rev & 0xFF,
                                      self.wire_pd_length & 0xFFFF)
        block = self.rtr.to_bytes() if self.rtr is not None else b""
        return head + block + self.private_data


@dataclass(slots=True, unsafe_hash=True)
class MpaHeader:
    """The fixed 20 bytes of a received frame, before any policy is applied."""

    key: bytes
    flags: int
    rev: int
    pd_length: int

    def __init__(self, key: bytes, flags: int, rev: int, pd_length: int) -> None:
        self.key = key
        self.flags = flags
        self.rev = rev
        self.pd_length = pd_length

    @property
    def is_request(self) -> bool:
        """Key equals "MPA ID Req Frame"."""
        return self.key == KEY_REQ

    @property
    def is_reply(self) -> bool:
        """Key equals "MPA ID Rep Frame"."""
        return self.key == KEY_REP


def parse_header(payload: bytes) -> MpaHeader:
    """Read the 20-byte MPA header at the start of ``payload``.

    Raises :class:`MpaFormatError` when fewer than 20 bytes are present. The key is not
    checked here: callers decide what a wrong key means.
    """
    if len(payload) < FRAME_SIZE:
        raise MpaFormatError(f"MPA frame needs {FRAME_SIZE} bytes, got {len(payload)}")
    flags, rev, pd_length = struct.unpack_from("!BBH", payload, KEY_SIZE)
    return MpaHeader(key=bytes(payload[:KEY_SIZE]), flags=flags, rev=rev, pd_length=pd_length)


def looks_like_mpa(payload: bytes) -> bool:
    """True when a TCP payload starts with a request or reply key and has 20 bytes
    (the recognition rule of Wireshark's heuristic dissector)."""
    return len(payload) >= FRAME_SIZE and payload[:KEY_SIZE] in (KEY_REQ, KEY_REP)


MpaKind = Literal["request", "reply", "reject", "data", ""]
"""What a TCP payload is in MPA terms (:func:`mpa_kind`)."""


def mpa_kind(payload: bytes) -> MpaKind:
    """"request", "reply" or "reject" for a payload that starts with an MPA frame header
    (RFC 5044 section 7.1: the key, then R in the flags byte), "data" for any other
    payload and "" for none."""
    if not payload:
        return ""
    key = payload[:KEY_SIZE]
    if len(payload) >= FRAME_SIZE and key in (KEY_REQ, KEY_REP):
        if key == KEY_REQ:
            return "request"
        return "reject" if payload[KEY_SIZE] & FLAG_REJECT else "reply"
    return "data"


def decode_frame(payload: bytes) -> MpaFrame:
    """Decode a complete frame leniently (RFC 6581 block when rev is 2 and S is set).

    Raises :class:`MpaFormatError` for a bad key, a short header, or PD_Length larger
    than the bytes present.
    """
    head = parse_header(payload)
    if not (head.is_request or head.is_reply):
        raise MpaFormatError(f"not an MPA key: {head.key!r}")
    end = FRAME_SIZE + head.pd_length
    if end > len(payload):
        raise MpaFormatError(
            f"PD_Length {head.pd_length} needs {end} bytes, only {len(payload)} present")
    body = bytes(payload[FRAME_SIZE:end])
    rtr = None
    if head.rev == 2 and head.flags & FLAG_ENHANCED and len(body) >= RTR_MSG_SIZE:
        rtr = RtrBlock.from_bytes(body)
        body = body[RTR_MSG_SIZE:]
    return MpaFrame(request=head.is_request, rev=head.rev, flags=head.flags, rtr=rtr,
                    private_data=body, pd_length=head.pd_length)


# ---- FPDU framing (RFC 5044 section 4.1) ----------------------------------------

def crc32c(data: bytes) -> int:
    """CRC32c (Castagnoli) of ``data``."""
    return int(_crc32c.crc32c(data))


def fpdu_pad_len(ulpdu_len: int) -> int:
    """PAD so that ULPDU_LENGTH field + ULPDU + PAD is a multiple of 4."""
    return (-(2 + ulpdu_len)) % 4


def frame_fpdu(ulpdu: bytes, crc: int | None = None) -> bytes:
    """Wrap a DDP segment as an FPDU: ULPDU_LENGTH, ULPDU, PAD, CRC32c.

    The CRC is the standard CRC32c value written little-endian, as siw does and
    Wireshark checks (spec wireshark-mpa section 2). ``crc`` overrides the computed value.
    """
    body = struct.pack("!H", len(ulpdu)) + ulpdu + b"\x00" * fpdu_pad_len(len(ulpdu))
    value = crc32c(body) if crc is None else crc
    return body + struct.pack("<I", value & 0xFFFFFFFF)


@dataclass(slots=True, unsafe_hash=True)
class Fpdu:
    """A received FPDU without markers."""

    ulpdu: bytes
    pad: bytes
    crc: int
    crc_ok: bool

    def __init__(self, ulpdu: bytes, pad: bytes, crc: int, crc_ok: bool) -> None:
        self.ulpdu = ulpdu
        self.pad = pad
        self.crc = crc
        self.crc_ok = crc_ok

    @property
    def wire_length(self) -> int:
        """Bytes the FPDU takes on the stream."""
        return 2 + len(self.ulpdu) + len(self.pad) + 4


def unframe_fpdu(data: bytes) -> Fpdu:
    """Parse one FPDU at the start of ``data``; raise :class:`MpaFormatError` if short."""
    if len(data) < 2:
        raise MpaFormatError("FPDU needs at least the 2-byte ULPDU_LENGTH")
    (ulen,) = struct.unpack_from("!H", data)
    pad = fpdu_pad_len(ulen)
    end = 2 + ulen + pad
    if end + 4 > len(data):
        raise MpaFormatError(f"FPDU of ULPDU_LENGTH {ulen} needs {end + 4} bytes, "
                             f"only {len(data)} present")
    (crc,) = struct.unpack_from("<I", data, end)
    return Fpdu(ulpdu=bytes(data[2:2 + ulen]), pad=bytes(data[2 + ulen:end]), crc=crc,
                crc_ok=crc32c(bytes(data[:end])) == crc)
