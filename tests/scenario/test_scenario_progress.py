"""The progress bar: drawn between run slices, without changing what the run does."""

from __future__ import annotations

import io
from pathlib import Path

from mpa_emu.scenario import load_scenario, run_scenario
from mpa_emu.scenario.progress import ProgressBar

BACKLOG = Path(__file__).resolve().parents[2] / "scenarios" / "backlog.toml"


def capture(run: object) -> bytes:
    out = io.BytesIO()
    run.net.write_pcapng(out)  # type: ignore[attr-defined]
    return out.getvalue()


def test_sliced_run_with_progress_gives_the_same_capture() -> None:
    sc = load_scenario(BACKLOG)
    calls: list[tuple[int, int | None, int]] = []
    with_bar = run_scenario(sc, progress=lambda *a: calls.append(a))
    plain = run_scenario(sc)
    assert capture(with_bar) == capture(plain)
    assert with_bar.ok and plain.ok
    times = [t for t, _, _ in calls]
    assert len(calls) > 10 and times == sorted(times)  # ~75 s of virtual time, 5 s slices
    assert calls[-1][2] == len(plain.net.frames)


def test_bar_draws_in_place_and_clears() -> None:
    stream = io.StringIO()
    bar = ProgressBar(stream, "demo")
    bar.update(500_000_000, 1_000_000_000, 7)
    assert stream.getvalue().startswith("\rdemo [###############...............]  50%")
    assert stream.getvalue().endswith("7 frames")
    bar.update(3_000_000_000, None, 9)
    assert "running:     3.000 s virtual, 9 frames" in stream.getvalue()
    bar.finish()
    assert stream.getvalue().endswith("\r")
