"""The HTML report of ``mpa-emu run``: the run's ladder with the rows a failed
expectation is about highlighted, each failed expectation with what the scenario asked
and what happened side by side, every expectation, the upcalls (each with the rdma_cm
event it gave) and verb failures per host, the drivers' kernel log lines, and the trace
records.

The page is written as it is made (:func:`write_run_page`): the ladder's rows, the
frames' fields, the upcalls and the records are read from the run's records (on disk for
a run with :class:`~mpa_emu.net.records.SpooledRecords`) while they are written, so the
report of a run of any length is written in bounded memory."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import TYPE_CHECKING, TextIO

from mpa_emu.views.describe import errno_text, log_label, rdma_cm_label, upcall_label
from mpa_emu.views.html.fields import Fields, segment_fields
from mpa_emu.views.html.page import Page, Section, cell, table, versus, write_table
from mpa_emu.views.ladder import Row, column_titles, journal_rows
from mpa_emu.views.streamed_json import Rows

if TYPE_CHECKING:
    from mpa_emu.net.network import CapturedFrame, JournalEntry
    from mpa_emu.scenario import ScenarioRun
    from mpa_emu.scenario.expect import ExpectResult

MAX_TRACE = 5000
"""Trace records listed on the page (a long run has millions; the JSONL trace has all)."""


def _frame_fields(f: CapturedFrame) -> tuple[int, Fields]:
    head: Fields = [("frame", str(f.index + 1)), ("time", f"{f.time_ns / 1e9:.6f} s"),
                    ("sender", f.interface)]
    body = segment_fields(f.segment) if f.segment is not None else [
        ("not decoded", f"{len(f.data)} bytes")]
    tail: Fields = [("comment", f.comment)] if f.comment else []
    return f.index + 1, head + body + tail


class _RunLadder:
    """The run's ladder, its rows read from the journal each time they are drawn: ``hl``
    marks the rows the first failed expectation is about, ``rel`` those of the others."""

    def __init__(self, run: ScenarioRun, failures: Sequence[ExpectResult]) -> None:
        self.run = run
        self.failures = failures
        self.columns: list[str] = column_titles(run.net)
        self.lanes = {name: i for i, name in enumerate(run.net.hosts)}
        self._entry: JournalEntry | None = None

    @property
    def rows(self) -> Iterable[Row]:
        return self._rows()

    def _rows(self) -> Iterator[Row]:
        for entry, row in journal_rows(self.run.net):
            self._entry = entry  # what the row just read comes from, for mark()
            yield row

    def mark(self, _number: int, row: Row) -> str | None:
        """The mark of the row just read (the SVG writer asks as it reads each row)."""
        entry = self._entry
        assert entry is not None
        mark = None
        for n, e in enumerate(self.failures):
            if self._related(e.line, entry, row):
                if n == 0:
                    return "hl"
                mark = "rel"
        return mark

    def _related(self, line: int | None, entry: JournalEntry, r: Row) -> bool:
        """Whether a row is about the failed expectation on scenario ``line``: an upcall
        of its event on its host, a frame of its sender and kind, or a state change of
        its host."""
        if line is None:
            return False
        sc = self.run.scenario
        lanes = self.lanes
        if r.frame is None:
            return any(e.line == line and r.source == lanes.get(e.host)
                       and r.label.startswith(f"<< {e.event}") for e in sc.upcalls) \
                or any(ce.line == line and r.source == lanes.get(ce.host)
                       and r.label.startswith(f"=> {ce.event}") for ce in sc.cm_events) \
                or any(s.line == line and r.source == lanes.get(s.host) and "->" in r.label
                       for s in sc.states)
        captured: CapturedFrame = entry.item
        return any(fe.line == line and (fe.sender is None or captured.sender == fe.sender)
                   and (fe.kind is None or captured.kind == fe.kind) for fe in sc.frames)


def run_page(run: ScenarioRun) -> str:
    """The whole page for one scenario run."""
    return _page(run).html()


def write_run_page(run: ScenarioRun, out: TextIO) -> None:
    """The page for one scenario run, written into ``out`` as it is made."""
    _page(run).write(out)


def _page(run: ScenarioRun) -> Page:
    sc = run.scenario
    failures = run.failures()
    ladder = _RunLadder(run, failures)
    boxes = []
    for n, e in enumerate(failures):
        where = f"{sc.path}:{e.line}" if e.line is not None else sc.path
        box = versus(f"Failed expectation ({where})", "Expected (the scenario)",
                     f"<p>{cell(e.what)}</p>", "Actual (the run)",
                     f"<p>{cell(e.actual or 'not as expected')}</p>")
        boxes.append(box if n == 0 else box.replace(' id="highlight"', "", 1))
    expectations = table(
        ["line", "verdict", "expectation", "instead"],
        ([cell(e.line if e.line is not None else "-"), cell("ok" if e.ok else "FAIL"),
          cell(e.what), cell(e.actual if not e.ok else "")] for e in run.expectations))

    def upcalls(out: TextIO) -> None:
        write_table(out, ["time", "host", "upcall", "conn", "rdma_cm event"],
                    ([cell(f"{s.upcall.time_ns / 1e9:.6f}"), cell(name),
                      cell(upcall_label(s.upcall)), cell(s.upcall.conn),
                      cell(rdma_cm_label(s.trace_fields()))]
                     for name, host in run.net.hosts.items() for s in host.ulp_steps))

    verbs = table(["time", "host", "verb", "errno", "message"],
                  ([cell(f"{f.time_ns / 1e9:.6f}"), cell(name), cell(f.verb),
                    cell(f"{f.errno} ({errno_text(-f.errno).lstrip('-')})" if f.errno
                         else f.errno),
                    cell(f.message)]
                   for name, host in run.net.hosts.items() for f in host.failures))

    def logs(out: TextIO) -> None:
        records = run.net.trace.kept() if run.net.trace is not None else []
        write_table(out, ["time", "host", "function", "line"],
                    ([cell(f"{r.time_ns / 1e9:.6f}"), cell(r.host), cell(r.fn),
                      cell(log_label(r.fields))]
                     for r in records if r.kind == "kernel_log"), cls="mono")

    def trace(out: TextIO) -> None:
        records = run.net.trace.kept() if run.net.trace is not None else []
        shown = min(len(records), MAX_TRACE)
        write_table(out, ["time", "host", "function", "kind", "fields"],
                    ([cell(f"{r.time_ns / 1e9:.6f}"), cell(r.host), cell(r.fn), cell(r.kind),
                      cell(" ".join(f"{k}={v.hex() if isinstance(v, bytes) else v}"
                                    for k, v in sorted(r.fields.items())))]
                     for r in islice(records, MAX_TRACE)), cls="mono")
        if len(records) > shown:
            out.write(f'<p class="hint">first {shown} of {len(records)} records; '
                      "mpa-emu run --trace FILE writes them all</p>")

    failed = len(failures)
    total = len(run.expectations)
    if run.interrupted:
        verdict = (f"INTERRUPTED at {run.net.now_ns / 1e9:.6f} s (virtual) after "
                   f"{len(run.net.frames)} frames: expectations not checked")
    else:
        verdict = (f"{'PASS' if run.ok else 'FAIL'}: {total - failed} of {total} "
                   f"expectations hold; seed {sc.seed}, {len(run.net.frames)} frames, "
                   f"stopped {run.result.reason} at {run.result.now_ns / 1e9:.6f} s (virtual)")
    sections = [Section("Expectations", expectations), Section("Upcalls", upcalls),
                Section("Verb failures", verbs), Section("Kernel log", logs),
                Section("Trace records", trace)]
    return Page(title=f"mpa-emu run {sc.path}", verdict=verdict, failed=not run.ok,
                ladder=ladder, frames=Rows(run.net.frames, _frame_fields),
                marks=ladder.mark, top="".join(boxes), sections=sections)
