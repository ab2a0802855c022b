"""Replay a recorded capture against the irdma CM state machine (``mpa-emu replay``).

:func:`replay_capture` loads the capture, plays the chosen host with one
:class:`~mpa_emu.cm.core.CmCore`, compares what it sends with what the recorded host
sent, and returns a :class:`ReplayReport` (verdict, divergences, JSON, pcapng).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mpa_emu.replay.compare import Comparison, Divergence, compare
from mpa_emu.replay.engine import Engine, EngineOptions
from mpa_emu.replay.recording import Recording, RecordingError, load
from mpa_emu.replay.report import ReplayOptions, ReplayReport


def replay_capture(path: str | Path, options: ReplayOptions,
                   progress: Callable[[int, int], None] | None = None, *,
                   detail: bool = False) -> ReplayReport:
    """Replay ``path`` with ``options.emulate`` played by the emulator.

    Raises :class:`RecordingError` for bad input (unreadable file, not Ethernet, no
    frames of the address). ``progress(done, total)`` is called now and then.

    A first run goes without the core's trace (faster). When it is not a clean match,
    or when ``detail`` (the merged pcapng wants every frame's story) or semantic mode
    asks for it, the capture is replayed again with the trace; the core is
    deterministic, so both runs send the same frames.
    """
    rec = load(path, options.emulate)
    traced = detail or options.semantic

    def one_run(trace: bool) -> ReplayReport:
        engine = Engine(rec, EngineOptions(on_request=options.on_request,
                                           backlog=options.backlog,
                                           horizon_ns=options.horizon_ns, seed=options.seed,
                                           trace=trace), progress)
        run = engine.run()
        cmp = compare(rec, run, tolerance_ns=options.time_tolerance_ns,
                      strict_offload=options.strict_offload, semantic=options.semantic)
        return ReplayReport(rec, run, cmp, options)

    report = one_run(traced)
    if not traced and (report.comparison.divergences or report.comparison.extra
                       or report.run.failure or report.run.notes):
        report = one_run(True)
    return report


__all__ = ["Comparison", "Divergence", "Recording", "RecordingError", "ReplayOptions",
           "ReplayReport", "replay_capture"]
