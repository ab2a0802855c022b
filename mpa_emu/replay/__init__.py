"""Replay a recorded capture against a CM state machine (``mpa-emu replay``).

:func:`replay_capture` loads the capture, plays the chosen host with the core of its
stack (built by the registry, :data:`mpa_emu.stacks.STACKS`: the default stack unless
``ReplayOptions.stack`` names another), compares what it sends with what the recorded host
sent, and returns a :class:`ReplayReport` (verdict, divergences, JSON, pcapng).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, cast

from mpa_emu.gc_tuning import streaming
from mpa_emu.replay.compare import Comparison, Divergence, compare
from mpa_emu.replay.engine import Engine, EngineOptions
from mpa_emu.replay.recording import Recording, RecordingError, load
from mpa_emu.replay.recording_source import RecordingSource
from mpa_emu.replay.report import ReplayOptions, ReplayReport, flow_text
from mpa_emu.replay.semantic import SemanticVerdict, judge
from mpa_emu.replay.stacks import auto_candidates
from mpa_emu.replay.stream import Fallback, _Tee, stream_replay


def replay_capture(path: str | Path, options: ReplayOptions,
                   progress: Callable[[int, int], None] | None = None, *,
                   detail: bool = False, recording: Recording | None = None,
                   journal: bool = True) -> ReplayReport:
    """Replay ``path`` with ``options.emulate`` played by the emulator.

    Raises :class:`RecordingError` for bad input (unreadable file, not Ethernet, no
    frames of the address). ``progress(done, total)`` is called now and then.
    ``recording`` is ``path`` already loaded (with the same address and checksum mode).

    The result's ``exit_code`` (0 same, 1 different), ``verdict()`` and
    ``first_divergence`` are what the command line prints; in semantic mode
    ``semantic`` holds each connection's outcome on both sides.

    A first run goes without the core's trace (faster). When it is not a clean match,
    or when ``detail`` (the merged pcapng wants every frame's story) or semantic mode
    asks for it, the capture is replayed again with the trace; the core is
    deterministic, so both runs send the same frames.

    ``journal``: the report lists every scripted verb and upcall (the JSON report and
    the page need them). Without it, a clean match found streaming keeps only the
    refused verbs, which the text notes: the report is then for :meth:`ReplayReport.text`.
    """
    traced = detail or options.semantic
    if recording is not None:
        rec = recording
    elif str(path) == "-":
        got = _replay_stdin(options, progress, traced, journal)
        if isinstance(got, ReplayReport):
            return got
        rec = got
    else:
        if not traced:
            try:
                return stream_replay(str(path), str(path), options, progress,
                                     journal=journal)
            except Fallback:
                pass  # the whole-capture replay tells what differs
        rec = load(path, options.emulate, options.checksums)

    def one_run(trace: bool) -> ReplayReport:
        engine = Engine(rec, EngineOptions(on_request=options.on_request,
                                           backlog=options.backlog,
                                           horizon_ns=options.horizon_ns, seed=options.seed,
                                           config=options.config, stack=options.stack,
                                           rebase=options.semantic,
                                           trace=trace), progress,
                        source=RecordingSource(rec))
        run = engine.run()
        cmp = compare(rec, run, tolerance_ns=options.time_tolerance_ns,
                      strict_offload=options.strict_offload, semantic=options.semantic,
                      offloaded_state=options.emulated_stack.offloaded_state)
        sem = (judge(rec, run, options.config, options.emulated_stack,
                     _peer_words(options)) if options.semantic else None)
        return ReplayReport(rec, run, cmp, options, sem)

    report = one_run(traced)
    if not traced and (report.comparison.divergences or report.comparison.extra
                       or report.run.failure or report.run.notes):
        report = one_run(True)
    return report


def _replay_stdin(options: ReplayOptions, progress: Callable[[int, int], None] | None,
                  traced: bool, journal: bool) -> Recording | ReplayReport:
    """A capture read from standard input: streamed while a copy goes to a temporary
    file, which the whole-capture replay reads should the stream fall back."""
    with tempfile.TemporaryFile() as copy:
        stdin = sys.stdin.buffer
        if not traced:
            try:
                return stream_replay(cast(IO[bytes], _Tee(stdin, copy)), "-", options, progress,
                                     journal=journal)
            except Fallback:
                pass
        shutil.copyfileobj(stdin, copy)
        copy.seek(0)
        return load(copy, options.emulate, options.checksums, name="-")


def _peer_words(options: ReplayOptions) -> str:
    """The other side's stack as findings name it ("" when none was named)."""
    return ", ".join(c.label for _ip, c in sorted(options.peers))


@dataclass(frozen=True, slots=True)
class ProfileSurvey:
    """``--profile auto``: the capture replayed in semantic mode once per candidate stack
    (:func:`mpa_emu.replay.stacks.auto_candidates`)."""

    reports: dict[str, ReplayReport]
    """Stack label -> its report, in the order tried."""
    shown: dict[str, str] = field(default_factory=dict)
    """Stack label -> the label with the old profile name it answers to."""

    @property
    def same_outcome(self) -> list[str]:
        """The stacks whose every connection has the recorded outcome."""
        return [name for name, r in self.reports.items() if not r.failed]

    @property
    def exit_code(self) -> int:
        """0 when at least one stack has the recorded outcome, else 1."""
        return 0 if self.same_outcome else 1

    @property
    def picked(self) -> str:
        """The stack that explains the recording (the first tried with the recorded
        outcome), else the closest: the fewest differences in outcome, then the latest
        first difference, then the order tried."""
        same = self.same_outcome
        if same:
            return same[0]
        order = list(self.reports)

        def distance(name: str) -> tuple[int, int, int]:
            sem = self.reports[name].semantic
            diffs = sem.divergences if sem is not None else []
            first = diffs[0].frame if diffs else 0
            return (len(diffs), -first, order.index(name))

        return min(order, key=distance)

    @property
    def best(self) -> ReplayReport:
        """The report shown in full: the picked stack's."""
        return self.reports[self.picked]

    def why(self) -> str:
        """Why the picked stack: the frames of the recorded host it reproduced, or (none
        has the recorded outcome) the first rule of the closest stack that differs."""
        name = self.picked
        report = self.reports[name]
        if report.failed:
            return (f"closest: {self._shown(name)}; first rule that differs: "
                    f"{report.first_divergence or report.verdict()}")
        return f"picked {self._shown(name)}: {matched_words(report)}"

    def _shown(self, name: str) -> str:
        return self.shown.get(name, name)

    def text(self) -> str:
        """One line per stack tried, why the pick, then the full report of :attr:`best`."""
        same = self.same_outcome
        head = (f"PROFILES with the recorded outcome: {', '.join(same)}" if same
                else "PROFILES with the recorded outcome: none")
        lines = [head]
        width = max(len(self._shown(n)) for n in self.reports)
        for name, r in self.reports.items():
            lines.append(f"  {self._shown(name):<{width}} " + (
                "same outcome" if not r.failed else r.first_divergence or r.verdict()))
        lines.append(self.why())
        lines.append(f"report for {self._shown(self.picked)}:")
        lines.append(self.best.text())
        return "\n".join(lines)


def matched_words(report: ReplayReport) -> str:
    """The recorded host's frames the emulated side reproduced, connection by connection:
    its MPA frames, OFFLOADED/ESTABLISHED and its close (semantic mode)."""
    sem = report.semantic
    if sem is None:
        return "every frame matched"
    parts: list[str] = []
    for key, story in sem.recorded.items():
        items = [f"MPA {m.kind} rev {m.rev} (frame {m.frame})" for m in story.sent]
        if story.offloaded:
            items.append(f"{report.options.emulated_stack.offloaded_state} at frame "
                         f"{story.offloaded}")
        if story.established:
            items.append(f"ESTABLISHED at frame {story.established}")
        if story.close is not None:
            n, side, how = story.close
            whose = "its" if side == "host" else "the peer's"
            items.append(f"the first close, {whose} {how} (frame {n})")
        parts.append(f"{flow_text(key)} ({story.role}): {', '.join(items) or 'no MPA'}")
    return "; ".join(parts) or "no connection"


def replay_profiles(path: str | Path, options: ReplayOptions,
                    progress: Callable[[int, int], None] | None = None, *,
                    mpa_rev: int | None = None, detail: bool = False) -> ProfileSurvey:
    """Replay ``path`` in semantic mode once per candidate stack (``--profile auto``),
    each with ``mpa_rev`` when given, and say which reach the recorded outcome."""
    # The recording and each profile's report stay to the end: set aside from the
    # collections that follow, which would otherwise walk all of them again (the
    # survey's time grew faster than the capture).
    with streaming() as collector:
        if str(path) == "-":
            with tempfile.TemporaryFile() as copy:
                shutil.copyfileobj(sys.stdin.buffer, copy)
                copy.seek(0)
                rec = load(copy, options.emulate, options.checksums, name="-")
        else:
            rec = load(path, options.emulate, options.checksums)
        collector.keep()
        reports: dict[str, ReplayReport] = {}
        shown: dict[str, str] = {}
        for choice in auto_candidates(mpa_rev):
            opts = replace(options, semantic=True, config=choice.config, stack=choice)
            reports[choice.label] = replay_capture(path, opts, progress, detail=detail,
                                                   recording=rec)
            shown[choice.label] = choice.shown
            collector.keep()
    return ProfileSurvey(reports, shown)


__all__ = ["Comparison", "Divergence", "ProfileSurvey", "Recording", "RecordingError",
           "ReplayOptions", "ReplayReport", "SemanticVerdict", "replay_capture",
           "replay_profiles"]
