"""Ctrl-C during ``mpa-emu run``: the frames, trace and summary so far are written, one
line says where the run stopped, and the exit code is 130 (128 + SIGINT)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mpa_emu.capture.pcap import read_capture
from mpa_emu.cli import main
from mpa_emu.net import Network, RunResult
from mpa_emu.scenario import load_scenario, run_scenario, runner

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "v2_accept.toml"
STOP_NS = 25_000
"""Virtual time at which the simulated Ctrl-C arrives: after the handshake, before the
connection is offloaded (the first frames take 10 us each on the wire)."""


def _interrupted_run(net: Network, sc: object, progress: object) -> RunResult:
    net.run(STOP_NS)
    raise KeyboardInterrupt


def test_interruptible_run_keeps_what_happened_and_checks_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    complete = run_scenario(load_scenario(SCENARIO))
    monkeypatch.setattr(runner, "_run", _interrupted_run)
    run = run_scenario(load_scenario(SCENARIO), interruptible=True)
    assert run.interrupted and not run.ok
    assert run.result.reason == "interrupted" and run.result.now_ns == STOP_NS
    assert run.expectations == []
    assert 0 < len(run.net.frames) < len(complete.net.frames)


def test_run_scenario_lets_ctrl_c_through_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "_run", _interrupted_run)
    with pytest.raises(KeyboardInterrupt):
        run_scenario(load_scenario(SCENARIO))


def test_ctrl_c_writes_the_outputs_so_far_and_exits_130(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(runner, "_run", _interrupted_run)
    pcap, trace, summary = tmp_path / "x.pcapng", tmp_path / "x.jsonl", tmp_path / "x.json"
    code = main(["run", str(SCENARIO), "-o", str(pcap), "--trace", str(trace),
                 "--json", str(summary)])
    captured = capsys.readouterr()
    assert code == 130
    assert captured.out == ""
    frames = list(read_capture(pcap))
    assert captured.err == (
        f"mpa-emu run: interrupted at 0.000025 s (virtual) after {len(frames)} frames; "
        f"expectations not checked; written so far: -o {pcap}, --trace {trace}, "
        f"--json {summary}\n")
    # SYN, SYN-ACK, ACK and the MPA request left before 25 us; no reply yet.
    assert len(frames) == 4
    data = json.loads(summary.read_text())
    assert data["ok"] is False and data["run"]["reason"] == "interrupted"
    assert len(data["frames"]) == 4
    assert data["run"]["events"] == _events_until(STOP_NS) > 0
    assert trace.read_text().count("\n") > 0


def _events_until(stop_ns: int) -> int:
    """Events an uninterrupted network of the scenario runs up to ``stop_ns``."""
    sc = load_scenario(SCENARIO)
    net = runner.build_network(sc)
    runner._Schedule(sc, net, runner.ScenarioRun(sc, net, RunResult("idle", 0, 0))).all()
    return net.run(stop_ns).events


def test_ctrl_c_inside_the_loop_keeps_the_event_count() -> None:
    def ctrl_c() -> None:
        raise KeyboardInterrupt

    sc = load_scenario(SCENARIO)
    net = runner.build_network(sc)
    runner._Schedule(sc, net, runner.ScenarioRun(sc, net, RunResult("idle", 0, 0))).all()
    net.at(STOP_NS + 1, ctrl_c)  # an odd time no frame of the scenario shares
    with pytest.raises(KeyboardInterrupt):
        net.run()
    assert net.events_run == _events_until(STOP_NS + 1) + 1  # and the call that raised


def test_ctrl_c_in_any_command_is_one_line_and_exit_130(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import mpa_emu.cli.inspect as inspect_command

    def interrupted(args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(inspect_command, "run", interrupted)
    assert main(["inspect", str(ROOT / "pcaps" / "v2_accept.pcap")]) == 130
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "mpa-emu inspect: interrupted\n")


def test_a_reader_that_leaves_early_gets_no_traceback(tmp_path: Path) -> None:
    """``mpa-emu demo | head -1``: the command stops quietly when its pipe is closed (here
    closed before the first write, so every write meets the broken pipe)."""
    import os
    import subprocess
    import sys

    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([sys.executable, "-m", "mpa_emu", "demo", "-o",
                               str(tmp_path / "d.pcapng")], stdout=write_end,
                              stderr=subprocess.PIPE, cwd=tmp_path, timeout=120, check=False)
    finally:
        os.close(write_end)
    assert done.stderr == b""
    assert done.returncode == 0
