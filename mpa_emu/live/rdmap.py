"""The few DDP/RDMAP messages an MPA peer exchanges right after the MPA handshake.

Byte layouts from RFC 5041 section 4 (DDP) and RFC 5040 section 4 (RDMAP): the
zero-length RDMA Read Request or RDMA Write used as the RFC 6581 ready-to-receive
message, and untagged Sends. These are ULPDUs; :func:`mpa_emu.mpa.frame_fpdu` wraps
them into FPDUs.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

DDP_TAGGED = 0x80  # T
DDP_LAST = 0x40  # L
DDP_VERSION = 0x01  # DV = 1 (RFC 5041 section 4.1)
RDMAP_VERSION = 0x40  # RV = 1 in the top two bits of byte 1 (RFC 5040 section 4.2)

OP_WRITE = 0
OP_READ_REQUEST = 1
OP_READ_RESPONSE = 2
OP_SEND = 3
OP_TERMINATE = 7

OPCODE_NAMES = {
    0: "RDMA Write",
    1: "RDMA Read Request",
    2: "RDMA Read Response",
    3: "Send",
    4: "Send with Invalidate",
    5: "Send with Solicited Event",
    6: "Send with SE and Invalidate",
    7: "Terminate",
}

# Untagged queue numbers (RFC 5040 section 5.1).
QN_SEND = 0
QN_READ_REQUEST = 1
QN_TERMINATE = 2

TAGGED_HEADER = 14
UNTAGGED_HEADER = 18
READ_REQUEST_HEADER = 28

# The STags irdma_sc_send_rtt puts in its zero-length READ (spec irdma-cm 4.4).
RTR_SINK_STAG = 0xABCD
RTR_SOURCE_STAG = 0x1234


class RdmapFormatError(ValueError):
    """Bytes too short or malformed for a DDP/RDMAP header."""


def _control(tagged: bool, opcode: int) -> bytes:
    ddp = (DDP_TAGGED if tagged else 0) | DDP_LAST | DDP_VERSION
    return bytes((ddp, RDMAP_VERSION | (opcode & 0x0F)))


def read0_rtr(msn: int = 1) -> bytes:
    """Zero-length RDMA Read Request (the RTR irdma's active side sends by default)."""
    head = _control(False, OP_READ_REQUEST) + struct.pack("!IIII", 0, QN_READ_REQUEST, msn, 0)
    body = struct.pack("!IQIIQ", RTR_SINK_STAG, 0, 0, RTR_SOURCE_STAG, 0)
    return head + body


def write0_rtr() -> bytes:
    """Zero-length tagged RDMA Write with STag 0 and TO 0."""
    return _control(True, OP_WRITE) + struct.pack("!IQ", 0, 0)


def send(payload: bytes, msn: int) -> bytes:
    """One untagged Send message in a single DDP segment (QN 0)."""
    return _control(False, OP_SEND) + struct.pack("!IIII", 0, QN_SEND, msn, 0) + payload


@dataclass(frozen=True, slots=True)
class DdpMessage:
    """A decoded DDP segment with its RDMAP opcode."""

    tagged: bool
    last: bool
    opcode: int
    stag: int | None
    qn: int | None
    msn: int | None
    payload: bytes
    read_size: int | None = None

    @property
    def name(self) -> str:
        """The RDMAP opcode name."""
        return OPCODE_NAMES.get(self.opcode, f"opcode {self.opcode}")

    @property
    def rtr_kind(self) -> str | None:
        """"read" or "write" when this is a zero-length RTR message, else None."""
        if self.opcode == OP_READ_REQUEST and self.read_size == 0:
            return "read"
        if self.opcode == OP_WRITE and self.tagged and not self.payload:
            return "write"
        return None

    def describe(self) -> str:
        """One line for humans."""
        text = self.name
        if self.rtr_kind is not None:
            text += f" (zero-length, RTR {self.rtr_kind})"
        elif self.opcode == OP_SEND:
            text += f" msn={self.msn} len={len(self.payload)}"
        return text


def parse(ulpdu: bytes) -> DdpMessage:
    """Decode a ULPDU; raise :class:`RdmapFormatError` when it is too short."""
    if len(ulpdu) < 2:
        raise RdmapFormatError(f"DDP header needs 2 bytes, got {len(ulpdu)}")
    tagged = bool(ulpdu[0] & DDP_TAGGED)
    last = bool(ulpdu[0] & DDP_LAST)
    opcode = ulpdu[1] & 0x0F
    if tagged:
        if len(ulpdu) < TAGGED_HEADER:
            raise RdmapFormatError(f"tagged DDP header needs {TAGGED_HEADER} bytes")
        (stag,) = struct.unpack_from("!I", ulpdu, 2)
        return DdpMessage(True, last, opcode, stag, None, None, bytes(ulpdu[TAGGED_HEADER:]))
    if len(ulpdu) < UNTAGGED_HEADER:
        raise RdmapFormatError(f"untagged DDP header needs {UNTAGGED_HEADER} bytes")
    _inv, qn, msn, _mo = struct.unpack_from("!IIII", ulpdu, 2)
    payload = bytes(ulpdu[UNTAGGED_HEADER:])
    read_size = None
    if opcode == OP_READ_REQUEST:
        if len(payload) < READ_REQUEST_HEADER:
            raise RdmapFormatError(f"RDMA Read Request header needs {READ_REQUEST_HEADER} bytes")
        (read_size,) = struct.unpack_from("!I", payload, 12)
    return DdpMessage(False, last, opcode, None, qn, msn, payload, read_size)
