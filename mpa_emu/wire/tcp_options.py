"""TCP options as the wire carries them (RFC 9293 section 3.2): the one reader of option
bytes every view and report uses, and the one rendering of each option's value.

:func:`parse_options` walks the bytes once: End of Option List (kind 0) ends the list,
No-Operation (kind 1) is one byte, every other option is kind, length, value. What stops
the walk early is kept as a :class:`OptionProblem` (a kind byte with no length byte, a
length under 2, a length that runs past the bytes given).

Values are rendered as RFC 7323 and RFC 2018 define them: the window scale option
carries the shift count ``shift.cnt`` (RFC 7323 section 2.2; the scale factor is
2^shift.cnt), so ``WS=7`` is a shift of 7 (Wireshark's Info column shows the factor
instead, ``WS=128``). How a stack's own TCP reads options, quirks included, is that
stack's (irdma's ``process_options``, ``irdma_process_options``), not this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

EOL = 0  # End of Option List (RFC 9293 section 3.2)
NOP = 1  # No-Operation
MSS = 2  # Maximum Segment Size, length 4
WINDOW_SCALE = 3  # length 3: shift.cnt (RFC 7323 section 2.2)
SACK_PERMITTED = 4  # length 2 (RFC 2018 section 2)
TIMESTAMPS = 8  # length 10: TSval, TSecr (RFC 7323 section 3.2)

@dataclass(frozen=True, slots=True)
class TcpOption:
    """One option: its kind, its length byte (1 for EOL and NOP) and the value bytes
    present (fewer than ``length - 2`` when the option runs past the end)."""

    kind: int
    length: int
    value: bytes


@dataclass(frozen=True, slots=True)
class OptionProblem:
    """Why the walk stopped early: ``truncated`` (a kind with no length byte), ``bad
    length`` (a length under 2: irdma_process_options would loop on 0), or ``past end``
    (the last option's length runs past the bytes given; it is in the list, cut short).
    ``rest`` is the bytes from the faulty option on."""

    what: Literal["truncated", "bad length", "past end"]
    kind: int
    length: int
    rest: bytes


@dataclass(frozen=True, slots=True)
class ParsedOptions:
    """The options in order (EOL and NOP included), and the problem that ended the walk
    (None when the bytes are well formed)."""

    options: tuple[TcpOption, ...]
    problem: OptionProblem | None = None

    @property
    def kinds(self) -> tuple[int, ...]:
        """Every option kind in order, the kind of a truncated or bad-length option last."""
        kinds = tuple(o.kind for o in self.options)
        problem = self.problem
        if problem is not None and problem.what != "past end":
            kinds += (problem.kind,)
        return kinds


def parse_options(raw: bytes) -> ParsedOptions:
    """Walk the option bytes of one TCP header."""
    out: list[TcpOption] = []
    i = 0
    size = len(raw)
    while i < size:
        kind = raw[i]
        if kind == EOL:
            out.append(TcpOption(EOL, 1, b""))
            break
        if kind == NOP:
            out.append(TcpOption(NOP, 1, b""))
            i += 1
            continue
        if i + 1 >= size:
            return ParsedOptions(tuple(out), OptionProblem("truncated", kind, 0, raw[i:]))
        length = raw[i + 1]
        if length < 2:
            return ParsedOptions(tuple(out),
                                 OptionProblem("bad length", kind, length, raw[i:]))
        out.append(TcpOption(kind, length, raw[i + 2:i + length]))
        if i + length > size:
            return ParsedOptions(tuple(out),
                                 OptionProblem("past end", kind, length, raw[i:]))
        i += length
    return ParsedOptions(tuple(out))


def option_value(option: TcpOption) -> int | tuple[int, int] | None:
    """The value of a well-sized MSS (the MSS), window scale (the shift count) or
    timestamps option (TSval, TSecr); None for any other option."""
    value = option.value
    if option.kind == MSS and len(value) == 2:
        return int.from_bytes(value, "big")
    if option.kind == WINDOW_SCALE and len(value) == 1:
        return value[0]
    if option.kind == TIMESTAMPS and len(value) == 8:
        return int.from_bytes(value[:4], "big"), int.from_bytes(value[4:], "big")
    return None
