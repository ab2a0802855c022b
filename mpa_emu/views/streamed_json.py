"""JSON written as it is produced: the same text as ``json.dumps(obj, indent=2,
sort_keys=True)``, with long arrays given as :class:`Rows` that are read (from disk, say)
while they are written instead of held in memory.

A report whose arrays grow with the run (``mpa-emu run --json``: every frame, every
upcall) builds its dictionary with :class:`Rows` where a list would be, and
:func:`write_json` writes it; :func:`materialize` turns it into plain values for
``json.dumps`` when the whole thing fits in memory.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TextIO, TypeVar

T = TypeVar("T")

INDENT = 2


class Rows(Generic[T]):
    """An array made when it is read: ``make(item)`` for each item of ``source``, which
    is read again each time the rows are (a list on disk, a list in memory)."""

    def __init__(self, source: Iterable[T], make: Callable[[T], Any]) -> None:
        self.source = source
        self.make = make

    def __iter__(self) -> Iterator[Any]:
        make = self.make
        for item in self.source:
            yield make(item)


def materialize(obj: Any) -> Any:
    """``obj`` with every :class:`Rows` made into a list (recursively)."""
    if isinstance(obj, Rows):
        return [materialize(v) for v in obj]
    if isinstance(obj, dict):
        return {k: materialize(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [materialize(v) for v in obj]
    return obj


def write_json(obj: Any, out: TextIO) -> None:
    """Write ``obj`` and a newline: byte for byte ``json.dumps(materialize(obj),
    indent=2, sort_keys=True) + "\\n"``, holding one row at a time."""
    _write(obj, out, 0)
    out.write("\n")


def _contains_rows(obj: Any) -> bool:
    if isinstance(obj, Rows):
        return True
    if isinstance(obj, dict):
        return any(_contains_rows(v) for v in obj.values())
    if isinstance(obj, list | tuple):
        return any(_contains_rows(v) for v in obj)
    return False


def _write(obj: Any, out: TextIO, level: int) -> None:
    if not _contains_rows(obj):
        # Plain values: json itself, its lines shifted to this depth (a JSON string never
        # holds a raw newline, so every newline is json's own).
        text = json.dumps(obj, indent=INDENT, sort_keys=True)
        out.write(text.replace("\n", "\n" + " " * (INDENT * level)) if level else text)
        return
    inner = " " * (INDENT * (level + 1))
    if isinstance(obj, dict):
        out.write("{")
        for n, key in enumerate(sorted(obj)):
            out.write(("," if n else "") + "\n" + inner + json.dumps(key) + ": ")
            _write(obj[key], out, level + 1)
        out.write("\n" + " " * (INDENT * level) + "}" if obj else "}")
        return
    out.write("[")
    empty = True
    for item in obj:
        out.write(("" if empty else ",") + "\n" + inner)
        _write(item, out, level + 1)
        empty = False
    out.write("]" if empty else "\n" + " " * (INDENT * level) + "]")
