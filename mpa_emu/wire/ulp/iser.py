"""iSER: the CM header in the connection's private data and the iSER header on Sends.

Layouts from ``drivers/infiniband/ulp/iser`` and ``isert`` (``include/.../iscsi_iser.h``:
``struct iser_cm_hdr``, ``struct iser_ctrl``) and RFC 7145 (iSER), big-endian. The
initiator sets ``ISER_ZBVA_NOT_SUP`` always and ``ISER_SEND_W_INV_NOT_SUP`` when its device
cannot invalidate remotely (``iser_route_handler``); the target answers with the same bits
meaning "not used" (``isert_rdma_accept``: ``ISERT_ZBVA_NOT_USED``,
``ISERT_SEND_W_INV_NOT_USED``) and uses remote invalidation only when the initiator's
header allows it (``isert_set_nego_params``). The iSCSI PDU after the iSER header opens
with its 48-byte Basic Header Segment (RFC 7143 section 11.2).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from mpa_emu.wire.ulp.values import FieldValue

ISCSI_PORT = 3260
"""The iSCSI port, which iSER keeps (RFC 7145)."""
ISER_ZBVA_NOT_SUP = 0x80
"""iscsi_iser.h: zero-based virtual addresses not supported (ISERT_ZBVA_NOT_USED)."""
ISER_SEND_W_INV_NOT_SUP = 0x40
"""iscsi_iser.h: Send with Invalidate not supported (ISERT_SEND_W_INV_NOT_USED)."""
CM_HDR_SIZE = 4
"""``sizeof(struct iser_cm_hdr)``: flags, rsvd[3]."""

ISCSI_CTRL = 0x10
ISER_HELLO = 0x20
ISER_HELLORPLY = 0x30
ISER_WSV = 0x08
ISER_RSV = 0x04
ISER_HEADER_SIZE = 28
"""``sizeof(struct iser_ctrl)``: flags, rsvd[3], write STag and VA, read STag and VA."""
BHS_SIZE = 48
"""RFC 7143 section 11.2: the Basic Header Segment."""

ISCSI_OPCODES = {
    0x00: "NOP-Out", 0x01: "SCSI Command", 0x02: "Task Management Function Request",
    0x03: "Login Request", 0x04: "Text Request", 0x05: "SCSI Data-Out",
    0x06: "Logout Request", 0x10: "SNACK Request",
    0x20: "NOP-In", 0x21: "SCSI Response", 0x22: "Task Management Function Response",
    0x23: "Login Response", 0x24: "Text Response", 0x25: "SCSI Data-In",
    0x26: "Logout Response", 0x31: "Ready To Transfer (R2T)", 0x32: "Asynchronous Message",
    0x3F: "Reject",
}
"""RFC 7143 section 11.2.1.2 opcodes (the low six bits of byte 0)."""


@dataclass(frozen=True, slots=True)
class CmHeader:
    """``struct iser_cm_hdr``: the connect (or accept) private data."""

    flags: int

    kind = "iSER CM header"

    @classmethod
    def decode(cls, data: bytes) -> CmHeader | None:
        """The header when ``data`` is 4 bytes, only the two defined flag bits possibly
        set and the reserved bytes zero."""
        if len(data) != CM_HDR_SIZE or any(data[1:]):
            return None
        if data[0] & ~(ISER_ZBVA_NOT_SUP | ISER_SEND_W_INV_NOT_SUP) & 0xFF:
            return None
        return cls(data[0])

    def encode(self) -> bytes:
        """The 4 bytes."""
        return bytes([self.flags, 0, 0, 0])

    @property
    def zbva(self) -> bool:
        """Zero-based virtual addresses supported (ISER_ZBVA_NOT_SUP clear)."""
        return not self.flags & ISER_ZBVA_NOT_SUP

    @property
    def send_with_invalidate(self) -> bool:
        """Send with Invalidate supported (ISER_SEND_W_INV_NOT_SUP clear)."""
        return not self.flags & ISER_SEND_W_INV_NOT_SUP

    def text(self) -> str:
        """One line."""
        return (f"{self.kind}: flags 0x{self.flags:02x} (zero-based VA "
                f"{'supported' if self.zbva else 'not supported'}, Send with Invalidate "
                f"{'supported' if self.send_with_invalidate else 'not supported'})")

    def fields(self) -> dict[str, FieldValue]:
        """flags, zbva, send_with_invalidate."""
        return {"flags": self.flags, "zbva": self.zbva,
                "send_with_invalidate": self.send_with_invalidate}


@dataclass(frozen=True, slots=True)
class IserMessage:
    """An iSER-framed Send: the header's opcode and valid bits with the STags and VAs
    they validate, and the iSCSI PDU behind it (opcode, data segment length; a login's
    text keys)."""

    flags: int
    write_stag: int
    write_va: int
    read_stag: int
    read_va: int
    iscsi_opcode: int | None = None
    data_segment_length: int = 0
    login_keys: tuple[str, ...] = ()

    kind = "iSER"

    @classmethod
    def decode(cls, data: bytes) -> IserMessage | None:
        """The message when ``data`` opens with a 28-byte iSER header whose opcode is
        iSCSI control, Hello or HelloReply and whose reserved bytes are zero."""
        if len(data) < ISER_HEADER_SIZE or any(data[1:4]):
            return None
        flags = data[0]
        if flags & 0xF0 not in (ISCSI_CTRL, ISER_HELLO, ISER_HELLORPLY) or flags & 0x03:
            return None
        wstag, wva, rstag, rva = struct.unpack_from(">IQIQ", data, 4)
        bhs = data[ISER_HEADER_SIZE:ISER_HEADER_SIZE + BHS_SIZE]
        if flags & 0xF0 != ISCSI_CTRL or len(bhs) < BHS_SIZE:
            return cls(flags, wstag, wva, rstag, rva)
        opcode = bhs[0] & 0x3F
        dsl = int.from_bytes(bhs[5:8], "big")
        keys: tuple[str, ...] = ()
        if opcode in (0x03, 0x23):  # Login Request / Response: key=value text
            text = data[ISER_HEADER_SIZE + BHS_SIZE:ISER_HEADER_SIZE + BHS_SIZE + dsl]
            keys = tuple(k.decode("ascii", "replace") for k in text.split(b"\0") if k)
        return cls(flags, wstag, wva, rstag, rva, opcode, dsl, keys)

    @property
    def opcode_name(self) -> str:
        """The iSER opcode: ``iSCSI control``, ``Hello``, ``HelloReply``."""
        return {ISCSI_CTRL: "iSCSI control", ISER_HELLO: "Hello",
                ISER_HELLORPLY: "HelloReply"}[self.flags & 0xF0]

    @property
    def iscsi_name(self) -> str:
        """``Login Request``."""
        if self.iscsi_opcode is None:
            return ""
        return ISCSI_OPCODES.get(self.iscsi_opcode, f"opcode 0x{self.iscsi_opcode:02x}")

    def text(self) -> str:
        """One line."""
        parts = [self.iscsi_name or self.opcode_name]
        if self.flags & ISER_WSV:
            parts.append(f"write STag 0x{self.write_stag:x} VA 0x{self.write_va:x}")
        if self.flags & ISER_RSV:
            parts.append(f"read STag 0x{self.read_stag:x} VA 0x{self.read_va:x}")
        if self.data_segment_length:
            parts.append(f"data segment {self.data_segment_length:,} bytes")
        if self.login_keys:
            parts.append(" ".join(self.login_keys[:4])
                         + (" ..." if len(self.login_keys) > 4 else ""))
        return f"{self.kind} {parts[0]}" + ("; " + ", ".join(parts[1:]) if parts[1:] else "")

    def fields(self) -> dict[str, FieldValue]:
        """flags, STags/VAs, iSCSI opcode and name, data segment length."""
        return {"flags": self.flags, "opcode": self.opcode_name,
                "wsv": bool(self.flags & ISER_WSV), "write_stag": self.write_stag,
                "write_va": self.write_va, "rsv": bool(self.flags & ISER_RSV),
                "read_stag": self.read_stag, "read_va": self.read_va,
                "iscsi_opcode": self.iscsi_opcode, "iscsi_name": self.iscsi_name,
                "data_segment_length": self.data_segment_length}
