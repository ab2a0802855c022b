"""Scapy layers for the MPA request and reply frames (RFC 5044 section 7.1) with the
RFC 6581 Enhanced RDMA Connection Establishment block.

Byte 16 carries M, C, R and the RFC 6581 flag S (``flags``, scapy style: ``flags="CS"``)
and four reserved bits (``res``). For rev 2 with S set, the first four bytes of the private
data are the RFC 6581 block (``p2p``, ``zero_len_send``, ``ird``; ``write0``, ``read0``,
``ord``) and PD_Length counts them. ``private_data`` is the ULP data after the block.

Private data in a known format is read after dissection into ``legacy`` (a field with no
wire bytes): the [MS-SMBD] 6.1 IRD/ORD negotiate header of SMB Direct
(:func:`mpa_emu.wire.private_data.decode_legacy`); :class:`SMBDIrdOrd` builds or
dissects those 8 bytes on their own (``SMBDIrdOrd(ird=32, ord=1)``).
"""

from __future__ import annotations

import struct
from typing import Any, ClassVar

from scapy.config import conf
from scapy.fields import (
    BitField,
    ByteField,
    ConditionalField,
    FlagsField,
    IntField,
    ShortField,
    StrFixedLenField,
    StrLenField,
)
from scapy.packet import Packet

from mpa_emu.frames.base import GuardedPacket, NoteField
from mpa_emu.wire.mpa import (
    FLAG_CRC,
    FLAG_ENHANCED,
    FLAG_REJECT,
    FRAME_SIZE,
    KEY_REP,
    KEY_REQ,
    KEY_SIZE,
    MAX_PRIV_DATA_LEN,
    RTR_MSG_SIZE,
)
from mpa_emu.wire.private_data import decode_legacy

# FlagsField bit 0 is the least significant bit of the 4-bit group, i.e. 0x10 of byte 16.
FLAG_NAMES = "SRCM"
KNOWN_REVS = (1, 2)  # irdma_parse_mpa rejects any other Rev with -EINVAL


def has_rtr_block(pkt: Packet) -> bool:
    """The RFC 6581 block is present for rev 2 with S set and room for it in PD_Length."""
    flags = pkt.flags
    if pkt.rev != 2 or flags is None or not int(flags) & (FLAG_ENHANCED >> 4):
        return False
    return pkt.pd_length is None or pkt.pd_length >= RTR_MSG_SIZE


def _private_data_length(pkt: Packet) -> int:
    pd = pkt.pd_length or 0
    return max(0, pd - (RTR_MSG_SIZE if has_rtr_block(pkt) else 0))


def _fields(key: bytes) -> list[Any]:
    def rtr(field: Any) -> Any:
        return ConditionalField(field, has_rtr_block)

    return [
        StrFixedLenField("key", key, KEY_SIZE),
        FlagsField("flags", FLAG_CRC >> 4, 4, FLAG_NAMES),
        BitField("res", 0, 4),
        ByteField("rev", 1),
        ShortField("pd_length", None),
        rtr(BitField("p2p", 1, 1)),  # A
        rtr(BitField("zero_len_send", 0, 1)),  # B
        rtr(BitField("ird", 0, 14)),
        rtr(BitField("write0", 0, 1)),  # C
        rtr(BitField("read0", 0, 1)),  # D
        rtr(BitField("ord", 0, 14)),
        StrLenField("private_data", b"", length_from=_private_data_length),
        NoteField("legacy"),
        NoteField("problem"),
    ]


