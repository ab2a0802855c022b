"""Every example scenario in scenarios/ runs with all its expectations holding, and runs
reproducibly: same seed, byte-identical pcapng."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from mpa_emu.scenario import load_scenario, run_scenario

SCENARIOS = sorted((Path(__file__).resolve().parents[2] / "scenarios").glob("*.toml"))


def test_there_are_example_scenarios() -> None:
    names = {p.stem for p in SCENARIOS}
    assert {"v2_accept", "reject_with_private_data", "siw_initiator_irdma_responder",
            "v1_fallback", "lost_synack", "backlog", "address_removal"} <= names


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_example_scenario_expectations_hold(path: Path) -> None:
    sc = load_scenario(path)
    assert sc.expectation_count > 0, f"{path.name} checks nothing"
    run = run_scenario(sc)
    failures = [e.text(sc.path) for e in run.failures()]
    assert run.ok, "\n".join(failures)


def _pcapng(path: Path, seed: int | None = None) -> bytes:
    from dataclasses import replace

    sc = load_scenario(path)
    if seed is not None:
        sc = replace(sc, seed=seed)
    out = io.BytesIO()
    run_scenario(sc).net.write_pcapng(out)
    return out.getvalue()


def test_same_seed_gives_byte_identical_capture() -> None:
    path = next(p for p in SCENARIOS if p.stem == "reject_with_private_data")
    assert _pcapng(path) == _pcapng(path)


def test_another_seed_changes_the_isns() -> None:
    path = next(p for p in SCENARIOS if p.stem == "v2_accept")
    assert _pcapng(path, seed=1) != _pcapng(path, seed=99)
