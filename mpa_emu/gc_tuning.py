"""The cyclic garbage collector, tuned for the emulator's loops: the whole policy lives
here, and every path that streams a capture or a run (inspect, explain, diagram, replay,
judge) runs inside :func:`streaming`.

Three costs, three rules:

- A frame through the emulator makes a few short-lived objects (a segment, a transmit
  record, heap tuples) and almost no reference cycles, so a young-generation collection
  every 700 allocations (CPython's default) mostly walks objects that are still alive:
  about 4% of a replay and 7% of a cycle between two emulated hosts. Inside
  :func:`streaming` (and the network's run) young collections come less often.
- A stream whose records form reference cycles (a network's nodes, a report's web of
  records) frees them only by full collections, which CPython runs once the old
  generation has grown by a quarter: too late to keep a streaming command's peak flat.
  :class:`Collector` runs one every so many units of work; a full collection walks every
  live object, so with many records alive at once (a capture of connections that stay
  open) a fixed interval made the cost per unit grow with the records alive. The
  interval grows with the heap instead (:meth:`Collector.tick`): the cost per unit stays
  flat, and the garbage between two collections stays a bounded share of the heap.
- A command that holds its whole input (replay --semantic --profile auto keeps the
  recording and every profile's report) would have each full collection walk all of it
  again, ever more often as it grows. :meth:`Collector.keep` sets what is alive aside
  (``gc.freeze``) until the outermost :func:`streaming` block ends.

Collection only reclaims memory: no output depends on when it runs.
"""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Iterator
from typing import Final

YOUNG_COLLECTION: Final = 20_000
"""Allocations between two young-generation collections inside :func:`fewer_young_collections`
and :func:`streaming`."""


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


class _Policy:
    """What the outermost :func:`streaming` block set up, for the blocks nested in it."""

    depth = 0
    thresholds: tuple[int, ...] = ()
    frozen = False


class Collector:
    """A full collection every ``every`` ticks or more (see :meth:`tick`; ``None``: none
    but those CPython runs itself), for loops that stream an unbounded input through
    objects that form reference cycles: the young collections promote such garbage, and
    CPython runs a full collection only once the old generation has grown by a quarter,
    so without this a streaming command's peak would grow with its input."""

    __slots__ = ("_count", "_due", "_heap", "every")

    def __init__(self, every: int | None) -> None:
        self.every = every
        self._count = 0
        self._due = every or 0
        self._heap = max(sys.getallocatedblocks(), 1)
        """The heap when the loop began (allocated blocks): the unit the interval scales
        by."""

    def tick(self) -> None:
        """Count one unit of work; collect when the interval has passed. The interval is
        ``every`` ticks while the heap is no larger than when the loop began, and grows
        in proportion to it beyond: a collection walks the heap, so its cost per tick
        stays what it was on the heap the loop began with, however many records are alive
        at once."""
        if self.every is None:
            return
        self._count += 1
        if self._count >= self._due:
            self._count = 0
            gc.collect()
            live = sys.getallocatedblocks()
            self._due = self.every * max(1, live // self._heap)

    def keep(self, *, collect: bool = True) -> None:
        """What is alive now stays alive until the outermost :func:`streaming` block ends
        (a loaded recording, the reports of the profiles already replayed): collected
        once (unless ``collect`` is False: nothing made since the last collection is
        garbage), then set aside (``gc.freeze``), so that later collections walk only what
        was made after. Outside a :func:`streaming` block, nothing is done."""
        if not _Policy.depth:
            return
        if collect:
            gc.collect()
        gc.freeze()
        _Policy.frozen = True


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No cyclic collection in the block (a capture being loaded: hundreds of thousands of
    objects that all stay alive, which each collection the allocations trigger would walk
    again); the collector is on again after it if it was before."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextlib.contextmanager
def streaming(every: int | None = None) -> Iterator[Collector]:
    """The collector's policy for a path that streams a capture or a run: young
    collections less often (the young threshold at least :data:`YOUNG_COLLECTION`), and
    a :class:`Collector` of ``every`` ticks for the loop. Blocks nest (a replay judging
    its connections, explain reading inspect's stream): the outermost one sets the
    thresholds up and puts them back, and ends what :meth:`Collector.keep` set aside."""
    if not _Policy.depth:
        _Policy.thresholds = gc.get_threshold()
        gc.set_threshold(max(_Policy.thresholds[0], YOUNG_COLLECTION),
                         *_Policy.thresholds[1:])
    _Policy.depth += 1
    try:
        yield Collector(every)
    finally:
        _Policy.depth -= 1
        if not _Policy.depth:
            gc.set_threshold(*_Policy.thresholds)
            if _Policy.frozen:
                _Policy.frozen = False
                gc.unfreeze()
