"""One shared object per value for the numbers and tuples many connections hold alike.

An int above 256 is a 28-byte object of its own each time it is computed: a window, an
MSS or a per-queue tuple of counters that 100,000 connections hold with the same value
costs 100,000 objects unless they share one. :func:`shared` returns the first object
seen with a value (ints and tuples of ints), from a table bounded at :data:`SHARED_MAX`
entries (it starts over when full, so a stream of distinct values costs no more than
the table). :func:`shared_bytes` does the same for short byte strings (private data, the
RTR every connection receives). :class:`SharedRecords` shares the named-tuple records
that connections change a field at a time (a node's settings, a QP's context).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Final, Generic, TypeVar

H = TypeVar("H", bound=Hashable)

SHARED_MAX: Final = 4096
"""Distinct values kept for reuse; past this many the table starts over."""
SHARED_BYTES_MAX: Final = 64
"""Longest byte string :func:`shared_bytes` shares (so the table stays small)."""

_TABLE: Final[dict[object, object]] = {}


def shared(value: H) -> H:
    """The object already standing for ``value``, or ``value`` itself, remembered for
    next time. Meant for ints and tuples of ints: a value equal to a remembered one but
    of another type (``True`` and ``1``) is returned as it is."""
    found = _TABLE.get(value)
    if found is None:
        if len(_TABLE) >= SHARED_MAX:
            _TABLE.clear()
        _TABLE[value] = value
        return value
    return found if type(found) is type(value) else value


_FLOW_INTS: Final[dict[object, object]] = {}


def shared_flow_int(value: object) -> object:
    """:func:`shared` for a port or a VLAN id of a flow key, from a table of its own: at
    most 65,536 values exist (0xFFFF is the no-VLAN id), and every connection of a
    busy host has a port of its own, which would flush the general table. An int above
    256 is a 28-byte object each time it is computed (a key built in the compiled build
    boxes its ints anew), so two keys that name a port share one object. Typed
    ``object``: the compiled build keeps an ``int`` unboxed and boxes it anew."""
    found = _FLOW_INTS.get(value)
    if found is None:
        if type(value) is not int or not 0 <= value <= 0xFFFF:
            return value
        _FLOW_INTS[value] = value
        return value
    return found


def shared_bytes(value: bytes) -> bytes:
    """:func:`shared` for a byte string of at most :data:`SHARED_BYTES_MAX` bytes;
    a longer one is returned as it is."""
    return shared(value) if len(value) <= SHARED_BYTES_MAX else value


R = TypeVar("R", bound=tuple[object, ...])

_RECORDS: Final[list[SharedRecords[Any]]] = []
"""Every :class:`SharedRecords` made, for :func:`forget`."""


def forget() -> None:
    """Forget every shared value and remembered step. Nothing changes but memory and
    speed: for a process that runs many independent networks one after another (the
    matrix), whose values have nothing to share with the next ones."""
    _TABLE.clear()
    _FLOW_INTS.clear()
    for records in _RECORDS:
        records.forget_steps()


class SharedRecords(Generic[R]):
    """Records of one named-tuple type that many connections hold with the same values,
    shared: :meth:`changed` returns the shared record equal to ``old`` with some fields
    changed, and remembers the step from ``old``, so that a write the connections before
    made costs one small dict lookup. A named tuple rather than a plain one: the compiled
    build would keep a plain fixed-size tuple unboxed in its holder and box a new copy at
    every read.

    Every field must hold exactly its declared type (never a bool for an int), so that
    records comparing equal are interchangeable."""

    __slots__ = ("_cls", "_field_steps", "_index", "_steps", "_steps_max")

    def __init__(self, cls: type[R], fields: tuple[str, ...], steps_max: int = 1024) -> None:
        _RECORDS.append(self)
        self._cls = cls
        self._index = {name: i for i, name in enumerate(fields)}
        self._steps: dict[tuple[int, tuple[str, ...], tuple[object, ...]], tuple[R, R]] = {}
        self._field_steps: dict[tuple[int, str, object], tuple[R, R]] = {}
        """The steps of :meth:`changed_field`, keyed without a tuple of the changes."""
        self._steps_max = steps_max

    def forget_steps(self) -> None:
        """Forget the remembered steps (:func:`forget`); the records stay valid."""
        self._steps.clear()
        self._field_steps.clear()

    def share(self, record: R) -> R:
        """The shared record equal to ``record`` (``record`` itself the first time)."""
        return shared(record)

    def changed(self, old: R, changes: dict[str, object]) -> R:
        """The shared record equal to ``old`` with ``changes`` (field name to value)."""
        return self.changed_fields(old, tuple(changes), tuple(changes.values()))

    def changed_fields(self, old: R, names: tuple[str, ...], values: tuple[object, ...]) -> R:
        """:meth:`changed` with the names and the new values side by side; the cheapest
        form for a caller whose ``names`` is a constant (the one tuple each time)."""
        key = (id(old), names, values)
        step = self._steps.get(key)
        if step is not None and step[0] is old:
            return step[1]
        fields: list[object] = list(old)
        index = self._index
        for i, name in enumerate(names):
            fields[index[name]] = values[i]
        new = shared(tuple.__new__(self._cls, fields))
        if new == old:
            new = old
        if len(self._steps) >= self._steps_max:
            self._steps.clear()
        # The entry holds ``old``, so its id is not reused while the entry exists.
        self._steps[key] = (old, new)
        return new

    def changed_field(self, old: R, name: str, value: object) -> R:
        """:meth:`changed` for one field: the shared record equal to ``old`` with field
        ``name`` set to ``value``."""
        key = (id(old), name, value)
        step = self._field_steps.get(key)
        if step is not None and step[0] is old:
            return step[1]
        new = self.changed(old, {name: value})
        steps = self._field_steps
        if len(steps) >= self._steps_max:
            steps.clear()
        steps[key] = (old, new)  # holds ``old``: its id is not reused meanwhile
        return new
