"""Private data formats that stacks and their applications put in MPA requests and replies.

Besides the RFC 6581 block (:class:`mpa_emu.wire.mpa.RtrBlock`), one format is common on
the wire: the legacy IRD/ORD negotiate header of SMB Direct over iWARP ([MS-SMBD] section
6.1, "IRD/ORD Negotiate Header"): the first 8 bytes of the private data, a 4-byte IRD
then a 4-byte ORD, each "greater than zero". The document draws the fields without a byte
order; the Linux SMB Direct client and server write them big-endian
(``cpu_to_be32`` in ``_smbd_get_connection``, fs/smb/client/smbdirect.c, and in
``smb_direct_accept_client``, fs/smb/server/transport_rdma.c) and Wireshark 4.6 decodes
them so (``iwarp_mpa.legacy.ird``/``.ord``, 32 bits). Older cifs.ko and ksmbd wrote them in
host order, i.e. little-endian on x86: the current kernel reads such a header as "broken
clients (old cifs.ko) using little endian" (``smbd_conn_upcall``) and Wireshark 4.6 flags
it as ``iwarp_mpa.broken_le_legacy``. Windows, Chelsio's and siw's SMB Direct peers send
the header; it follows the RFC 6581 block when the frame carries one.

This module only reads bytes: :func:`decode_legacy` recognises the header and
:func:`describe_private_data` says what a private data blob is, one line, the same in
every report.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

LEGACY_SIZE = 8
"""[MS-SMBD] section 6.1: IRD (4 bytes) and ORD (4 bytes)."""

LEGACY_MAX_VALUE = 0xFFFF
"""A read depth above this is no IRD/ORD a device offers (rdma_conn_param carries u8
values, RFC 6581 14 bits): such bytes are not the header in that byte order."""

SMBD_PORT = 5445
"""The SMB Direct port on iWARP ([MS-SMBD] section 1.9)."""


@dataclass(frozen=True, slots=True)
class LegacyIrdOrd:
    """The [MS-SMBD] IRD/ORD negotiate header as found in private data.

    ``byte_order`` is ``big`` (as Linux writes it and Wireshark 4.6 reads it) or
    ``little`` (old cifs.ko / ksmbd: Wireshark 4.6's "broken little-endian legacy")."""

    ird: int
    ord: int
    byte_order: str

    @property
    def broken(self) -> bool:
        """Written little-endian (old cifs.ko / ksmbd)."""
        return self.byte_order == "little"

    def text(self) -> str:
        """``MS-SMBD legacy IRD/ORD: IRD 32, ORD 1`` (plus the byte order note)."""
        out = f"MS-SMBD legacy IRD/ORD: IRD {self.ird}, ORD {self.ord}"
        if self.broken:
            out += " (little-endian, as old cifs.ko/ksmbd wrote it)"
        if self.ird == 0 or self.ord == 0:
            out += " ([MS-SMBD] 6.1: each value has to be greater than zero)"
        return out

    def to_dict(self) -> dict[str, object]:
        """JSON form: ``{"format": "ms-smbd-legacy", "ird": .., "ord": .., ...}``."""
        return {"format": "ms-smbd-legacy", "ird": self.ird, "ord": self.ord,
                "byte_order": self.byte_order}


def decode_legacy(data: bytes) -> LegacyIrdOrd | None:
    """The legacy IRD/ORD header when ``data`` (the ULP private data, after any RFC 6581
    block) is exactly that header, else None. Big-endian is tried first (the byte order
    of the current kernel and of Wireshark 4.6); values that no device offers in one
    order (above :data:`LEGACY_MAX_VALUE`, or both zero) rule that order out."""
    if len(data) != LEGACY_SIZE:
        return None
    for order, fmt in (("big", ">II"), ("little", "<II")):
        ird, ord_ = struct.unpack(fmt, data)
        if ird <= LEGACY_MAX_VALUE and ord_ <= LEGACY_MAX_VALUE and (ird or ord_):
            return LegacyIrdOrd(ird, ord_, order)
    return None


def encode_legacy(ird: int, ord_: int, byte_order: str = "big") -> bytes:
    """The 8 header bytes, as Linux SMB Direct writes them (``big``) or as old cifs.ko
    did (``little``)."""
    return struct.pack(">II" if byte_order == "big" else "<II", ird, ord_)


def describe_private_data(data: bytes) -> str | None:
    """A known format's one-line reading of ULP private data, None for unknown bytes."""
    legacy = decode_legacy(data)
    return legacy.text() if legacy is not None else None
