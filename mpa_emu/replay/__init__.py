"""Replay a recorded capture against the irdma CM state machine (``mpa-emu replay``).

:func:`replay_capture` loads the capture, plays the chosen host with one
:class:`~mpa_emu.cm.core.CmCore`, compares what it sends with what the recorded host
sent, and returns a :class:`ReplayReport` (verdict, divergences, JSON, pcapng).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, cast

from mpa_emu.cm.profiles import PROFILES, profile
from mpa_emu.replay.compare import Comparison, Divergence, compare
from mpa_emu.replay.engine import Engine, EngineOptions
from mpa_emu.replay.recording import Recording, RecordingError, load
from mpa_emu.replay.report import ReplayOptions, ReplayReport
from mpa_emu.replay.semantic import SemanticVerdict, judge
from mpa_emu.replay.stream import Fallback, _Tee, stream_replay


def replay_capture(path: str | Path, options: ReplayOptions,
                   progress: Callable[[int, int], None] | None = None, *,
                   detail: bool = False, recording: Recording | None = None
                   ) -> ReplayReport:
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
    """
    traced = detail or options.semantic
    if recording is not None:
        rec = recording
    elif str(path) == "-":
        got = _replay_stdin(options, progress, traced)
        if isinstance(got, ReplayReport):
            return got
        rec = got
    else:
        if not traced:
            try:
                return stream_replay(str(path), str(path), options, progress)
            except Fallback:
                pass  # the whole-capture replay tells what differs
        rec = load(path, options.emulate, options.checksums)

    def one_run(trace: bool) -> ReplayReport:
        engine = Engine(rec, EngineOptions(on_request=options.on_request,
                                           backlog=options.backlog,
                                           horizon_ns=options.horizon_ns, seed=options.seed,
                                           config=options.config, rebase=options.semantic,
                                           trace=trace), progress)
        run = engine.run()
        cmp = compare(rec, run, tolerance_ns=options.time_tolerance_ns,
                      strict_offload=options.strict_offload, semantic=options.semantic)
        sem = judge(rec, run, options.config) if options.semantic else None
        return ReplayReport(rec, run, cmp, options, sem)

    report = one_run(traced)
    if not traced and (report.comparison.divergences or report.comparison.extra
                       or report.run.failure or report.run.notes):
        report = one_run(True)
    return report


def _replay_stdin(options: ReplayOptions, progress: Callable[[int, int], None] | None,
                  traced: bool) -> Recording | ReplayReport:
    """A capture read from standard input: streamed while a copy goes to a temporary
    file, which the whole-capture replay reads should the stream fall back."""
    with tempfile.TemporaryFile() as copy:
        stdin = sys.stdin.buffer
        if not traced:
            try:
                return stream_replay(cast(IO[bytes], _Tee(stdin, copy)), "-", options, progress)
            except Fallback:
                pass
        shutil.copyfileobj(stdin, copy)
        copy.seek(0)
        return load(copy, options.emulate, options.checksums, name="-")


@dataclass(frozen=True, slots=True)
class ProfileSurvey:
    """``--profile auto``: the capture replayed in semantic mode once per profile."""

    reports: dict[str, ReplayReport]
    """Profile name -> its report, in the order of :data:`mpa_emu.cm.profiles.PROFILES`."""

    @property
    def same_outcome(self) -> list[str]:
        """The profiles whose every connection has the recorded outcome."""
        return [name for name, r in self.reports.items() if not r.failed]

    @property
    def exit_code(self) -> int:
        """0 when at least one profile has the recorded outcome, else 1."""
        return 0 if self.same_outcome else 1

    @property
    def best(self) -> ReplayReport:
        """The report shown in full: the first profile with the same outcome, else
        irdma's."""
        same = self.same_outcome
        return self.reports[same[0] if same else next(iter(self.reports))]

    def text(self) -> str:
        """One line per profile, then the full report of :attr:`best`."""
        same = self.same_outcome
        head = (f"PROFILES with the recorded outcome: {', '.join(same)}" if same
                else "PROFILES with the recorded outcome: none")
        lines = [head]
        for name, r in self.reports.items():
            lines.append(f"  {name:<7} " + ("same outcome" if not r.failed
                                            else r.first_divergence or r.verdict()))
        best = next(n for n, r in self.reports.items() if r is self.best)
        lines.append(f"report for profile {best}:")
        lines.append(self.best.text())
        return "\n".join(lines)


def replay_profiles(path: str | Path, options: ReplayOptions,
                    progress: Callable[[int, int], None] | None = None, *,
                    mpa_rev: int | None = None, detail: bool = False) -> ProfileSurvey:
    """Replay ``path`` in semantic mode once per profile (``--profile auto``), each with
    ``mpa_rev`` when given, and say which profiles reach the recorded outcome."""
    if str(path) == "-":
        with tempfile.TemporaryFile() as copy:
            shutil.copyfileobj(sys.stdin.buffer, copy)
            copy.seek(0)
            rec = load(copy, options.emulate, options.checksums, name="-")
    else:
        rec = load(path, options.emulate, options.checksums)
    reports: dict[str, ReplayReport] = {}
    for name in PROFILES:
        config = profile(name) if mpa_rev is None else profile(name, mpa_rev=mpa_rev)
        opts = replace(options, semantic=True, config=config)
        reports[name] = replay_capture(path, opts, progress, detail=detail, recording=rec)
    return ProfileSurvey(reports)


__all__ = ["Comparison", "Divergence", "ProfileSurvey", "Recording", "RecordingError",
           "ReplayOptions", "ReplayReport", "SemanticVerdict", "replay_capture",
           "replay_profiles"]
