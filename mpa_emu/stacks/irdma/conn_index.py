"""Nodes by connection id, the handle the application holds.

Connection ids are issued in increasing order (``NodeTable.new_conn``) and a node is
filed under its id when it is made, so the live ids form a window from the oldest live
one to the newest. :class:`ConnIndex` keeps that window as a list (8 bytes a connection
instead of a dict entry's 50 or so at 100,000 connections) and moves the few survivors
into a dict when most of the window is dead (a long-lived connection among many that
came and went), so a long run costs no more than its live connections.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final, Generic, TypeVar

T = TypeVar("T")

SPARSE_MIN: Final = 64
"""A window shorter than this is never thinned."""


class ConnIndex(Generic[T]):
    """A mapping from connection id to node, for ids filed in increasing order. Iteration
    is in id order, which is also filing order."""

    __slots__ = ("_base", "_count", "_head", "_last", "_old", "_slots")

    def __init__(self) -> None:
        self._slots: list[T | None] = []
        self._base = 0
        """The id of ``_slots[0]``."""
        self._head = 0
        """Index in ``_slots`` before which every slot is empty."""
        self._count = 0
        """Live entries in ``_slots``."""
        self._old: dict[int, T] = {}
        """Survivors of a thinned window: ids below ``_base``, in id order."""
        self._last = -1
        """The last id filed."""

    def add(self, conn: int, node: T) -> None:
        """File ``node`` under ``conn``, an id above every id filed so far."""
        if conn <= self._last:
            raise ValueError(f"connection id {conn} is not above the last one filed "
                             f"({self._last})")
        self._last = conn
        slots = self._slots
        if not slots:
            self._base = conn
            self._head = 0
        else:
            gap = conn - self._base - len(slots)
            if gap:
                slots.extend([None] * gap)
        slots.append(node)
        self._count += 1

    def get(self, conn: int) -> T | None:
        """The node filed under ``conn``, None when there is none."""
        i = conn - self._base
        if self._head <= i < len(self._slots):
            return self._slots[i]
        if self._old:
            return self._old.get(conn)
        return None

    def __getitem__(self, conn: int) -> T:
        node = self.get(conn)
        if node is None:
            raise KeyError(conn)
        return node

    def __contains__(self, conn: int) -> bool:
        return self.get(conn) is not None

    def __len__(self) -> int:
        return self._count + len(self._old)

    def __iter__(self) -> Iterator[int]:
        # The ids at the time of the call, as a list rather than a generator: the callers
        # sort or copy them anyway, and a generator costs more than the list to drive.
        ids = list(self._old)
        base = self._base
        slots = self._slots
        ids += [base + i for i in range(self._head, len(slots)) if slots[i] is not None]
        return iter(ids)

    def values(self) -> list[T]:
        """The nodes in id order."""
        out = list(self._old.values())
        out.extend(n for n in self._slots[self._head:] if n is not None)
        return out

    def pop(self, conn: int) -> T | None:
        """Take ``conn`` out; its node, or None when it was not filed."""
        slots = self._slots
        i = conn - self._base
        if not self._head <= i < len(slots):
            return self._old.pop(conn, None) if self._old else None
        node = slots[i]
        if node is None:
            return None
        slots[i] = None
        self._count -= 1
        if not self._count:
            self._base += len(slots)
            slots.clear()
            self._head = 0
            return node
        if i == self._head:
            self._advance()
        if len(slots) - self._head >= SPARSE_MIN and self._count * 4 < len(slots) - self._head:
            self._thin()
        return node

    def _advance(self) -> None:
        """Move the head past empty slots; drop the dead front once it is half the list
        (each slot is then moved a bounded number of times)."""
        slots = self._slots
        head = self._head
        while slots[head] is None:
            head += 1
        if head * 2 >= len(slots):
            del slots[:head]
            self._base += head
            head = 0
        self._head = head

    def _thin(self) -> None:
        """Most of the window is dead (an old connection lives on among many that came
        and went): move the survivors into ``_old`` and start an empty window."""
        slots = self._slots
        base = self._base
        old = self._old
        for j in range(self._head, len(slots)):
            node = slots[j]
            if node is not None:
                old[base + j] = node
        self._base += len(slots)
        slots.clear()
        self._head = 0
        self._count = 0
