"""Deadlines of many owners (sockets, endpoints), earliest first, at a cost that does not
grow with the owners alive.

A stack sets and clears its timers as plain attributes of its records (``s.rtx_at =
...``, ``cep.mpa_timer = None``); asking every record for its deadline at every event
made a host's cost per event proportional to its connections (a connection set up among
10,000 others cost three times one set up among 1,000). :class:`Deadlines` is a heap that
the stack pushes ``(deadline, owner)`` into wherever it arms a timer, and never touches
when it cancels one: an entry is checked against its owner's record when it reaches the
top (lazy deletion), and dropped there if the record no longer holds that deadline. The
answers are those of the scan: the earliest deadline held, and the owners due, in the
order of their ids (the order the stacks' tables were scanned in).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

Holds = Callable[[int, int], bool]
"""``holds(owner, at)``: True while the owner's record still holds the deadline ``at``."""


class Deadlines:
    """A heap of ``(deadline, owner)`` entries with lazy deletion (see the module);
    ``holds`` tells whether an entry still stands."""

    __slots__ = ("_heap", "_holds")

    def __init__(self, holds: Holds) -> None:
        self._heap: list[tuple[int, int]] = []
        self._holds = holds

    def arm(self, owner: int, at: int) -> int:
        """Note that ``owner`` holds a deadline at ``at``; returns ``at``, so that arming
        reads ``record.timer = deadlines.arm(ident, when)``."""
        heapq.heappush(self._heap, (at, owner))
        return at

    def earliest(self) -> int | None:
        """The earliest deadline an owner still holds (``None``: none), entries no longer
        held dropped on the way."""
        heap = self._heap
        holds = self._holds
        while heap:
            at, owner = heap[0]
            if holds(owner, at):
                return at
            heapq.heappop(heap)
        return None

    def due(self, now_ns: int) -> list[int]:
        """The owners of every entry at or before ``now_ns``, each once, smallest id
        first; their entries are removed (the caller checks what each still holds)."""
        heap = self._heap
        owners: set[int] = set()
        while heap and heap[0][0] <= now_ns:
            owners.add(heapq.heappop(heap)[1])
        return sorted(owners)

    def next_due(self, now_ns: int) -> tuple[int, int] | None:
        """The earliest held entry at or before ``now_ns`` as ``(deadline, owner)``
        (ties: the smallest owner), removed; ``None`` when none is due."""
        heap = self._heap
        while heap and heap[0][0] <= now_ns:
            at, owner = heapq.heappop(heap)
            if self._holds(owner, at):
                return at, owner
        return None

    def __len__(self) -> int:
        return len(self._heap)
