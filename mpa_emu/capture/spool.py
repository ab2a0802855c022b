"""The spools: what a command over a long capture produces, parked in a temporary file so
that memory stays bounded whatever the capture's length.

The reading commands stream a capture and finish its connections in the order the
connections end, while their reports list connections in the order they began. A
:class:`Spool` keeps such text pieces on disk and only their places (three integers
each) in memory, and writes them back in the order of their keys. A
:class:`RecordSpool` is an append-only list of records (the scripted verbs and upcalls
of a streamed replay) that goes to disk in chunks and is read back in order.
"""

from __future__ import annotations

import dataclasses
import operator
import os
import pickle
import tempfile
from array import array
from collections.abc import Callable, Iterator, Sequence
from typing import IO, TypeVar, overload

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


class RecordSpool(Sequence[T]):
    """A list of records (dataclass instances of one class) that keeps its items on disk
    in chunks past the first few hundred: the scripted verbs and upcalls of a long
    replayed capture, read again only for the JSON report."""

    _CHUNK = 256

    def __init__(self, cls: type[T]) -> None:
        # Items go to disk as tuples of their fields: pickling a slotted dataclass per
        # item is slower and kept memory alive.
        self._cls = cls
        names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
        # attrgetter of one name gives the value itself, of several a tuple.
        if len(names) > 1:
            self._row: Callable[[T], tuple[object, ...]] = operator.attrgetter(*names)
        else:
            one: Callable[[T], object] = operator.attrgetter(names[0])
            self._row = lambda item: (one(item),)
        self._head: list[T] = []
        self._file: IO[bytes] | None = None
        self._spilled = 0

    def append(self, item: T) -> None:
        """Add ``item`` at the end."""
        head = self._head
        head.append(item)
        if len(head) >= self._CHUNK:
            if self._file is None:
                self._file = tempfile.TemporaryFile()  # noqa: SIM115 - lives with the spool
            self._file.seek(0, os.SEEK_END)
            rows = list(map(self._row, self._head))
            pickle.dump(rows, self._file, protocol=pickle.HIGHEST_PROTOCOL)
            self._spilled += len(self._head)
            self._head = []

    def __len__(self) -> int:
        return self._spilled + len(self._head)

    def __iter__(self) -> Iterator[T]:
        pos, left = 0, self._spilled
        while left > 0 and self._file is not None:
            self._file.seek(pos)
            rows: list[tuple[object, ...]] = pickle.load(self._file)
            pos = self._file.tell()
            left -= len(rows)
            cls = self._cls
            for row in rows:
                yield cls(*row)
        yield from list(self._head)

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[T]: ...

    def __getitem__(self, index: int | slice) -> T | Sequence[T]:
        items = list(self)
        return items[index]
