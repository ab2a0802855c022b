"""Line numbers for TOML keys: ``tomllib`` returns plain dicts, so error messages and failed
expectations find the line of a key here.

A key path is a tuple such as ``("connect", 1, "port")`` (array-of-tables entries are
0-based indexes). The locator understands table headers, arrays of tables, dotted keys and
``key = value`` lines; a value spanning several lines (multi-line arrays, strings) is
located at its first line, and keys inside an inline table at the inline table's line.
"""

from __future__ import annotations

import re

KeyPath = tuple[str | int, ...]
"""A key's place in the document: table names and array-of-tables indexes."""

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_PART = r"""(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')"""
_KEY = re.compile(rf"^\s*({_PART}(?:\s*\.\s*{_PART})*)\s*=")


def _split_key(text: str) -> list[str]:
    parts = re.findall(r"""[A-Za-z0-9_-]+|"[^"]*"|'[^']*'""", text)
    return [p[1:-1] if p[:1] in "\"'" else p for p in parts]


class LineIndex:
    """Where each key of a TOML document is defined."""

    def __init__(self, text: str) -> None:
        self._lines: dict[KeyPath, int] = {}
        self._arrays: dict[tuple[str, ...], int] = {}  # array-of-tables path -> entries
        table: KeyPath = ()
        in_multiline = False
        for number, line in enumerate(text.splitlines(), start=1):
            if in_multiline:
                if line.count('"""') % 2 or line.count("'''") % 2:
                    in_multiline = False
                continue
            header = _HEADER.match(line)
            if header and not _KEY.match(line):
                names = tuple(_split_key(header.group(2)))
                if header.group(1) == "[[":
                    index = self._arrays.get(names, 0)
                    self._arrays[names] = index + 1
                    table = (*self._resolve(names[:-1]), names[-1], index)
                    # The array itself starts at its first entry (an unknown array name
                    # is reported at that line).
                    self._lines.setdefault(table[:-1], number)
                else:
                    table = self._resolve(names)
                self._lines.setdefault(table, number)
                continue
            key = _KEY.match(line)
            if key:
                path = (*table, *_split_key(key.group(1)))
                self._lines.setdefault(path, number)
                if line.count('"""') % 2 or line.count("'''") % 2:
                    in_multiline = True

    def _resolve(self, names: tuple[str, ...]) -> KeyPath:
        """A header path with the current index of every array of tables along it
        (``[host.config]`` after ``[[host]]`` belongs to the last host)."""
        out: list[str | int] = []
        for i, name in enumerate(names):
            out.append(name)
            entries = self._arrays.get(names[: i + 1])
            if entries:
                out.append(entries - 1)
        return tuple(out)

    def line(self, path: KeyPath) -> int | None:
        """The line defining ``path``, or of its nearest enclosing table or key."""
        for cut in range(len(path), 0, -1):
            found = self._lines.get(tuple(path[:cut]))
            if found is not None:
                return found
        return None
