"""TCP options as the Linux stack writes them (tcp_options_write) and reads them
(tcp_parse_options)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

EOL, NOP, MSS, WS, SACK_PERM, SACK, TS = 0, 1, 2, 3, 4, 5, 8


@dataclass(frozen=True, slots=True)
class ParsedOptions:
    """What a received segment's options say; ``None`` where the option is absent."""

    mss: int | None = None
    wscale: int | None = None
    sack_perm: bool = False
    tsval: int | None = None
    tsecr: int | None = None


def build(*, mss: int | None = None, sack_perm: bool = False,
          ts: tuple[int, int] | None = None, wscale: int | None = None) -> bytes:
    """tcp_options_write: MSS; SACK_PERM folded in front of the timestamps (else NOP NOP
    before them); SACK_PERM alone as NOP NOP SACK_PERM; NOP and window scale."""
    out = b""
    if mss is not None:
        out += struct.pack("!BBH", MSS, 4, mss)
    if ts is not None:
        lead = bytes((SACK_PERM, 2)) if sack_perm else bytes((NOP, NOP))
        out += lead + struct.pack("!BBII", TS, 10, ts[0] & 0xFFFFFFFF, ts[1] & 0xFFFFFFFF)
    elif sack_perm:
        out += bytes((NOP, NOP, SACK_PERM, 2))
    if wscale is not None:
        out += bytes((NOP, WS, 3, wscale))
    return out


def parse(raw: bytes) -> ParsedOptions:
    """tcp_parse_options, leniently: malformed options end the walk."""
    mss = wscale = tsval = tsecr = None
    sack_perm = False
    i = 0
    while i < len(raw):
        kind = raw[i]
        if kind == EOL:
            break
        if kind == NOP:
            i += 1
            continue
        if i + 1 >= len(raw):
            break
        size = raw[i + 1]
        if size < 2 or i + size > len(raw):
            break
        body = raw[i + 2:i + size]
        if kind == MSS and size == 4:
            mss = struct.unpack("!H", body)[0]
        elif kind == WS and size == 3:
            wscale = min(body[0], 14)  # tcp_parse_options caps it at TCP_MAX_WSCALE
        elif kind == SACK_PERM and size == 2:
            sack_perm = True
        elif kind == TS and size == 10:
            tsval, tsecr = struct.unpack("!II", body)
        i += size
    return ParsedOptions(mss, wscale, sack_perm, tsval, tsecr)
