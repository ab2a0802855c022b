"""Reading a received Terminate's control word in the two layouts found on the wire.

RFC 5040 section 4.8 lays the 32-bit control word out big-endian: Layer (4 bits), EType (4),
Error Code (8), the header-control bits M, D, R, then 13 reserved bits. siw declares the same
word with C bit-fields (``struct iwarp_terminate`` in drivers/infiniband/sw/siw/iwarp.h);
on a little-endian host the compiler allocates them from the least significant bit of the
storage unit, which is the first byte in memory, so siw sends Layer in the low nibble of
the first byte and EType in its high nibble, the Error Code in the second byte, and M, D,
R in bits 0, 1, 2 of the third byte. The two readings differ whenever Layer and EType
differ or a header-control bit is set.

What follows the control word tells them apart: the DDP Segment Length when M or D is set,
the terminated DDP header (14 bytes tagged, 18 untagged: RFC 5041 section 4) when D is,
the terminated RDMAP header (28 bytes) when R is. :func:`read_terminate` reads both and
keeps the layout whose header-control bits announce exactly the bytes that follow; when
both or neither do, the one whose Layer, EType and Error Code are defined, and RFC 5040's
when that does not decide either.
"""

from __future__ import annotations

from dataclasses import dataclass

TERM_LAYERS = {0: "RDMAP", 1: "DDP", 2: "LLP"}
"""Terminate Layer values (RFC 5040 section 4.8)."""

TERM_TYPES = {
    (0, 0): "Local Catastrophic Error",
    (0, 1): "Remote Protection Error",
    (0, 2): "Remote Operation Error",
    (1, 0): "Local Catastrophic Error",
    (1, 1): "Tagged Buffer Error",
    (1, 2): "Untagged Buffer Error",
    (1, 3): "reserved for the LLP",
    (2, 0): "MPA",
}
"""(Layer, EType) names (RFC 5040 section 7.4; LLP: RFC 5044 section 8)."""

TERM_CODES = {
    (0, 0, 0x00): "Unspecified Error",
    (0, 1, 0x00): "Invalid STag",
    (0, 1, 0x01): "Base or bounds violation",
    (0, 1, 0x02): "Access rights violation",
    (0, 1, 0x03): "STag not associated with RDMAP Stream",
    (0, 1, 0x04): "TO wrap",
    (0, 1, 0xFF): "Unspecified Error",
    (0, 2, 0x05): "Invalid RDMAP version",
    (0, 2, 0x06): "Unexpected OpCode",
    (0, 2, 0x07): "Catastrophic error, localized to RDMAP Stream",
    (0, 2, 0x08): "Catastrophic error, global",
    (0, 2, 0x09): "STag cannot be Invalidated",
    (0, 2, 0xFF): "Unspecified Error",
    (1, 0, 0x00): "Unspecified Error",
    (1, 1, 0x00): "Invalid STag",
    (1, 1, 0x01): "Base or bounds violation",
    (1, 1, 0x02): "STag not associated with DDP Stream",
    (1, 1, 0x03): "TO wrap",
    (1, 1, 0x04): "Invalid DDP version",
    (1, 2, 0x01): "Invalid QN",
    (1, 2, 0x02): "Invalid MSN - no buffer available",
    (1, 2, 0x03): "Invalid MSN - MSN range is not valid",
    (1, 2, 0x04): "Invalid MO",
    (1, 2, 0x05): "DDP Message too long for available buffer",
    (1, 2, 0x06): "Invalid DDP version",
    (2, 0, 0x01): "TCP connection closed, terminated or lost",
    (2, 0, 0x02): "MPA CRC error",
    (2, 0, 0x03): "MPA Marker and ULPDU_Length field mismatch",
    (2, 0, 0x04): "Invalid MPA Request or Reply frame",
    (2, 0, 0x05): "Local Catastrophic Error",
    (2, 0, 0x06): "Insufficient IRD resources",
    (2, 0, 0x07): "No matching RTR option",
}
"""(Layer, EType, Error Code) names (RFC 5040 section 7.4, RFC 5044 section 8, RFC 6581
section 9)."""

RFC = "RFC 5040"
SIW = "siw"
LAYOUT_WORDS = {RFC: "RFC 5040 section 4.8 layout",
                SIW: "siw's little-endian bit-field layout (struct iwarp_terminate)"}

_CONTROL = 4
_SEGMENT_LENGTH = 2
_TAGGED_DDP, _UNTAGGED_DDP, _RDMAP = 14, 18, 28
LLP_CRC = (2, 0x02)
"""(Layer, Error Code) of an MPA CRC error (RFC 5044 section 8)."""


