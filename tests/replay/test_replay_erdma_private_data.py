"""replay reads a recorded erdma MPA frame's private data after its 8-byte extension
(erdma_send_mpareqrep writes the extension between the 20-byte header and the private
data, and PD_Length does not count it), so an erdma responder replayed against its own
recording answers with the recorded private data, not with the extension's bytes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mpa_emu.cli import main
from mpa_emu.scenario import loads, run_scenario

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "stacks" / "erdma"))
from test_erdma_scenario import SCENARIO


def test_an_erdma_responder_replays_its_recording(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cap = tmp_path / "erdma.pcapng"
    run = run_scenario(loads(SCENARIO, "erdma.toml"))
    assert run.ok
    run.net.write_pcapng(str(cap))
    assert main(["replay", str(cap), "--emulate", "192.0.2.2", "--profile", "erdma",
                 "--semantic"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("MATCH (semantic)"), out
    assert "private data differs" not in out
