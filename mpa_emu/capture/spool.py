"""Text pieces parked in a temporary file and written back in the order of their keys.

The reading commands stream a capture and finish its connections in the order the
connections end, while their reports list connections in the order they began. A
:class:`Spool` keeps the pieces on disk and only their places (three integers each) in
memory, so a report on a capture of any length is written in bounded memory.
"""

from __future__ import annotations

import tempfile
from array import array
from collections.abc import Iterator


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
