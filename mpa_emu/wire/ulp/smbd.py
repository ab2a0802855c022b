"""SMB Direct ([MS-SMBD]) messages, all fields little-endian.

Layouts from [MS-SMBD] section 2.2 and Linux's ``fs/smb/common/smbdirect/smbdirect_pdu.h``
(``struct smbdirect_negotiate_req``, ``smbdirect_negotiate_resp``,
``smbdirect_data_transfer``), which the client (``fs/smb/client/smbdirect.c``) and the
server ksmbd (``fs/smb/server/transport_rdma.c``) both use. The SMB2 header inside a data
message is [MS-SMB2] section 2.2.1. The legacy IRD/ORD private data ([MS-SMBD] 6.1) is
read by :mod:`mpa_emu.wire.private_data`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from mpa_emu.wire.private_data import LegacyIrdOrd, decode_legacy
from mpa_emu.wire.ulp.values import FieldValue, size_text

SMBDIRECT_V1 = 0x0100
"""smbdirect_pdu.h ``SMBDIRECT_V1``: the only version ([MS-SMBD] 2.2.1)."""

NEGOTIATE_REQUEST_SIZE = 20
"""[MS-SMBD] 2.2.1: six fields, 20 bytes (``struct smbdirect_negotiate_req``)."""
NEGOTIATE_RESPONSE_SIZE = 32
"""[MS-SMBD] 2.2.2: 32 bytes (``struct smbdirect_negotiate_resp``)."""
DATA_MIN_HEADER = 0x14
"""smbdirect_pdu.h ``SMBDIRECT_DATA_MIN_HDR_SIZE``: a data transfer without payload."""
DATA_OFFSET = 0x18
"""smbdirect_pdu.h ``SMBDIRECT_DATA_OFFSET``: where Linux puts the payload (8-aligned,
after the Padding field)."""
FLAG_RESPONSE_REQUESTED = 0x0001
"""[MS-SMBD] 2.2.3 SMB_DIRECT_RESPONSE_REQUESTED (``SMBDIRECT_FLAG_RESPONSE_REQUESTED``)."""

STATUS_NAMES = {0x00000000: "STATUS_SUCCESS", 0xC00000BB: "STATUS_NOT_SUPPORTED"}
"""[MS-SMBD] 2.2.2 Status: success, or not supported (no common version)."""


def _version(v: int) -> str:
    return f"{v >> 8}.{v & 0xFF}"


@dataclass(frozen=True, slots=True)
class NegotiateRequest:
    """[MS-SMBD] 2.2.1 SMBDirect Negotiate Request (the initiator's first Send)."""

    min_version: int
    max_version: int
    credits_requested: int
    preferred_send_size: int
    max_receive_size: int
    max_fragmented_size: int
    reserved: int = 0

    kind = "Negotiate Request"

    @classmethod
    def decode(cls, data: bytes, *, any_version: bool = False) -> NegotiateRequest | None:
        """The request when ``data`` is one: 20 bytes, MinVersion <= MaxVersion and
        version 1.0 in that range (else None). With ``any_version`` (a connection already
        known to speak SMB Direct, its first Send) the versions are read whatever they
        are, so that a request the server refuses for them is still read as one."""
        if len(data) != NEGOTIATE_REQUEST_SIZE:
            return None
        mn, mx, res, credits, pref, maxrecv, maxfrag = struct.unpack("<HHHHIII", data)
        if not any_version and not mn <= SMBDIRECT_V1 <= mx:
            return None
        return cls(mn, mx, credits, pref, maxrecv, maxfrag, res)

    def encode(self) -> bytes:
        """The 20 bytes."""
        return struct.pack("<HHHHIII", self.min_version, self.max_version, self.reserved,
                           self.credits_requested, self.preferred_send_size,
                           self.max_receive_size, self.max_fragmented_size)

    def text(self) -> str:
        """One line."""
        return (f"{self.kind}: versions {_version(self.min_version)}-"
                f"{_version(self.max_version)}, CreditsRequested {self.credits_requested}, "
                f"PreferredSendSize {self.preferred_send_size:,}, MaxReceiveSize "
                f"{self.max_receive_size:,}, MaxFragmentedSize {self.max_fragmented_size:,}")

    def fields(self) -> dict[str, FieldValue]:
        """By [MS-SMBD]'s names, snake case."""
        return {"min_version": self.min_version, "max_version": self.max_version,
                "credits_requested": self.credits_requested,
                "preferred_send_size": self.preferred_send_size,
                "max_receive_size": self.max_receive_size,
                "max_fragmented_size": self.max_fragmented_size}


@dataclass(frozen=True, slots=True)
class NegotiateResponse:
    """[MS-SMBD] 2.2.2 SMBDirect Negotiate Response (the responder's first Send)."""

    min_version: int
    max_version: int
    negotiated_version: int
    credits_requested: int
    credits_granted: int
    status: int
    max_read_write_size: int
    preferred_send_size: int
    max_receive_size: int
    max_fragmented_size: int
    reserved: int = 0

    kind = "Negotiate Response"

    @classmethod
    def decode(cls, data: bytes) -> NegotiateResponse | None:
        """The response when ``data`` is one: 32 bytes, MinVersion <= MaxVersion, version
        1.0 in that range (else None)."""
        if len(data) != NEGOTIATE_RESPONSE_SIZE:
            return None
        (mn, mx, neg, res, creq, cgr, status, rw, pref, maxrecv,
         maxfrag) = struct.unpack("<HHHHHHIIIII", data)
        if not mn <= SMBDIRECT_V1 <= mx:
            return None
        return cls(mn, mx, neg, creq, cgr, status, rw, pref, maxrecv, maxfrag, res)

    def encode(self) -> bytes:
        """The 32 bytes."""
        return struct.pack("<HHHHHHIIIII", self.min_version, self.max_version,
                           self.negotiated_version, self.reserved, self.credits_requested,
                           self.credits_granted, self.status, self.max_read_write_size,
                           self.preferred_send_size, self.max_receive_size,
                           self.max_fragmented_size)

    @property
    def status_name(self) -> str:
        """``STATUS_SUCCESS`` or the NTSTATUS in hex."""
        return STATUS_NAMES.get(self.status, f"0x{self.status:08x}")

    def text(self) -> str:
        """One line."""
        return (f"{self.kind}: {self.status_name}, NegotiatedVersion "
                f"{_version(self.negotiated_version)}, CreditsRequested "
                f"{self.credits_requested}, CreditsGranted {self.credits_granted}, "
                f"MaxReadWriteSize {self.max_read_write_size:,}, PreferredSendSize "
                f"{self.preferred_send_size:,}, MaxReceiveSize {self.max_receive_size:,}, "
                f"MaxFragmentedSize {self.max_fragmented_size:,}")

    def fields(self) -> dict[str, FieldValue]:
        """By [MS-SMBD]'s names, snake case."""
        return {"min_version": self.min_version, "max_version": self.max_version,
                "negotiated_version": self.negotiated_version,
                "credits_requested": self.credits_requested,
                "credits_granted": self.credits_granted, "status": self.status,
                "status_name": self.status_name,
                "max_read_write_size": self.max_read_write_size,
                "preferred_send_size": self.preferred_send_size,
                "max_receive_size": self.max_receive_size,
                "max_fragmented_size": self.max_fragmented_size}


SMB2_COMMANDS = {
    0x0000: "NEGOTIATE", 0x0001: "SESSION_SETUP", 0x0002: "LOGOFF", 0x0003: "TREE_CONNECT",
    0x0004: "TREE_DISCONNECT", 0x0005: "CREATE", 0x0006: "CLOSE", 0x0007: "FLUSH",
    0x0008: "READ", 0x0009: "WRITE", 0x000A: "LOCK", 0x000B: "IOCTL", 0x000C: "CANCEL",
    0x000D: "ECHO", 0x000E: "QUERY_DIRECTORY", 0x000F: "CHANGE_NOTIFY",
    0x0010: "QUERY_INFO", 0x0011: "SET_INFO", 0x0012: "OPLOCK_BREAK",
}
"""[MS-SMB2] 2.2.1.2 Command codes."""

SMB2_PROTOCOL_ID = b"\xfeSMB"
"""[MS-SMB2] 2.2.1: ProtocolId 0xFE 'S' 'M' 'B'."""
SMB2_TRANSFORM_ID = b"\xfdSMB"
"""[MS-SMB2] 2.2.41 SMB2 TRANSFORM_HEADER (an encrypted message)."""
SMB2_COMPRESSION_ID = b"\xfcSMB"
"""[MS-SMB2] 2.2.42 SMB2 COMPRESSION_TRANSFORM_HEADER."""
SMB2_HEADER_SIZE = 64
SMB2_FLAGS_SERVER_TO_REDIR = 0x00000001
"""[MS-SMB2] 2.2.1.2 Flags: a response."""


@dataclass(frozen=True, slots=True)
class Smb2Header:
    """The SMB2 packet header at the start of a data message's payload ([MS-SMB2]
    2.2.1.2, little-endian): the command, whether it is a response, its MessageId."""

    command: int
    status: int
    flags: int
    message_id: int
    credit_request: int

    kind = "SMB2"

    @classmethod
    def decode(cls, data: bytes) -> Smb2Header | None:
        """The header when ``data`` starts with one (ProtocolId 0xFE 'SMB',
        StructureSize 64), else None."""
        if len(data) < SMB2_HEADER_SIZE or not data.startswith(SMB2_PROTOCOL_ID):
            return None
        size, _charge, status, command, credits, flags, _next, mid = struct.unpack_from(
            "<HHIHHIIQ", data, 4)
        if size != SMB2_HEADER_SIZE:
            return None
        return cls(command, status, flags, mid, credits)

    @property
    def command_name(self) -> str:
        """``WRITE``."""
        return SMB2_COMMANDS.get(self.command, f"command 0x{self.command:04x}")

    @property
    def response(self) -> bool:
        """SMB2_FLAGS_SERVER_TO_REDIR set."""
        return bool(self.flags & SMB2_FLAGS_SERVER_TO_REDIR)

    def text(self) -> str:
        """``SMB2 WRITE request (MessageId 7)``."""
        what = "response" if self.response else "request"
        status = f", Status 0x{self.status:08x}" if self.response and self.status else ""
        return f"SMB2 {self.command_name} {what} (MessageId {self.message_id}{status})"

    def fields(self) -> dict[str, FieldValue]:
        """command, command_name, response, status, message_id."""
        return {"command": self.command, "command_name": self.command_name,
                "response": self.response, "status": self.status,
                "message_id": self.message_id}


@dataclass(frozen=True, slots=True)
class DataTransfer:
    """[MS-SMBD] 2.2.3 SMBDirect Data Transfer message; ``smb2`` is the SMB2 header its
    payload starts with, when the payload holds the start of an SMB2 message (the first
    fragment), and ``payload_kind`` names an encrypted or compressed SMB2 message."""

    credits_requested: int
    credits_granted: int
    flags: int
    remaining_data_length: int
    data_offset: int
    data_length: int
    smb2: Smb2Header | None = None
    payload_kind: str = ""

    kind = "Data Transfer"

    @classmethod
    def decode(cls, data: bytes, size: int | None = None) -> DataTransfer | None:
        """The message when ``data`` (its first bytes; ``size`` the whole message's,
        default ``len(data)``) is one: 20 bytes without payload (DataOffset and
        DataLength 0), else DataOffset 8-aligned at or after 24 and the payload within
        the message ([MS-SMBD] 2.2.3). None otherwise."""
        total = len(data) if size is None else size
        if len(data) < DATA_MIN_HEADER:
            return None
        creq, cgr, flags, _res, remaining, offset, length = struct.unpack_from(
            "<HHHHIII", data)
        if flags & ~FLAG_RESPONSE_REQUESTED:
            return None
        if length == 0:
            if offset != 0 or total not in (DATA_MIN_HEADER, DATA_OFFSET):
                return None
            return cls(creq, cgr, flags, remaining, offset, length)
        if offset < DATA_OFFSET or offset % 8 or offset + length > total:
            return None
        payload = data[offset:]
        smb2 = Smb2Header.decode(payload)
        kind = ("SMB2 TRANSFORM (encrypted)" if payload.startswith(SMB2_TRANSFORM_ID) else
                "SMB2 COMPRESSION_TRANSFORM" if payload.startswith(SMB2_COMPRESSION_ID)
                else "")
        return cls(creq, cgr, flags, remaining, offset, length, smb2, kind)

    @property
    def response_requested(self) -> bool:
        """SMB_DIRECT_RESPONSE_REQUESTED."""
        return bool(self.flags & FLAG_RESPONSE_REQUESTED)

    def text(self) -> str:
        """One line, naming the SMB2 command carried."""
        parts = [f"CreditsRequested {self.credits_requested}",
                 f"CreditsGranted {self.credits_granted}"]
        if self.response_requested:
            parts.append("RESPONSE_REQUESTED")
        if self.data_length == 0:
            return f"{self.kind} (keep-alive, no payload): " + ", ".join(parts)
        parts += [f"DataOffset {self.data_offset}", f"DataLength {size_text(self.data_length)}",
                  f"RemainingDataLength {self.remaining_data_length:,}"]
        inner = (self.smb2.text() if self.smb2 is not None else self.payload_kind
                 or "a continuation fragment")
        return f"{self.kind}: {inner}; " + ", ".join(parts)

    def fields(self) -> dict[str, FieldValue]:
        """By [MS-SMBD]'s names, and the SMB2 command carried."""
        out: dict[str, FieldValue] = {
            "credits_requested": self.credits_requested,
            "credits_granted": self.credits_granted, "flags": self.flags,
            "remaining_data_length": self.remaining_data_length,
            "data_offset": self.data_offset, "data_length": self.data_length}
        if self.smb2 is not None:
            out.update({f"smb2_{k}": v for k, v in self.smb2.fields().items()})
        elif self.payload_kind:
            out["smb2_kind"] = self.payload_kind
        return out


def encode_data_transfer(credits_requested: int, credits_granted: int, payload: bytes, *,
                         flags: int = 0, remaining: int = 0) -> bytes:
    """A data transfer message as Linux builds it (payload at :data:`DATA_OFFSET`)."""
    if not payload:
        return struct.pack("<HHHHIII", credits_requested, credits_granted, flags, 0,
                           remaining, 0, 0)
    return struct.pack("<HHHHIIII", credits_requested, credits_granted, flags, 0,
                       remaining, DATA_OFFSET, len(payload), 0) + payload


@dataclass(frozen=True, slots=True)
class LegacyHeader:
    """The [MS-SMBD] 6.1 IRD/ORD negotiate header as an SMB Direct private data block
    (read by :func:`mpa_emu.wire.private_data.decode_legacy`)."""

    legacy: LegacyIrdOrd

    kind = "MS-SMBD legacy IRD/ORD"

    @classmethod
    def decode(cls, data: bytes) -> LegacyHeader | None:
        """The header when ``data`` is one."""
        legacy = decode_legacy(data)
        return None if legacy is None else cls(legacy)

    def text(self) -> str:
        """``MS-SMBD legacy IRD/ORD: IRD 32, ORD 1``."""
        return self.legacy.text()

    def fields(self) -> dict[str, FieldValue]:
        """ird, ord, byte_order."""
        return {"ird": self.legacy.ird, "ord": self.legacy.ord,
                "byte_order": self.legacy.byte_order}
