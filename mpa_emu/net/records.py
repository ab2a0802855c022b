"""Where a network keeps what a run produced: in memory (the default), or on disk in
memory bounded by what is still alive.

A :class:`~mpa_emu.net.network.Network` records four things as it runs: the captured
frames, the journal (frames, upcalls and state changes in causal order, for ladders),
the trace records, and each host's upcalls. By default they are lists, and a run of
millions of events holds them all. Built with ``records=SpooledRecords()``, the network
keeps them in temporary files instead::

    from mpa_emu.net import Network
    from mpa_emu.net.records import SpooledRecords

    with SpooledRecords() as records:
        net = Network(seed=1, records=records)
        ...
        net.run()
        for frame in net.frames:       # read back from disk, in capture order
            ...

Reading them is the same either way (``len``, iteration, an item by index: see
:class:`~mpa_emu.capture.spool.RecordLog`), so reports, expectations and pcapng
writers take either. What stays in memory is what is alive: frames still on the wire
(one may yet get a NIC's drop note, so it is written once it has arrived everywhere),
the last chunk of each log, and one file offset per chunk. Any command that runs
networks (``run`` today) uses this sink for bounded memory; the scenario runner's
``run_scenario(..., spool=True)`` builds it.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from typing import Any

from mpa_emu.capture.spool import RecordLog, RecordSpool, SettlingLog
from mpa_emu.gc_tuning import Collector
from mpa_emu.net.captured import CapturedFrame, JournalEntry
from mpa_emu.stacks.contract.events import Upcall
from mpa_emu.stacks.contract.trace import TraceRecord
from mpa_emu.ulp.rdma_cm import RdmaCm, RdmaCmEvent, UlpStep
from mpa_emu.wire.segment import Segment

_segment_row: Callable[[Segment], tuple[Any, ...]] = operator.attrgetter(
    *(f.name for f in dataclasses.fields(Segment)))
_upcall_row: Callable[[Upcall], tuple[Any, ...]] = operator.attrgetter(
    *(f.name for f in dataclasses.fields(Upcall)))
_trace_row: Callable[[TraceRecord], tuple[Any, ...]] = operator.attrgetter(
    "time_ns", "host", "kind", "fn", "fields")


def frame_row(frame: CapturedFrame) -> tuple[Any, ...]:
    """A settled frame as a row of plain values (its segment as the segment's fields)."""
    seg = frame.segment
    return (frame.index, frame.time_ns, frame.interface, frame.sender, frame.receivers,
            frame.data, frame.origin, None if seg is None else _segment_row(seg),
            frame.loopback, frame.notes, frame.delivered)


def frame_from_row(row: tuple[Any, ...]) -> CapturedFrame:
    """The frame :func:`frame_row` wrote."""
    index, time_ns, interface, sender, receivers, data, origin, seg, loopback, notes, \
        delivered = row
    return CapturedFrame(index, time_ns, interface, sender, receivers, data, origin,
                         None if seg is None else Segment(*seg), loopback, notes, delivered)


def _upcall_from_row(row: tuple[Any, ...]) -> Upcall:
    return Upcall(*row)


def _trace_from_row(row: tuple[Any, ...]) -> TraceRecord:
    return TraceRecord(*row)


def journal_row(entry: JournalEntry) -> tuple[Any, ...]:
    """A journal entry as a row: its kind, host, time and its item's row."""
    kind = entry.kind
    item = entry.item
    if kind == "frame":
        body = frame_row(item)
    elif kind == "upcall":
        body = _upcall_row(item)
    else:
        body = _trace_row(item)
    return (kind, entry.host, entry.time_ns, body)


def journal_from_row(row: tuple[Any, ...]) -> JournalEntry:
    """The entry :func:`journal_row` wrote."""
    kind, host, time_ns, body = row
    if kind == "frame":
        item: Any = frame_from_row(body)
    elif kind == "upcall":
        item = _upcall_from_row(body)
    else:
        item = _trace_from_row(body)
    return JournalEntry(kind, host, time_ns, item)


def _frame_settled(frame: CapturedFrame) -> bool:
    return frame.in_flight == 0


def _entry_settled(entry: JournalEntry) -> bool:
    return entry.kind != "frame" or entry.item.in_flight == 0


SETTLES_PER_COLLECTION = 5_000
"""Events between two full collections of a bounded run (one settle an event): freed
nodes, QPs and timers are reference cycles, freed only by a full collection."""


class SpooledRecords:
    """The on-disk sink of a :class:`~mpa_emu.net.network.Network` (one network each).

    The network asks it for its logs (:meth:`frames`, :meth:`journal`, :meth:`trace`,
    :meth:`upcalls`) when it is built and when a host is added, calls :meth:`settle`
    as it runs (frames that arrived everywhere go to disk), and :meth:`close` deletes
    every file (also on leaving a ``with`` block)."""

    def __init__(self) -> None:
        self._frames = SettlingLog(RecordSpool(to_row=frame_row, from_row=frame_from_row),
                                   _frame_settled)
        self._journal = SettlingLog(RecordSpool(to_row=journal_row,
                                                from_row=journal_from_row), _entry_settled)
        self._trace: RecordSpool[TraceRecord] = RecordSpool(to_row=_trace_row,
                                                            from_row=_trace_from_row)
        self._upcalls: list[RecordSpool[Upcall]] = []
        self._collector = Collector(SETTLES_PER_COLLECTION)
        self._ulp: list[RecordSpool[RdmaCmEvent] | RecordSpool[UlpStep]] = []

    def frames(self) -> RecordLog[CapturedFrame]:
        """The captured frames, in capture order."""
        return self._frames

    def journal(self) -> RecordLog[JournalEntry]:
        """The journal, in causal order."""
        return self._journal

    def trace(self) -> RecordLog[TraceRecord]:
        """Every trace record, in order."""
        return self._trace

    def upcalls(self) -> RecordLog[Upcall]:
        """A new host's upcalls."""
        spool: RecordSpool[Upcall] = RecordSpool(to_row=_upcall_row, from_row=_upcall_from_row)
        self._upcalls.append(spool)
        return spool

    def rdma_cm(self) -> RdmaCm:
        """A new host's iw_cm and rdma_cm, its event queue and steps on disk."""
        events: RecordSpool[RdmaCmEvent] = RecordSpool(RdmaCmEvent)
        steps: RecordSpool[UlpStep] = RecordSpool(UlpStep)
        self._ulp += [events, steps]
        return RdmaCm(events, steps)

    def settle(self) -> None:
        """Write what has settled (frames no longer on the wire, and the journal up to
        the first frame still on it)."""
        self._frames.settle()
        self._journal.settle()
        self._collector.tick()

    def waiting(self) -> int:
        """Records still in memory because a frame before them is on the wire."""
        return self._frames.waiting() + self._journal.waiting()

    def close(self) -> None:
        """Delete every temporary file."""
        self._frames.close()
        self._journal.close()
        self._trace.close()
        for spool in self._upcalls:
            spool.close()
        for log in self._ulp:
            log.close()

    def __enter__(self) -> SpooledRecords:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