class _MPAConnectFrame(GuardedPacket):
    """What the request and reply share; see :class:`MPARequest` and :class:`MPAReply`."""

    expected_key = KEY_REQ

    def required_length(self, s: bytes) -> int:
        if len(s) < FRAME_SIZE:
            return FRAME_SIZE
        flags, rev, pd_length = struct.unpack_from("!BBH", s, KEY_SIZE)
        if rev == 2 and flags & FLAG_ENHANCED and pd_length >= RTR_MSG_SIZE:
            return FRAME_SIZE + RTR_MSG_SIZE
        return FRAME_SIZE

    def diagnose(self) -> list[str]:
        problems = []
        if self.key != self.expected_key:
            problems.append(f"key {self.key!r} is not {self.expected_key!r}")
        if self.rev not in KNOWN_REVS:
            problems.append(f"Rev {self.rev} unknown (irdma_parse_mpa accepts 1 and 2)")
        if self.pd_length > MAX_PRIV_DATA_LEN:
            problems.append(f"PD_Length {self.pd_length} above {MAX_PRIV_DATA_LEN} "
                            "(RFC 5044 section 7.1; irdma_parse_mpa: -EOVERFLOW)")
        present = len(self.private_data) + (RTR_MSG_SIZE if has_rtr_block(self) else 0)
        if present < self.pd_length:
            problems.append(f"PD_Length {self.pd_length} but only {present} bytes of "
                            "private data present")
        if (self.rev == 2 and int(self.flags) & (FLAG_ENHANCED >> 4)
                and self.pd_length < RTR_MSG_SIZE):
            problems.append(f"rev 2 with S set but PD_Length {self.pd_length} has no room "
                            "for the RFC 6581 block")
        return problems

    def post_dissect(self, s: bytes) -> bytes:
        if not self.truncated and self.private_data:
            self.fields["legacy"] = decode_legacy(bytes(self.private_data))
        return s

    @property
    def flags_byte(self) -> int:
        """Byte 16 as on the wire: M C R S and the reserved nibble."""
        return ((int(self.flags or 0) << 4) | (self.res or 0)) & 0xFF

    @property
    def rtr_block(self) -> bytes:
        """The 4 RFC 6581 bytes, or ``b""`` when the frame has none."""
        if not has_rtr_block(self):
            return b""
        ird_word = (self.p2p << 15) | (self.zero_len_send << 14) | (self.ird & 0x3FFF)
        ord_word = (self.write0 << 15) | (self.read0 << 14) | (self.ord & 0x3FFF)
        return struct.pack("!HH", ird_word, ord_word)

    def post_build(self, pkt: bytes, pay: bytes) -> bytes:
        if self.pd_length is None:
            # RFC 6581 section 5: PD_Length counts the 4-byte block as private data.
            pd = len(pkt) - FRAME_SIZE
            pkt = pkt[:FRAME_SIZE - 2] + struct.pack("!H", pd & 0xFFFF) + pkt[FRAME_SIZE:]
        return pkt + pay

    def guess_payload_class(self, payload: bytes) -> Any:
        if self.truncated:
            return conf.raw_layer
        # Bytes after an accepting reply can only be FPDUs (RFC 5044 section 7.1.2).
        if self.expected_key == KEY_REP and not int(self.flags or 0) & (FLAG_REJECT >> 4):
            from mpa_emu.frames.fpdu import MPAFPDU

            return MPAFPDU
        return conf.raw_layer

    def describe(self) -> str:
        text = f"{self.name} rev {self.rev} [{self.flags}] PD_Length {self.pd_length}"
        if self.legacy is not None:
            text += f" {self.legacy.text()}"
        return text + (f" ({self.problem})" if self.problem else "")


class MPARequest(_MPAConnectFrame):
    """The MPA Request frame ("MPA ID Req Frame"); defaults give a v1 request with C."""

    name = "MPA Request"
    fields_desc: ClassVar[list[Any]] = _fields(KEY_REQ)
    expected_key = KEY_REQ


class MPAReply(_MPAConnectFrame):
    """The MPA Reply frame ("MPA ID Rep Frame"); set ``flags`` R for a reject."""

    name = "MPA Reply"
    fields_desc: ClassVar[list[Any]] = _fields(KEY_REP)
    expected_key = KEY_REP


class SMBDIrdOrd(Packet):
    """The [MS-SMBD] 6.1 IRD/ORD negotiate header: IRD and ORD, 4 bytes each, big-endian
    as Linux SMB Direct writes them (see :mod:`mpa_emu.wire.private_data`)."""

    name = "MS-SMBD IRD/ORD Negotiate Header"
    fields_desc: ClassVar[list[Any]] = [IntField("ird", 0), IntField("ord", 0)]
