"""The HTML report of ``mpa-emu replay``: the capture's ladder with the first divergence
highlighted, the recorded and the emitted frame side by side, every divergence, the
application's verbs and upcalls, and the emulator's trace records per injected frame."""

from __future__ import annotations

from mpa_emu.replay import ProfileSurvey
from mpa_emu.replay.compare import Divergence
from mpa_emu.replay.engine import Emitted
from mpa_emu.replay.report import (
    FRAME_NUMBERS,
    ReplayReport,
    flow_text,
    record_text,
    story_fields,
    story_text,
)
from mpa_emu.replay.semantic import SemanticVerdict, emulated_name
from mpa_emu.views.describe import segment_line, upcall_text
from mpa_emu.views.html.fields import Fields, segment_fields
from mpa_emu.views.html.page import Page, Section, cell, fields_table, frame_link, table, versus
from mpa_emu.views.html.streamed import ParkedRows, streamed_fields
from mpa_emu.wire.addr import ip_text


def _t(ns: int) -> str:
    return f"{ns / 1e9:.6f}"


def emitted_fields(em: Emitted) -> Fields:
    """An emitted frame's fields, numbered like the capture (the recorded ISN)."""
    head: Fields = [("emitted", f"#{em.index} after frame {em.after_frame}"),
                    ("time", f"{_t(em.time_ns)} s")]
    tail: Fields = [("CM state", em.state or "unknown"),
                    ("kernel function", em.comment or "unnamed")]
    return head + segment_fields(em.seg, seq=em.mapped_seq) + tail


def _divergence_box(report: ReplayReport, d: Divergence) -> str:
    if d.expected is not None:
        expected_fields: Fields = [("frame", str(d.expected.number)),
                                   ("time", f"{_t(d.expected.time_ns)} s"),
                                   *segment_fields(d.expected.seg)]
    else:
        expected_fields = []
    actual_fields = emitted_fields(d.actual) if d.actual is not None else []
    # A time inside --time-tolerance is no difference (compare.field_diffs names it
    # only outside).
    alike = () if any(f.name == "time" for f in d.fields) else ("time",)
    expected = (fields_table(expected_fields, actual_fields or None, alike) if expected_fields
                else '<p class="none">nothing: the capture shows no such frame</p>')
    actual = (fields_table(actual_fields, expected_fields or None, alike) if actual_fields
              else '<p class="none">nothing was sent</p>')
    differs = table(["field", "expected", "actual"],
                    ([cell(f.name), cell(f.expected), cell(f.actual)] for f in d.fields),
                    cls="differs") if d.fields else ""
    first = report.first_text().splitlines()
    lines = "".join(f"<div>{cell(line.strip())}</div>" for line in first[1:]
                    if line.strip().startswith(("CM state", "last in", "numbers")))
    extra = (f"<p>{cell(d.kind)} at {frame_link(d.frame)}, flow {cell(flow_text(d.flow))}"
             f"{' (' + cell(d.why) + ')' if d.why else ''}</p>{differs}"
             f'<div class="mono">{lines}</div>')
    return versus("First divergence", "Expected (the capture)", expected,
                  "Actual (the emulator)", actual, extra)


def _outcome_box(report: ReplayReport, sem: SemanticVerdict) -> str:
    """The first difference in outcome: its explanation, and the recorded host's story
    beside the emulator's for that connection."""
    d = sem.first
    assert d is not None
    recorded, emulated = sem.recorded[d.flow], sem.emulated[d.flow]
    differing = {_ASPECT_FIELD[x.aspect] for x in sem.divergences if x.flow == d.flow}
    if "OFFLOADED" in differing:  # the stack's own name of the state past MPA
        differing.add(report.options.emulated_stack.offloaded_state)
    past_mpa = report.options.emulated_stack.offloaded_state
    r_fields = story_fields(recorded, past_mpa)
    e_fields = story_fields(emulated, past_mpa, emulated=True)
    extra = (f'<p class="why" id="outcome-why">{cell(d.text)}</p>'
             f"<p>{cell(d.aspect)} at {frame_link(d.frame)}, flow {cell(flow_text(d.flow))}"
             f" ({cell(recorded.role)})</p>")
    who = emulated_name(report.options.emulated_stack)
    return versus("First difference in outcome", "Expected (the recorded host)",
                  _aspects_table(r_fields, differing), f"Actual ({who})",
                  _aspects_table(e_fields, differing), extra)


_ASPECT_FIELD = {"mpa": "MPA sent", "offload": "OFFLOADED", "established": "ESTABLISHED",
                 "upcall": "upcalls", "nic": "NIC", "close": "first close"}
"""The story field each kind of semantic difference is about."""


def _aspects_table(fields: Fields, differing: set[str]) -> str:
    """A story's fields, the rows of the aspects that differ in outcome marked (not every
    value that differs: a frame number alone is no difference in outcome)."""
    marked = ' class="diff"'
    rows = "".join(
        f"<tr{marked if name in differing else ''}><th>{cell(name)}</th>"
        f"<td>{cell(value)}</td></tr>" for name, value in fields)
    return f'<table class="fields">{rows}</table>'


