"""Every fixture in pcaps/ replayed with the answer its sidecar demands.

The fixtures are built from the reference behaviour by tools/make_fixtures.py, not by the
emulator, so a match here is an independent check of the CM core."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.replay_cli import PCAPS, replay


def _cases() -> list[Any]:
    cases = []
    for sidecar in sorted(PCAPS.glob("*.json")):
        meta = json.loads(sidecar.read_text())
        for i, run in enumerate(meta["replays"]):
            cases.append(pytest.param(meta, run, id=f"{sidecar.stem}-{i}-{run['emulate']}"))
    return cases


def test_every_fixture_has_a_capture_and_at_least_one_replay() -> None:
    sidecars = sorted(PCAPS.glob("*.json"))
    assert len(sidecars) >= 25
    for sidecar in sidecars:
        meta = json.loads(sidecar.read_text())
        assert (PCAPS / meta["capture"]).is_file(), sidecar.name
        assert meta["replays"], sidecar.name
        assert meta["shows"] and meta["cites"], sidecar.name


@pytest.mark.parametrize(("meta", "run"), _cases())
def test_fixture_replays_as_its_sidecar_says(meta: dict[str, Any], run: dict[str, Any],
                                             tmp_path: Path) -> None:
    expect = run["expect"]
    rc, text, report = replay(PCAPS / meta["capture"], "--emulate", run["emulate"],
                              *run["args"], tmp_path=tmp_path)
    assert rc == expect["exit"], text
    assert report["verdict"] == expect["verdict"]
    assert text.splitlines()[0].startswith("MATCH" if rc == 0 else "DIVERGENCE")
    if "compared" in expect:
        # Every frame the emulated host sent in the capture was compared.
        assert report["compared"] == expect["compared"], text
    if rc == 0:
        assert report["matched"] == report["compared"], text
        assert report["compared"] > 0 or not report["extra"], text
        assert not [d for d in report["divergences"] if d["severity"] == "error"]
    else:
        assert report["first_divergence_frame"] == expect["first_divergence_frame"], text
        assert f"at frame {expect['first_divergence_frame']}" in text.splitlines()[0]
        assert "first divergence:" in text
