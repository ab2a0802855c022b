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
from typing import Final

YOUNG_COLLECTION: Final = 20_000
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


class Collector:
    """A full collection every ``every`` ticks, for loops that stream an unbounded input
    through objects that form reference cycles (a network's nodes and hosts, a report's
    records): the young collections promote such garbage, and CPython runs a full
    collection only once the old generation has grown by a quarter, so without this a
    streaming command's peak would grow with its input."""

    __slots__ = ("_count", "every")

    def __init__(self, every: int) -> None:
        self.every = every
        self._count = 0

    def tick(self) -> None:
        """Count one unit of work; collect when ``every`` have passed."""
        self._count += 1
        if self._count >= self.every:
            self._count = 0
            gc.collect()
