"""The Send messages among DDP segments (RFC 5041): what a QP that keeps the FPDUs it
took, rather than a receive queue (irdma's NIC model), has received."""

from __future__ import annotations

import struct

SEND_OPCODES = frozenset({3, 4, 5, 6})
"""RDMAP Send, Send with Invalidate, Send with SE, Send with SE and Invalidate (RFC 5040
section 4.3)."""
_UNTAGGED_HEADER = 18  # RFC 5041 section 4.4: control, RsvdULP, QN, MSN, MO
_TAGGED = 0x80
_LAST = 0x40


def sends_of_segments(ulpdus: list[bytes]) -> list[bytes]:
    """The whole Send messages among DDP segments taken in order (each an FPDU's ULPDU):
    untagged queue 0 with a Send opcode, joined by MSN at their MO; a message counts once
    its segment with L set is in and its bytes from MO 0 on are all there (RFC 5041
    sections 4.4 and 5.1). Messages whose opening segments are missing are left out."""
    parts: dict[int, bytearray] = {}
    out: list[bytes] = []
    for ulpdu in ulpdus:
        if len(ulpdu) < _UNTAGGED_HEADER or ulpdu[0] & _TAGGED \
                or ulpdu[1] & 0x0F not in SEND_OPCODES:
            continue
        qn, msn, mo = struct.unpack_from("!III", ulpdu, 6)
        if qn != 0:
            continue
        buf = parts.setdefault(msn, bytearray())
        if mo != len(buf):
            del parts[msn]  # a gap: this message cannot be read whole
            continue
        buf += ulpdu[_UNTAGGED_HEADER:]
        if ulpdu[0] & _LAST:
            out.append(bytes(parts.pop(msn)))
    return out
