"""The cyclic garbage collector, tuned for the emulator's loops.

A frame through the emulator makes a few short-lived objects (a segment, a transmit
record, heap tuples) and almost no reference cycles, so a young-generation collection
every 700 allocations (CPython's default) mostly walks objects that are still alive: about
4% of a replay and 7% of a cycle between two emulated hosts. The network's run and the
streamed replay collect less often while they run; collections still happen, so the
memory they bound stays bounded, and the old thresholds come back after.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

YOUNG_COLLECTION = 20_000
"""Allocations between two young-generation collections inside :func:`fewer_young_collections`."""


@contextlib.contextmanager
def fewer_young_collections() -> Iterator[None]:
    """Raise the young generation's threshold to :data:`YOUNG_COLLECTION` (never lower it)
    for the ``with`` block; the thresholds as they were come back after it."""
    old = gc.get_threshold()
    gc.set_threshold(max(old[0], YOUNG_COLLECTION), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)