def _outcome_sections(report: ReplayReport, sem: SemanticVerdict) -> list[Section]:
    who = emulated_name(report.options.emulated_stack)
    past_mpa = report.options.emulated_stack.offloaded_state
    stories = table(
        ["flow", "role", "recorded host", who],
        ([cell(flow_text(k)), cell(r.role), cell(story_text(r, past_mpa)),
          cell(story_text(sem.emulated[k], past_mpa, emulated=True))]
         for k, r in sem.recorded.items()))
    differences = table(
        ["frame", "aspect", "flow", "difference"],
        ([frame_link(d.frame), cell(d.aspect), cell(flow_text(d.flow)), cell(d.text)]
         for d in sem.divergences))
    return [Section("Outcome per connection", f'<p class="hint">{cell(FRAME_NUMBERS)}</p>'
                    + stories),
            Section("Differences in outcome", differences)]


def _survey_box(survey: ProfileSurvey) -> str:
    """``--profile auto``: each stack tried and its answer, and why the one reported in
    full was picked (the words of the text report)."""
    rows = table(["profile", "answer"], (
        [cell(survey.shown.get(name, name)),
         cell("same outcome" if not r.failed else r.first_divergence or r.verdict())]
        for name, r in survey.reports.items()), cls="profiles")
    return (f'<section id="profiles"><h2>Profiles tried (--profile auto)</h2>{rows}'
            f'<p class="why">{cell(survey.why())}</p></section>')


def replay_page(report: ReplayReport, survey: ProfileSurvey | None = None) -> str:
    """The whole page for one replay; with ``survey`` (``--profile auto``) the answer
    of every stack tried opens the page, ``report`` being the picked stack's."""
    mode = report.options.checksums
    cmp = report.comparison
    by_frame: dict[int, str] = {}
    for rec, _em in cmp.matched:
        by_frame[rec.number] = "ok"
    for d in cmp.divergences:
        mark = "hl" if d.severity == "error" else "rel"
        if by_frame.get(d.frame) != "hl":
            by_frame[d.frame] = mark
    sem = report.semantic
    sem_first = sem.first if sem is not None else None
    first = report.first
    # A difference in outcome marks its frame too (never green); the first one, when it
    # comes before the first differing frame, is what the page opens on.
    outcome_first = sem_first is not None and (first is None or sem_first.frame <= first.frame)
    if sem is not None:
        for sd in sem.divergences:
            if by_frame.get(sd.frame) != "hl":
                by_frame[sd.frame] = "rel"
        if outcome_first and sem_first is not None:
            by_frame = {n: ("rel" if m == "hl" else m) for n, m in by_frame.items()}
            by_frame[sem_first.frame] = "hl"
    if outcome_first and sem is not None:
        top = _outcome_box(report, sem)
    else:
        top = _divergence_box(report, first) if first is not None else ""
    if survey is not None:
        top = _survey_box(survey) + top
    rdma = report.rdma_cm_labels()
    sections = _outcome_sections(report, sem) if sem is not None else []
    sections += [
        Section("Divergences", table(
            ["frame", "kind", "severity", "fields", "flow", "why"],
            ([frame_link(d.frame), cell(d.kind), cell(d.severity),
              cell(", ".join(f"{f.name}: {f.expected} / {f.actual}" for f in d.fields)),
              cell(flow_text(d.flow)), cell(d.why)] for d in cmp.divergences))),
        Section("Frames sent after the capture's end", table(
            ["emitted", "time", "frame"],
            ([cell(f"#{e.index}"), cell(_t(e.time_ns)),
              cell(segment_line(e.seg))]
             for e in cmp.extra))),
        Section("Upcalls", table(
            ["time", "upcall", "rdma_cm event"],
            ([cell(_t(u.time_ns)), cell(upcall_text(u)), cell(rdma.get(id(u), ""))]
             for u in report.run.upcalls))),
        Section("Application verbs", table(
            ["time", "after", "verb", "detail", "refused"],
            ([cell(_t(a.time_ns)), frame_link(a.frame), cell(a.verb), cell(a.detail),
              cell(a.error)] for a in report.run.actions))),
        Section("Trace records", table(
            ["frame", "outcome", "trace records"],
            ([frame_link(inj.frame.number), cell(report.injection_outcome(inj)),
              "<br>".join(cell(record_text(r)) for r in inj.records) or "-"]
             for inj in report.run.injections), cls="mono")),
    ]
    notes = ([report.recording.damage] if report.recording.damage else []) + report.run.notes
    if notes:
        sections.append(Section("Notes", "".join(f"<p>{cell(n)}</p>" for n in notes)))
    if report.run.assumptions:
        sections.append(Section("Assumptions (what the recording cannot show)", "".join(
            f"<p>{cell(line.removeprefix('assumption: '))}</p>"
            for line in report.assumption_lines())))
    title = (f"mpa-emu replay {report.recording.path} "
             f"--emulate {ip_text(report.options.emulate)}")
    if report.names_stacks:
        title += f" ({report.stacks_line()})"
    # The ladder and the frames' fields are read from the capture as the page is made
    # (views/html/streamed.py), not held beside the report.
    with ParkedRows(report.recording.path, mode) as ladder:
        return Page(title=title, verdict=report.verdict(), failed=report.failed,
                    ladder=ladder, frames=streamed_fields(report.recording.path, mode),
                    marks=lambda _i, row: by_frame.get(row.frame) if row.frame is not None
                    else None, top=top, sections=sections).html()
