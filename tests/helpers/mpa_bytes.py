"""MPA frames built field by field for the parse tests (RFC 5044 section 7.1)."""

from __future__ import annotations

import struct

from mpa_emu.wire import mpa


def frame(key: bytes = mpa.KEY_REQ, flags: int = 0x50, rev: int = 2,
          pd_length: int | None = None, ctrl: tuple[int, int] | None = (0x8010, 0xC010),
          pdata: bytes = b"") -> bytes:
    block = b"" if ctrl is None else struct.pack("!HH", *ctrl)
    body = block + pdata
    return key + bytes([flags, rev]) + struct.pack(
        "!H", len(body) if pd_length is None else pd_length) + body
