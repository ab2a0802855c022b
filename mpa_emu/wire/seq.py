"""TCP sequence numbers: arithmetic modulo 2**32 (RFC 9293 section 3.4), the one home of
sequence arithmetic in mpa_emu.

Every comparison of two sequence numbers is a comparison of their difference modulo
2**32 against half the space: ``a`` is after ``b`` when ``a - b`` (mod 2**32) is below
2**31, before ``b`` when ``b - a`` is.

Two numbers exactly 2**31 apart are not ordered: RFC 1982 section 3.2 leaves that
comparison undefined, RFC 9293 section 3.4 gives no rule for it, and here neither is
before, after, at or after, or at or before the other, whichever way round (a peer that
acknowledges half the space away acknowledges nothing). :func:`diff` still has to give
such a pair a sign (-2**31); its sign is a distance, not an order.
"""

from __future__ import annotations

from typing import Final

MOD: Final = 1 << 32
"""The size of the sequence space."""
MASK: Final = MOD - 1
"""``x & MASK`` is ``x`` modulo 2**32."""
_HALF: Final = 1 << 31


def add(seq: int, n: int) -> int:
    """``seq + n`` modulo 2**32 (``n`` may be negative)."""
    return (seq + n) & MASK


def diff(a: int, b: int) -> int:
    """``a - b`` in sequence space as a signed value in [-2**31, 2**31) (a pair 2**31
    apart gets -2**31, though neither is before the other)."""
    d = (a - b) & MASK
    return d - MOD if d >= _HALF else d


def after(a: int, b: int) -> bool:
    """``a`` comes strictly after ``b``."""
    return a != b and (a - b) & MASK < _HALF


def at_or_after(a: int, b: int) -> bool:
    """``a`` is ``b`` or comes after it."""
    return (a - b) & MASK < _HALF


def before(a: int, b: int) -> bool:
    """``a`` comes strictly before ``b`` (RFC 9293 section 3.4's ``a < b``)."""
    return a != b and (b - a) & MASK < _HALF


def at_or_before(a: int, b: int) -> bool:
    """``a`` is ``b`` or comes before it (``a =< b``)."""
    return (b - a) & MASK < _HALF


def between(seq: int, low: int, high: int) -> bool:
    """``low <= seq <= high`` in sequence space, as cm.c's ``between(seq1, seq2, seq3)``
    computes it: ``high - low >= seq - low``, both modulo 2**32."""
    return (high - low) & MASK >= (seq - low) & MASK
