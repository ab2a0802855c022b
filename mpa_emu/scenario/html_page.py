"""The HTML report of ``mpa-emu run``: the run's ladder with the rows a failed
expectation is about highlighted, each failed expectation with what the scenario asked
and what happened side by side, every expectation, the upcalls (each with the rdma_cm
event it gave) and verb failures per host, the drivers' kernel log lines, and the trace
records."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mpa_emu.views.describe import errno_text, log_label, rdma_cm_label, upcall_label
from mpa_emu.views.diagram import Ladder, from_run
from mpa_emu.views.html.fields import Fields, segment_fields
from mpa_emu.views.html.page import Page, Section, cell, table, versus

if TYPE_CHECKING:
    from mpa_emu.scenario import ScenarioRun

MAX_TRACE = 5000
"""Trace records listed on the page (a long run has millions; the JSONL trace has all)."""


def _frames(run: ScenarioRun) -> dict[int, Fields]:
    out: dict[int, Fields] = {}
    for f in run.net.frames:
        head: Fields = [("frame", str(f.index + 1)), ("time", f"{f.time_ns / 1e9:.6f} s"),
                        ("sender", f.interface)]
        body = segment_fields(f.segment) if f.segment is not None else [
            ("not decoded", f"{len(f.data)} bytes")]
        tail: Fields = [("comment", f.comment)] if f.comment else []
        out[f.index + 1] = head + body + tail
    return out


def _related(run: ScenarioRun, ladder: Ladder, line: int | None) -> set[int]:
    """Rows of the ladder a failed expectation (by scenario line) is about: the upcalls
    of its event on its host, the frames of its sender and kind, or its host's state
    changes."""
    if line is None:
        return set()
    sc = run.scenario
    lanes = {name: i for i, name in enumerate(run.net.hosts)}
    rows: set[int] = set()
    for e in sc.upcalls:
        if e.line == line:
            rows |= {i for i, r in enumerate(ladder.rows) if r.frame is None
                     and r.source == lanes.get(e.host) and r.label.startswith(f"<< {e.event}")}
    for ce in sc.cm_events:
        if ce.line == line:
            rows |= {i for i, r in enumerate(ladder.rows) if r.frame is None
                     and r.source == lanes.get(ce.host) and r.label.startswith(f"=> {ce.event}")}
    for s in sc.states:
        if s.line == line:
            rows |= {i for i, r in enumerate(ladder.rows) if r.frame is None
                     and r.source == lanes.get(s.host) and "->" in r.label}
    for fe in sc.frames:
        if fe.line == line:
            for i, r in enumerate(ladder.rows):
                if r.frame is None:
                    continue
                captured = run.net.frames[r.frame - 1]
                if ((fe.sender is None or captured.sender == fe.sender)
                        and (fe.kind is None or captured.kind == fe.kind)):
                    rows.add(i)
    return rows


def run_page(run: ScenarioRun) -> str:
    """The whole page for one scenario run."""
    sc = run.scenario
    ladder = from_run(run.net)
    failures = run.failures()
    marks: dict[int, str] = {}
    boxes = []
    for n, e in enumerate(failures):
        for row in _related(run, ladder, e.line):
            marks[row] = "hl" if n == 0 else marks.get(row, "rel")
        where = f"{sc.path}:{e.line}" if e.line is not None else sc.path
        box = versus(f"Failed expectation ({where})", "Expected (the scenario)",
                     f"<p>{cell(e.what)}</p>", "Actual (the run)",
                     f"<p>{cell(e.actual or 'not as expected')}</p>")
        boxes.append(box if n == 0 else box.replace(' id="highlight"', "", 1))
    expectations = table(
        ["line", "verdict", "expectation", "instead"],
        ([cell(e.line if e.line is not None else "-"), cell("ok" if e.ok else "FAIL"),
          cell(e.what), cell(e.actual if not e.ok else "")] for e in run.expectations))
    upcalls = table(["time", "host", "upcall", "conn", "rdma_cm event"],
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
    records = run.net.trace.records if run.net.trace is not None else []
    logs = table(["time", "host", "function", "line"],
                 ([cell(f"{r.time_ns / 1e9:.6f}"), cell(r.host), cell(r.fn),
                   cell(log_label(r.fields))]
                  for r in records if r.kind == "kernel_log"), cls="mono")
    shown = records[:MAX_TRACE]
    trace = table(["time", "host", "function", "kind", "fields"],
                  ([cell(f"{r.time_ns / 1e9:.6f}"), cell(r.host), cell(r.fn), cell(r.kind),
                    cell(" ".join(f"{k}={v.hex() if isinstance(v, bytes) else v}"
                                  for k, v in sorted(r.fields.items())))]
                   for r in shown), cls="mono")
    if len(records) > len(shown):
        trace += (f'<p class="hint">first {len(shown)} of {len(records)} records; '
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
                ladder=ladder, frames=_frames(run), marks=marks, top="".join(boxes),
                sections=sections).html()
