"""A long iWARP connection for the HTML reports: MPA v1, C clear, many client Sends, a
server RDMA Read Request, then a server Terminate near the end, so the frames a report
highlights sit thousands of pixels down its ladder.

Every header is packed by :mod:`helpers.third_party_captures` from RFC 5040 section 4,
RFC 5041 section 4 and RFC 5044 section 4.1; nothing comes from mpa_emu.
"""

from __future__ import annotations

import struct
from pathlib import Path

from helpers.real_like_captures import fpdu
from helpers.third_party_captures import (
    KEY_REP,
    KEY_REQ,
    Builder,
    mpa_frame,
    read_request_body,
    rfc_terminate_word,
    untagged,
)

SENDS = 120
READ = {"sink_stag": 0x5A5A, "sink_to": 0x10000, "size": 4096, "src_stag": 0x77,
        "src_to": 0x2000}
TERMINATE = {"layer": 1, "etype": 2, "code": 0x06}
"""DDP (1), untagged buffer (2), "Invalid DDP version" (RFC 5041 section 7.2)."""
DDP_VERSION_ZERO = 0x40
"""The last Send's DDP control byte: L set, DV 0 (RFC 5041 section 4.2 has only DV 1)."""
FRAMES: dict[str, int] = {}
"""Frame numbers of the capture, filled in when it is built."""


def long_terminate(path: Path, sends: int = SENDS) -> Path:
    """The capture of the module docstring: frames 1-3 the handshake, 4-5 MPA, then
    ``sends`` client Sends (QN 0, MSN 1..sends, 64 bytes each; the last with DDP version
    0), the server's Read Request (QN 1, MSN 1), and the server's Terminate quoting the
    last Send."""
    b = Builder()
    b.handshake()
    FRAMES["request"] = b.add(True, "PA", mpa_frame(KEY_REQ, 0x00, 1, None))
    FRAMES["reply"] = b.add(False, "PA", mpa_frame(KEY_REP, 0x00, 1, None))
    last = b""
    for msn in range(1, sends + 1):
        ddp = DDP_VERSION_ZERO if msn == sends else 0x41
        last = untagged(3, 0, msn, bytes([msn & 0xFF]) * 64, ddp=ddp)
        FRAMES["last_send"] = b.add(True, "PA", fpdu(last, "zero"))
        FRAMES.setdefault("first_send", FRAMES["last_send"])
    FRAMES["read_request"] = b.add(False, "PA", fpdu(untagged(
        1, 1, 1, read_request_body(READ["sink_stag"], READ["sink_to"], READ["size"],
                                   READ["src_stag"], READ["src_to"])), "zero"))
    word = rfc_terminate_word(TERMINATE["layer"], TERMINATE["etype"], TERMINATE["code"],
                              True, True, False)
    quoted = struct.pack("!H", len(last)) + last[:18]
    FRAMES["terminate"] = b.add(False, "PA", fpdu(untagged(7, 2, 1, word + quoted), "zero"))
    b.add(True, "A")
    return b.write(path)


VERSION_FIN_FRAMES = {"send": 6, "fin": 7}


def version_zero_then_fin(path: Path) -> Path:
    """MPA v1, C clear, one client Send with DDP version 0 (frame 6); the server answers
    with no Terminate but a FIN (frame 7), and the client closes too."""
    b = Builder()
    b.handshake()
    b.add(True, "PA", mpa_frame(KEY_REQ, 0x00, 1, None))
    b.add(False, "PA", mpa_frame(KEY_REP, 0x00, 1, None))
    b.add(True, "PA", fpdu(untagged(3, 0, 1, b"dv zero", ddp=DDP_VERSION_ZERO), "zero"))
    b.add(False, "FA")
    b.add(True, "FA")
    b.add(False, "A")
    return b.write(path)
