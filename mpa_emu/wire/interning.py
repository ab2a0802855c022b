"""One shared object per value for the numbers and tuples many connections hold alike.

An int above 256 is a 28-byte object of its own each time it is computed: a window, an
MSS or a per-queue tuple of counters that 100,000 connections hold with the same value
costs 100,000 objects unless they share one. :func:`shared` returns the first object
seen with a value (ints and tuples of ints), from a table bounded at :data:`SHARED_MAX`
entries (it starts over when full, so a stream of distinct values costs no more than
the table). :func:`shared_bytes` does the same for short byte strings (private data, the
RTR every connection receives).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TypeVar

H = TypeVar("H", bound=Hashable)

SHARED_MAX = 4096
"""Distinct values kept for reuse; past this many the table starts over."""
SHARED_BYTES_MAX = 64
"""Longest byte string :func:`shared_bytes` shares (so the table stays small)."""

_TABLE: dict[object, object] = {}


def shared(value: H) -> H:
    """The object already standing for ``value``, or ``value`` itself, remembered for
    next time. Meant for ints and tuples of ints: a value equal to a remembered one but
    of another type (``True`` and ``1``) is returned as it is."""
    found = _TABLE.get(value)
    if found is None:
        if len(_TABLE) >= SHARED_MAX:
            _TABLE.clear()
        _TABLE[value] = value
        return value
    return found if type(found) is type(value) else value


def shared_bytes(value: bytes) -> bytes:
    """:func:`shared` for a byte string of at most :data:`SHARED_BYTES_MAX` bytes;
    a longer one is returned as it is."""
    return shared(value) if len(value) <= SHARED_BYTES_MAX else value
