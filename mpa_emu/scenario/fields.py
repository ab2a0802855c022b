"""Typed reading of one TOML table with errors that name the file, line and key.

A :class:`Table` wraps a dict from ``tomllib`` at a key path. Its getters check types and
ranges and raise :class:`ScenarioError` such as
``v2.toml:14: connect[1].port: expected an integer 1..65535, got "abc"``; :meth:`done`
reports any key that was never read (a typo) the same way.
"""

from __future__ import annotations

import re
from typing import Any

from mpa_emu.errors import MpaEmuError
from mpa_emu.ranges import EMULATOR_RANGES, Range
from mpa_emu.scenario.lines import KeyPath, LineIndex
from mpa_emu.ulp.upper.formats import encode_private_data

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ns|us|µs|ms|s|m)\s*$")
_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000,
          "m": 60_000_000_000}


PATTERN = b"0123456789abcdefghijklmnopqrstuvwxyz"
"""Filler of ``private_data_size``."""


class ScenarioError(MpaEmuError, ValueError):
    """A scenario file that cannot be used: the message names the file, line and key."""

    def __init__(self, message: str, *, line: int | None = None, key: str = "") -> None:
        super().__init__(message)
        self.line = line
        self.key = key


def key_text(path: KeyPath) -> str:
    """``connect[1].port`` from ``("connect", 1, "port")`` (1-based entries for people)."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part + 1}]"
        else:
            out += ("." if out else "") + part
    return out


class Source:
    """A scenario file's name and line index, for messages."""

    def __init__(self, name: str, text: str) -> None:
        self.name = name
        self.lines = LineIndex(text)

    def where(self, path: KeyPath) -> str:
        """``file:line`` (or just the file name when the line is unknown)."""
        line = self.lines.line(path)
        return f"{self.name}:{line}" if line is not None else self.name

    def error(self, path: KeyPath, message: str) -> ScenarioError:
        """An error at ``path``."""
        key = key_text(path)
        prefix = f"{key}: " if key else ""
        return ScenarioError(f"{self.where(path)}: {prefix}{message}",
                             line=self.lines.line(path), key=key)


