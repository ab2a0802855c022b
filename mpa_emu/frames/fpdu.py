"""Scapy layers for the MPA FPDU (RFC 5044 section 4.1) and the MPA marker (section 4.3).

``MPAFPDU``: ULPDU_LENGTH, the ULPDU (a DDP segment, dissected as :class:`DDP`), PAD, and
the CRC32c written little-endian (the value Wireshark and siw expect, spec wireshark-mpa
section 2). At build time ULPDU_LENGTH, PAD and CRC are computed when left ``None``; on
dissection ``crc_ok`` tells whether the CRC matches, or is ``None`` once
:meth:`MPAFPDU.crc_not_negotiated` says the connection uses no CRC: the summary then
gives no CRC verdict (a CRC that was never checked is neither good nor bad).

Markers are not part of an FPDU's own bytes: they sit every 512 octets of TCP sequence
space, wherever the FPDUs fall. :class:`MPAMarker` models one; the layers here dissect
FPDUs of streams without markers (irdma sets M only with the out-of-tree ``iw_ooo``).
"""

from __future__ import annotations

import struct
from typing import Any, ClassVar

from scapy.config import conf
from scapy.fields import PacketLenField, ShortField, StrLenField, XLEIntField
from scapy.packet import Packet

from mpa_emu.frames.base import GuardedPacket, NoteField
from mpa_emu.frames.ddp import DDP, OPCODE_NAMES
from mpa_emu.wire.mpa import crc32c, fpdu_pad_len

ULPDU_LENGTH_SIZE = 2
CRC_SIZE = 4


def _ulpdu_length(pkt: Packet) -> int:
    return int(pkt.ulpdu_length or 0)


def _pad_length(pkt: Packet) -> int:
    return fpdu_pad_len(_ulpdu_length(pkt))


def fpdu_wire_length(ulpdu_length: int) -> int:
    """Bytes an FPDU of this ULPDU_LENGTH takes without markers."""
    return ULPDU_LENGTH_SIZE + ulpdu_length + fpdu_pad_len(ulpdu_length) + CRC_SIZE


class MPAFPDU(GuardedPacket):
    """One FPDU. Build with ``MPAFPDU(ulpdu=DDPUntagged(...)/RDMAPReadRequest())``."""

    name = "MPA FPDU"
    fields_desc: ClassVar[list[Any]] = [
        ShortField("ulpdu_length", None),
        PacketLenField("ulpdu", None, DDP,  # type: ignore[arg-type]
                       length_from=_ulpdu_length),
        StrLenField("pad", None, length_from=_pad_length),  # type: ignore[arg-type]
        XLEIntField("crc", None),
        NoteField("crc_ok"),
        NoteField("problem"),
    ]

    def required_length(self, s: bytes) -> int:
        if len(s) < ULPDU_LENGTH_SIZE:
            return ULPDU_LENGTH_SIZE
        (ulen,) = struct.unpack_from("!H", s)
        return fpdu_wire_length(ulen)

    def diagnose(self) -> list[str]:
        end = len(self.raw_packet_cache or b"") - CRC_SIZE
        body = (self.raw_packet_cache or b"")[:end]
        good = crc32c(body) == self.crc
        self.fields["crc_ok"] = good
        problems = []
        if any(self.pad or b""):
            problems.append("PAD is not zero (RFC 5044 section 4.1)")
        if not good:
            problems.append(f"CRC {self.crc:#010x} should be {crc32c(body):#010x}")
        if self.ulpdu is not None and not isinstance(self.ulpdu, GuardedPacket):
            problems.append("ULPDU: not a DDP segment")
        elif self.ulpdu is not None:
            for layer in self.ulpdu.iterpayloads():
                note = layer.fields.get("problem") if isinstance(layer, GuardedPacket) \
                    else None
                if note:
                    problems.append(f"ULPDU: {note}")
        return problems

    def crc_not_negotiated(self) -> None:
        """Mark the CRC as unused (C clear in request and reply): ``crc_ok`` becomes
        ``None`` and a CRC mismatch is no longer a problem. Applies to this FPDU only."""
        self.fields["crc_ok"] = None
        note = self.fields.get("problem")
        if isinstance(note, str) and not self.truncated:
            kept = [p for p in note.split("; ") if not p.startswith("CRC ")]
            self.fields["problem"] = "; ".join(kept) or None

    def post_build(self, pkt: bytes, pay: bytes) -> bytes:
        ulpdu = bytes(self.ulpdu) if self.ulpdu is not None else b""
        ulen = len(ulpdu) if self.ulpdu_length is None else self.ulpdu_length
        pad = bytes(fpdu_pad_len(len(ulpdu))) if self.pad is None else bytes(self.pad)
        body = struct.pack("!H", ulen & 0xFFFF) + ulpdu + pad
        crc = crc32c(body) if self.crc is None else self.crc
        return body + struct.pack("<I", crc & 0xFFFFFFFF) + pay

    def extract_padding(self, s: bytes) -> tuple[bytes, bytes]:
        # What follows one FPDU in the same bytes is the next FPDU (or a partial one).
        return s, b""

    def guess_payload_class(self, payload: bytes) -> Any:
        if self.truncated:
            return conf.raw_layer
        return MPAFPDU

    def describe(self) -> str:
        op = getattr(self.ulpdu, "opcode", None)
        what = OPCODE_NAMES.get(op, "?") if isinstance(op, int) else "?"
        head = f"MPA FPDU {what} ULPDU_Length {self.ulpdu_length}"
        if self.crc_ok is None:
            return head  # CRC not negotiated (RFC 5044 section 7.1): no verdict
        if self.crc_ok:
            return f"{head} CRC good"
        return f"{head} CRC {'zero' if self.crc == 0 else 'bad'}"


class MPAMarker(Packet):
    """An MPA marker (RFC 5044 section 4.3): 16 reserved bits, then FPDUPTR, the number
    of octets back to the start of the FPDU that holds it."""

    name = "MPA marker"
    fields_desc: ClassVar[list[Any]] = [ShortField("reserved", 0), ShortField("fpduptr", 0)]

    def extract_padding(self, s: bytes) -> tuple[bytes, bytes]:
        return b"", s
