#!/usr/bin/env python3
"""Benchmark what users touch: loading and running a scenario, inspecting its capture,
drawing its ladder.

The scenario is generated: one irdma responder with a listener, ``--conns`` connects from
one irdma initiator 1 ms apart (MPA v2 with private data, accepted with private data),
each connection then closed gracefully. Measured, best of ``--rounds``:

* load: ``loads`` of the TOML text (parse + validation + line index);
* run: ``run_scenario`` (network, cores, wire, expectations), in frames per second;
* inspect: ``inspect_capture`` of the run's pcapng, in frames per second;
* diagram: text ladder and SVG of the run.

Usage: python tools/bench_scenario.py [--conns 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mpa_emu.scenario import loads, run_scenario
from mpa_emu.views.diagram import from_run
from mpa_emu.views.inspection import inspect_capture


def scenario_text(conns: int) -> str:
    """A scenario with ``conns`` accepted connections, each closed gracefully."""
    events = "".join(f"""
[[event]]
at = "{500 + i}ms"
action = "disconnect"
host = "alice"
connection = "c{i}"
""" for i in range(conns))
    connects = "".join(f"""
[[connect]]
name = "c{i}"
from = "alice"
to = "bob"
port = 31000
at = "{i}ms"
private_data = "hello {i}"
""" for i in range(conns))
    return f"""
seed = 1
[[host]]
name = "alice"
address = "192.0.2.1"
[[host]]
name = "bob"
address = "192.0.2.2"
[[listen]]
host = "bob"
port = 31000
backlog = {conns + 1}
private_data = "welcome"
{connects}{events}
[[expect.upcall]]
host = "bob"
event = "ESTABLISHED"
count = {conns}
"""


def best(rounds: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    """Best wall time of ``rounds`` calls, and the last result."""
    times = []
    result = None
    for _ in range(rounds):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> None:
    """Run the benchmark and print one line per measurement."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conns", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    text = scenario_text(args.conns)
    t_load, sc = best(args.rounds, lambda: loads(text, "bench.toml"))
    t_run, run = best(args.rounds, lambda: run_scenario(sc))
    assert run.ok, [e.text("bench") for e in run.failures()]
    frames = len(run.net.frames)
    with tempfile.TemporaryDirectory() as tmp:
        cap = Path(tmp) / "bench.pcapng"
        run.net.write_pcapng(cap)
        t_inspect, report = best(args.rounds, lambda: inspect_capture(cap))
    assert len(report.connections) == args.conns and report.errors == 0
    t_text, _ = best(args.rounds, lambda: from_run(run.net).text())
    t_svg, _ = best(args.rounds, lambda: from_run(run.net).svg())
    print(f"scenario: {args.conns} connections, {len(text.splitlines())} TOML lines, "
          f"{frames} frames")
    print(f"load     {t_load * 1e3:9.1f} ms")
    print(f"run      {t_run * 1e3:9.1f} ms  {frames / t_run:10.0f} frames/s")
    print(f"inspect  {t_inspect * 1e3:9.1f} ms  {frames / t_inspect:10.0f} frames/s")
    print(f"ladder   {t_text * 1e3:9.1f} ms text, {t_svg * 1e3:.1f} ms SVG")


if __name__ == "__main__":
    main()