def _show(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return repr(value)


class Table:
    """One TOML table being read."""

    def __init__(self, source: Source, path: KeyPath, data: Any) -> None:
        if not isinstance(data, dict):
            raise source.error(path, f"expected a table, got {_show(data)}")
        self.source = source
        self.path = path
        self.data: dict[str, Any] = data
        self._used: set[str] = set()

    def has(self, key: str) -> bool:
        """Whether ``key`` is present."""
        return key in self.data

    def error(self, key: str | None, message: str) -> ScenarioError:
        """An error about ``key`` of this table (or the table itself)."""
        return self.source.error(self.path if key is None else (*self.path, key), message)

    def line(self, key: str | None = None) -> int | None:
        """The line of ``key`` (or of the table)."""
        return self.source.lines.line(self.path if key is None else (*self.path, key))

    def raw(self, key: str, default: Any = None) -> Any:
        """The value as parsed, marked as read."""
        self._used.add(key)
        return self.data.get(key, default)

    def _need(self, key: str, default: Any, required: bool) -> Any:
        value = self.raw(key, default)
        if value is None and required:
            raise self.error(None, f"missing required key {key!r}")
        return value

    def text(self, key: str, default: str | None = None, *, required: bool = False,
            choices: tuple[str, ...] | None = None) -> Any:
        """A string (or ``default``); ``choices`` restricts it."""
        value = self._need(key, default, required)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.error(key, f"expected a string, got {_show(value)}")
        if choices is not None and value not in choices:
            raise self.error(key, f"expected one of {', '.join(choices)}; got {_show(value)}")
        return value

    def integer(self, key: str, default: int | None = None, *, required: bool = False,
            lo: int | None = None, hi: int | None = None) -> Any:
        """An integer within ``lo..hi``."""
        value = self._need(key, default, required)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"expected an integer, got {_show(value)}")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            span = f"{lo if lo is not None else '-inf'}..{hi if hi is not None else 'inf'}"
            raise self.error(key, f"expected an integer {span}, got {value}")
        return value

    def ranged(self, key: str, allowed: Range, default: int | None = None, *,
               required: bool = False) -> Any:
        """An integer within ``allowed`` (a :class:`~mpa_emu.ranges.Range` of one of the
        range tables); the message names the range and the type behind it."""
        value = self._need(key, default, required)
        if value is None:
            return None
        problem = allowed.problem(value)
        if problem is not None:
            raise self.error(key, problem)
        return value

    def flag(self, key: str, default: bool | None = None) -> Any:
        """A boolean."""
        value = self.raw(key, default)
        if value is not None and not isinstance(value, bool):
            raise self.error(key, f"expected true or false, got {_show(value)}")
        return value

    def prob(self, key: str) -> float:
        """A probability 0..1 (default 0)."""
        value = self.raw(key, 0.0)
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not 0.0 <= value <= 1.0:
            raise self.error(key, f"expected a probability between 0 and 1, got {_show(value)}")
        return float(value)

    def duration(self, key: str, default: int | None = None, *,
                 required: bool = False) -> Any:
        """A virtual duration in ns: an integer of nanoseconds or a string with a unit
        (``"250ns"``, ``"10us"``, ``"1.5ms"``, ``"2s"``, ``"5m"``)."""
        value = self._need(key, default, required)
        if value is None:
            return None
        ns: int | None = None
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            ns = value
        elif isinstance(value, str):
            m = _DURATION.match(value)
            if m:
                number = float(m.group(1)) * _UNITS[m.group(2)]
                # Hundreds of digits make infinity: as much too long as any other.
                ns = round(number) if number < 2 * EMULATOR_RANGES["time_ns"].hi else (
                    EMULATOR_RANGES["time_ns"].hi + 1)
        if ns is None:
            raise self.error(key, "expected a duration such as \"10us\", \"1.5ms\", \"2s\" "
                             f"or an integer of nanoseconds, got {_show(value)}")
        allowed = EMULATOR_RANGES["time_ns"]
        if ns > allowed.hi:
            raise self.error(key, f"expected a duration of at most {allowed.hi} ns "
                             f"({allowed.why}), got {_show(value)}")
        return ns

    def data_bytes(self, key: str) -> bytes | None:
        """Private data: ``key`` as UTF-8 text or as a table naming a format
        (:mod:`mpa_emu.ulp.upper.formats`), ``key_hex`` as hex digits, or ``key_size``
        bytes of a printable pattern (for length limits); at most one of them."""
        text = self.raw(key)
        hexed = self.raw(f"{key}_hex")
        size = self.raw(f"{key}_size")
        given = [k for k, v in ((key, text), (f"{key}_hex", hexed), (f"{key}_size", size))
                 if v is not None]
        if len(given) > 1:
            raise self.error(given[1], f"give only one of {', '.join(given)}")
        if size is not None:
            count: int = self.integer(f"{key}_size", lo=0, hi=65535)
            return (PATTERN * (count // len(PATTERN) + 1))[:count]
        if isinstance(text, dict):
            # By format: { nvme = { qid = 1, hsqsize = 127 } } (mpa_emu.ulp.upper.formats).
            try:
                return encode_private_data(text)
            except ValueError as exc:
                raise self.error(key, str(exc)) from None
        if text is not None:
            if not isinstance(text, str):
                raise self.error(key, f"expected a string, got {_show(text)}")
            return text.encode()
        if hexed is not None:
            if not isinstance(hexed, str):
                raise self.error(f"{key}_hex", f"expected a hex string, got {_show(hexed)}")
            try:
                return bytes.fromhex(hexed.replace(":", "").replace(" ", ""))
            except ValueError:
                raise self.error(f"{key}_hex", f"not hex digits: {_show(hexed)}") from None
        return None

    def table(self, key: str) -> Table | None:
        """A sub-table, or None when absent."""
        value = self.raw(key)
        return None if value is None else Table(self.source, (*self.path, key), value)

    def tables(self, key: str) -> list[Table]:
        """An array of tables (``[[key]]``); absent means empty."""
        value = self.raw(key, [])
        if isinstance(value, dict):
            value = [value]
        if not isinstance(value, list):
            raise self.error(key, f"expected [[{key}]] tables, got {_show(value)}")
        return [Table(self.source, (*self.path, key, i), v) for i, v in enumerate(value)]

    def strings(self, key: str) -> list[str]:
        """A string or an array of strings."""
        value = self.raw(key, [])
        if isinstance(value, str):
            return [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(key, f"expected a string or an array of strings, got {_show(value)}")
        return list(value)

    def done(self) -> None:
        """Raise for the first key that was never read (unknown key, likely a typo)."""
        for key in self.data:
            if key not in self._used:
                known = ", ".join(sorted(self._used))
                raise self.error(key, f"unknown key {key!r} (known here: {known})")
