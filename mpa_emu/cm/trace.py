"""Structured trace: one JSON object per line, each naming the kernel function behind it.

Kinds used across the emulator: ``segment_sent``, ``segment_received``,
``segment_dropped`` (with ``reason``), ``state_changed``, ``timer_fired``,
``event_queued``, ``upcall``, ``kernel_leak``, ``kernel_bug``, ``fault``, and:

* ``kernel_log``: a line the driver writes to the kernel log, emitted by a stack's core
  (irdma: :mod:`mpa_emu.stacks.irdma.log_lines`) at the point the kernel prints it. Fields:
  ``level`` (``"debug"``, ``"info"``, ``"warn"`` or ``"err"``), ``text`` (the format
  string filled in as the kernel prints it, without the device prefix and the trailing
  newline), ``dynamic_debug`` (true for ``ibdev_dbg``/``siw_dbg``/``pr_debug`` lines,
  seen only with dynamic debug on), ``conn`` (the connection, when there is one); the
  record's ``fn`` is the kernel function.
* ``rdma_cm_event``: what iw_cm and rdma_cm made of one upcall, emitted by the host
  (never the core) right after the upcall (:mod:`mpa_emu.ulp.rdma_cm`). Fields: ``conn``,
  ``iw_event`` and ``iw_status`` (the upcall), ``iw_cm_old``/``iw_cm_new``/``iw_cm_fn``
  (iw_cm's state change and the iwcm.c function), ``event`` (``RDMA_CM_EVENT_...``, null
  when nothing reached the application, ``note`` then saying why), ``status``, and for an
  event ``value`` (its ``enum rdma_cm_event_type`` value), ``private_data_len``,
  ``initiator_depth``, ``responder_resources``; ``bug`` where iwcm.c would BUG(). The
  record's ``fn`` is the cma.c function for an event, the iwcm.c one otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mpa_emu.capture.spool import RecordLog


@dataclass(frozen=True, slots=True)
class TraceRecord:
    """One trace entry. ``fields`` holds kind-specific values (JSON-serialisable)."""

    time_ns: int
    host: str
    kind: str
    fn: str
    fields: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        """Serialise as one compact JSON line (keys sorted, so output is reproducible)."""
        obj: dict[str, Any] = {"t_ns": self.time_ns, "host": self.host, "kind": self.kind,
                               "fn": self.fn}
        obj.update(self.fields)
        return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=_default)


_new_object = object.__new__
_set_time_ns = TraceRecord.__dict__["time_ns"].__set__
_set_host = TraceRecord.__dict__["host"].__set__
_set_kind = TraceRecord.__dict__["kind"].__set__
_set_fn = TraceRecord.__dict__["fn"].__set__
_set_fields = TraceRecord.__dict__["fields"].__set__


def make_record(time_ns: int, host: str, kind: str, fn: str,
                fields: dict[str, Any]) -> TraceRecord:
    """``TraceRecord(time_ns, host, kind, fn, fields)``, made by filling its slots: the
    frozen dataclass ``__init__`` stores each field through ``object.__setattr__``, a
    large share of a record's cost when the trace is on (tens of records per
    connection)."""
    record: TraceRecord = _new_object(TraceRecord)
    _set_time_ns(record, time_ns)
    _set_host(record, host)
    _set_kind(record, kind)
    _set_fn(record, fn)
    _set_fields(record, fields)
    return record


def _default(value: object) -> object:
    if isinstance(value, bytes | bytearray):
        return value.hex()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


class Trace:
    """A sink for trace records: kept in memory and optionally streamed to a JSONL file."""

    def __init__(self, stream: IO[str] | None = None, keep: bool = True,
                 log: RecordLog[TraceRecord] | None = None) -> None:
        self._stream = stream
        self._keep = keep
        self.records: list[TraceRecord] = []
        """Every record kept, in order (empty when the records go to ``log``)."""
        self._log: RecordLog[TraceRecord] = self.records if log is None else log

    def kept(self) -> RecordLog[TraceRecord]:
        """Every record kept, in order: :attr:`records`, or the log given (a spool on
        disk for a network built with :class:`~mpa_emu.net.records.SpooledRecords`)."""
        return self._log

    def emit(self, record: TraceRecord) -> None:
        """Record one entry."""
        if self._keep:
            self._log.append(record)
        if self._stream is not None:
            self._stream.write(record.to_json() + "\n")

    def of_kind(self, kind: str) -> Iterator[TraceRecord]:
        """Records of one kind, in order."""
        return (r for r in self._log if r.kind == kind)
