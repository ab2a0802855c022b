"""The progress bar: redrawn on the wall clock while the network runs, on a terminal only,
without changing what the run does."""

from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from mpa_emu.scenario import load_scenario, loads, run_scenario
from mpa_emu.scenario.progress import ProgressBar

BACKLOG = Path(__file__).resolve().parents[2] / "mpa_emu" / "examples" / "backlog.toml"
# Many connects and no duration: a few seconds of wall time for the pure-Python build and
# still several redraw intervals for the compiled one (docs/compiling.md).
HEAVY = """\
name = "heavy"
[[host]]
name = "a"
address = "192.0.2.1"
[[host]]
name = "b"
address = "192.0.2.2"
[[listen]]
host = "b"
port = 5000
[[connect]]
from = "a"
to = "b"
port = 5000
count = 1500
interval = "1us"
"""


def capture(run: object) -> bytes:
    out = io.BytesIO()
    run.net.write_pcapng(out)  # type: ignore[attr-defined]
    return out.getvalue()


def test_a_run_with_a_bar_is_the_same_run() -> None:
    sc = load_scenario(BACKLOG)
    stream = io.StringIO()
    bar = ProgressBar(stream, "backlog", interval_s=0.001)
    with_bar = run_scenario(sc, progress=bar)
    plain = run_scenario(sc)
    assert capture(with_bar) == capture(plain)
    assert with_bar.ok and plain.ok
    assert with_bar.result == plain.result
    assert stream.getvalue() == "" or stream.getvalue().endswith("\r" + " " * 100 + "\r")


def test_bar_redraws_on_the_wall_clock_with_counts() -> None:
    hosts = {"a": SimpleNamespace(conns=lambda: [1, 2, 3]), "b": SimpleNamespace(conns=list)}
    net = SimpleNamespace(now_ns=2_500_000_000, frames=[0] * 41, hosts=hosts)
    stream = io.StringIO()
    bar = ProgressBar(stream, "x", interval_s=0.02)
    with bar.watch(net, None):  # type: ignore[arg-type]
        time.sleep(0.3)  # the network "runs" without ever giving control back
    assert bar.draws >= 3
    assert "\rx running:     2.500 s virtual  41 frames  3 connections" in stream.getvalue()
    assert stream.getvalue().endswith("\r" + " " * 100 + "\r")


def test_bar_with_a_duration_shows_the_share_done() -> None:
    stream = io.StringIO()
    ProgressBar(stream, "demo").draw(500_000_000, 1_000_000_000, 7, 2)
    assert stream.getvalue().startswith(
        "\rdemo [###############...............]  50%     0.500 s virtual  7 frames  "
        "2 connections")


def test_terminal_gets_redraws_and_a_pipe_gets_nothing(tmp_path: Path) -> None:
    scenario = tmp_path / "heavy.toml"
    scenario.write_text(HEAVY, encoding="utf-8")
    assert loads(HEAVY, "heavy").duration_ns is None
    argv = [sys.executable, "-m", "mpa_emu", "run", str(scenario), "-q"]
    piped = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert piped.returncode == 0 and piped.stderr == ""

    main_fd, child_fd = pty.openpty()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=child_fd)
    os.close(child_fd)
    seen = b""
    while True:
        ready, _, _ = select.select([main_fd], [], [], 30)
        if not ready:
            break
        try:
            chunk = os.read(main_fd, 4096)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        seen += chunk
    os.close(main_fd)
    assert proc.wait(timeout=60) == 0
    redraws = [part for part in seen.decode().split("\r") if "running:" in part]
    assert len(redraws) >= 2, seen
    assert all("s virtual" in r and "frames" in r and "connections" in r for r in redraws)
