"""Mangled scenario files give a ScenarioError or a run, never another exception."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mpa_emu.scenario import ScenarioError, loads, run_scenario

ROOT = Path(__file__).resolve().parents[2] / "scenarios"
TEXTS = [p.read_text() for p in sorted(ROOT.glob("*.toml"))]
VALUES = ['0', '-1', '65536', '"x"', '""', '1.5', 'true', '[]', '{}', '"::"', '"*"',
          '"192.0.2.2"', '"fd00::9"', '"1s"', '"-1s"', '"bob"', '"alice"', '99999999999',
          '"ECONNRESET"', '"MPA reject"', '"freed"', '"02:00:00:00:00:09"']


@st.composite
def mangled(draw: st.DrawFn) -> str:
    lines = draw(st.sampled_from(TEXTS)).splitlines()
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["drop", "dup", "value"]))
        if op == "drop":
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif "=" in lines[i] and not lines[i].lstrip().startswith("#"):
            key = lines[i].split("=", 1)[0]
            lines[i] = f"{key}= {draw(st.sampled_from(VALUES))}"
        if not lines:
            break
    return "\n".join(lines) + "\n"


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mangled())
def test_mangled_scenarios_fail_cleanly_or_run(text: str) -> None:
    try:
        sc = loads(text, "m.toml")
    except ScenarioError as exc:
        assert str(exc).startswith("m.toml")
        return
    # Bounded: a mangled file may ask for a very long or busy run.
    run = run_scenario(replace(sc, duration_ns=2_000_000_000, max_events=20_000))
    assert run.result.reason in ("idle", "until", "max_events")
