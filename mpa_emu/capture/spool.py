"""Temporary files that keep long outputs out of memory.

* :class:`Spool`: text pieces parked on disk and written back in the order of their keys.
  The reading commands stream a capture and finish its connections in the order the
  connections end, while their reports list connections in the order they began; the
  spool keeps the pieces on disk and only their places (three integers each) in memory.
* :class:`RecordSpool`: a list of records (dataclass instances) whose items go to disk
  past the first few hundred, read back in order or by index: the scripted verbs and
  upcalls of a streamed replay, the frames, trace records and upcalls of a spooled run.
* :class:`SettlingLog`: a :class:`RecordSpool` in front of which items wait in memory
  until they are settled (a captured frame still on the wire may yet get a note), so
  that what reaches the disk never changes again.

Each keeps a handful of integers per chunk of items in memory, so a report on a capture
or a run of any length is written in bounded memory.
"""

from __future__ import annotations

import dataclasses
import operator
import os
import pickle
import tempfile
from array import array
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any, Generic, Protocol, TypeVar, overload

T = TypeVar("T")


class Spool:
    """Pieces of text, each with an integer key; read back sorted by key (pieces with
    the same key in the order they were added)."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        self._keys = array("q")
        self._offsets = array("q")
        self._lengths = array("q")
        self._end = 0

    def __len__(self) -> int:
        return len(self._keys)

    def add(self, key: int, text: str) -> None:
        """Park ``text`` under ``key``."""
        data = text.encode("utf-8")
        self._file.seek(self._end)
        self._file.write(data)
        self._keys.append(key)
        self._offsets.append(self._end)
        self._lengths.append(len(data))
        self._end += len(data)

    def pieces(self) -> Iterator[str]:
        """Every piece, sorted by key."""
        keys = self._keys
        for i in sorted(range(len(keys)), key=keys.__getitem__):
            self._file.seek(self._offsets[i])
            yield self._file.read(self._lengths[i]).decode("utf-8")

    def close(self) -> None:
        """Delete the temporary file."""
        self._file.close()

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


class RecordLog(Protocol[T]):
    """What the emulator's record lists offer, in memory (a ``list``) or on disk
    (:class:`RecordSpool`, :class:`SettlingLog`): append, length, iteration in order and
    an item by index."""

    def append(self, item: T, /) -> None:
        """Add ``item`` at the end."""

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[T]: ...

    def __getitem__(self, index: int, /) -> T: ...


class RecordSpool(Sequence[T]):
    """A list that keeps its items on disk past the first :attr:`CHUNK`: appended in
    order, read back in order (:meth:`__iter__`) or one by index (one chunk read).

    Items go to disk as rows (tuples of plain values) in pickled chunks: ``cls`` a
    dataclass, whose fields make the row and whose constructor takes it back, or
    ``to_row``/``from_row`` for anything else. Memory holds the last chunk and one file
    offset per chunk."""

    CHUNK = 256

    def __init__(self, cls: type[T] | None = None, *,
                 to_row: Callable[[T], tuple[Any, ...]] | None = None,
                 from_row: Callable[[tuple[Any, ...]], T] | None = None) -> None:
        if to_row is not None and from_row is not None:
            self._row = to_row
            self._make = from_row
        elif cls is not None:
            # Rows of the fields: pickling a slotted dataclass per item is slower and
            # kept memory alive.
            names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
            # attrgetter of one name gives the value itself, of several a tuple.
            if len(names) > 1:
                self._row = operator.attrgetter(*names)
            else:
                one: Callable[[T], object] = operator.attrgetter(names[0])
                self._row = lambda item: (one(item),)
            make: Callable[..., T] = cls
            self._make = lambda row: make(*row)
        else:
            raise TypeError("RecordSpool needs a dataclass or to_row and from_row")
        self._head: list[T] = []
        self._file: IO[bytes] | None = None
        self._chunks = array("q")
        """File offset of every chunk on disk."""
        self._spilled = 0

    def append(self, item: T) -> None:
        """Add ``item`` at the end."""
        head = self._head
        head.append(item)
        if len(head) >= self.CHUNK:
            if self._file is None:
                self._file = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
            self._file.seek(0, os.SEEK_END)
            self._chunks.append(self._file.tell())
            rows = list(map(self._row, head))
            pickle.dump(rows, self._file, protocol=pickle.HIGHEST_PROTOCOL)
            self._spilled += len(head)
            self._head = []

    def __len__(self) -> int:
        return self._spilled + len(self._head)

    def _chunk(self, number: int) -> list[T]:
        assert self._file is not None
        self._file.seek(self._chunks[number])
        # One unpickler per chunk: a long-lived one would keep every row in its memo.
        rows: list[tuple[Any, ...]] = pickle.load(self._file)
        return list(map(self._make, rows))

    def __iter__(self) -> Iterator[T]:
        for number in range(len(self._chunks)):
            yield from self._chunk(number)
        yield from list(self._head)

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[T]: ...

    def __getitem__(self, index: int | slice) -> T | Sequence[T]:
        if isinstance(index, slice):
            return list(self)[index]
        size = len(self)
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("RecordSpool index out of range")
        if index >= self._spilled:
            return self._head[index - self._spilled]
        return self._chunk(index // self.CHUNK)[index % self.CHUNK]

    def close(self) -> None:
        """Delete the temporary file (the spool is empty afterwards)."""
        if self._file is not None:
            self._file.close()
            self._file = None
        self._chunks = array("q")
        self._head = []
        self._spilled = 0


class SettlingLog(Generic[T]):
    """Items appended in order wait in memory until ``settled(item)`` holds for them and
    for every item before them; :meth:`settle` then moves them to a :class:`RecordSpool`.
    Reading (length, iteration, index) sees the spooled items followed by the waiting
    ones, as one list."""

    def __init__(self, spool: RecordSpool[T], settled: Callable[[T], bool]) -> None:
        self.spool = spool
        self._settled = settled
        self._waiting: deque[T] = deque()

    def append(self, item: T) -> None:
        """Add ``item`` at the end (it waits until settled)."""
        self._waiting.append(item)

    def settle(self) -> None:
        """Move the settled items at the front to disk."""
        waiting = self._waiting
        settled = self._settled
        spool = self.spool
        while waiting and settled(waiting[0]):
            spool.append(waiting.popleft())

    def waiting(self) -> int:
        """How many items wait in memory."""
        return len(self._waiting)

    def __len__(self) -> int:
        return len(self.spool) + len(self._waiting)

    def __iter__(self) -> Iterator[T]:
        yield from self.spool
        yield from list(self._waiting)

    def __getitem__(self, index: int) -> T:
        done = len(self.spool)
        size = done + len(self._waiting)
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("SettlingLog index out of range")
        return self.spool[index] if index < done else self._waiting[index - done]

    def close(self) -> None:
        """Delete the spool's file and forget the waiting items."""
        self.spool.close()
        self._waiting.clear()