@dataclass(frozen=True, slots=True)
class TermReading:
    """One layout's reading of a Terminate body (the bytes after the DDP header)."""

    layout: str
    layer: int
    etype: int
    error_code: int
    m: bool
    d: bool
    r: bool
    fits: bool
    """The header-control bits announce exactly the bytes that follow the control word."""

    @property
    def known(self) -> bool:
        """RFC 5040/5044/6581 define this Layer, EType and Error Code."""
        return (self.layer, self.etype, self.error_code) in TERM_CODES

    def fields(self) -> tuple[int, int, int, bool, bool, bool]:
        """What the control word says, without the layout's name."""
        return (self.layer, self.etype, self.error_code, self.m, self.d, self.r)

    def is_crc_error(self) -> bool:
        """Layer LLP, code 0x02: an MPA CRC error (any EType: irdma sends 3)."""
        return (self.layer, self.error_code) == LLP_CRC

    def text(self) -> str:
        """``layer LLP (2), type MPA (0), code 0x02 MPA CRC error``."""
        layer = TERM_LAYERS.get(self.layer, "unknown layer")
        etype = TERM_TYPES.get((self.layer, self.etype), "unknown type")
        code = TERM_CODES.get((self.layer, self.etype, self.error_code), "unknown code")
        return (f"layer {layer} ({self.layer}), type {etype} ({self.etype}), "
                f"code 0x{self.error_code:02x} {code}")

    def flag_names(self) -> str:
        """``M D`` for the header-control bits set, ``no M/D/R`` when none."""
        return " ".join(n for on, n in ((self.m, "M"), (self.d, "D"), (self.r, "R"))
                        if on) or "no M/D/R"


@dataclass(frozen=True, slots=True)
class TerminateRead:
    """A Terminate body read in both layouts: ``reading`` the one kept, ``other`` the
    other when it says something else (``None`` when both read the same)."""

    reading: TermReading
    other: TermReading | None
    quoted: int
    """Bytes after the control word (the quoted headers)."""
    nothing_received: bool = False
    """The choice was made because no FPDU from the peer came before the Terminate."""

    def why(self) -> str:
        """Which layout was kept and what the quoted header says of it; "" when both
        layouts read the same, or when RFC 5040's was kept and either the quoted header
        agrees with it alone or siw's reading names no defined error."""
        if self.other is None:
            return ""
        kept, other = self.reading, self.other
        if kept.layout == RFC and ((kept.fits and not other.fits) or not other.known):
            return ""
        head = f"control word in {LAYOUT_WORDS[kept.layout]}"
        if kept.fits and not other.fits:
            because = (f"the {self.quoted} bytes quoted after it are what its "
                       f"{_bits(kept)} announce; {LAYOUT_WORDS[other.layout]} reads "
                       f"{_bits(other)} there")
        elif kept.fits and self.nothing_received:
            because = (f"the {self.quoted} bytes quoted after it fit both layouts, and no "
                       "FPDU from the peer came before it, so it cannot report an error in "
                       "a received DDP or RDMAP segment")
        elif kept.fits:
            because = (f"the {self.quoted} bytes quoted after it fit both layouts' "
                       "header-control bits")
        else:
            because = (f"the {self.quoted} bytes quoted after it fit neither layout's "
                       "header-control bits")
        return f"{head}: {because}; read that way it says {other.text()}"


def _bits(reading: TermReading) -> str:
    names = reading.flag_names()
    return "no M/D/R bits" if names == "no M/D/R" else f"{names} bits"


def _quoted_size(raw: bytes, m: bool, d: bool, r: bool) -> int:
    size = _SEGMENT_LENGTH if m or d else 0
    if d:
        at = _CONTROL + _SEGMENT_LENGTH
        tagged = len(raw) > at and bool(raw[at] & 0x80)
        size += _TAGGED_DDP if tagged else _UNTAGGED_DDP
    return size + (_RDMAP if r else 0)


def _reading(raw: bytes, layout: str) -> TermReading:
    b0, b1, b2 = raw[0], raw[1], raw[2]
    if layout == RFC:
        layer, etype = b0 >> 4, b0 & 0x0F
        m, d, r = bool(b2 & 0x80), bool(b2 & 0x40), bool(b2 & 0x20)
    else:
        layer, etype = b0 & 0x0F, b0 >> 4
        m, d, r = bool(b2 & 0x01), bool(b2 & 0x02), bool(b2 & 0x04)
    fits = len(raw) - _CONTROL == _quoted_size(raw, m, d, r)
    return TermReading(layout, layer, etype, b1, m, d, r, fits)


def read_terminate(raw: bytes, peer_sent: bool = True) -> TerminateRead:
    """Read a Terminate body (control word and quoted headers) in both layouts and keep
    the one the quoted headers agree with. When they agree with both, ``peer_sent``
    False (no FPDU from the peer came before the Terminate) rules out a DDP or RDMAP
    error other than a local catastrophic one: those are about a segment the sender
    received (whose headers a Terminate quotes, RFC 5040 section 4.8), so an LLP reading
    is kept. Then the reading that names a defined error,
    then RFC 5040's. Raises ValueError on fewer than 4 bytes."""
    if len(raw) < _CONTROL:
        raise ValueError(f"Terminate needs {_CONTROL} bytes, got {len(raw)}")
    rfc, siw = _reading(raw, RFC), _reading(raw, SIW)
    quoted = len(raw) - _CONTROL
    if rfc.fields() == siw.fields():
        return TerminateRead(rfc, None, quoted)
    if rfc.fits != siw.fits:
        kept, other = (rfc, siw) if rfc.fits else (siw, rfc)
        return TerminateRead(kept, other, quoted)
    if not peer_sent and _about_received(rfc) != _about_received(siw):
        kept, other = (siw, rfc) if _about_received(rfc) else (rfc, siw)
        return TerminateRead(kept, other, quoted, nothing_received=True)
    if siw.known and not rfc.known:
        kept, other = siw, rfc
    else:
        kept, other = rfc, siw
    return TerminateRead(kept, other, quoted)


def _about_received(reading: TermReading) -> bool:
    """A DDP or RDMAP error that is not a local catastrophic one: it reports a segment
    the sender received."""
    return reading.layer in (0, 1) and reading.etype != 0
