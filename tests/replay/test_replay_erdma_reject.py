"""An erdma initiator replayed against its own recording of a reject closes as it did.

erdma_reject sends the reject and releases the socket at once: the reject and the
responder's FIN leave together. On the initiator, erdma_cm_llp_data_ready only queues
ERDMA_CM_WORK_READ_MPAHDR; the FIN that arrived with the reject is taken by TCP in the
same receive path, before the work queue's thread runs erdma_cm_work_handler ->
erdma_proc_mpareply (MPA_RR_FLAG_REJECT: CONNECT_REPLY -ECONNRESET, release_cep,
sock_release). So the initiator's FIN answers the peer's (CLOSE_WAIT -> LAST_ACK); the
peer's FIN is the first. Replay takes a recorded segment before a work due at the same
instant, as the emulated network does."""

from __future__ import annotations

from pathlib import Path

import pytest

from mpa_emu.cli import main
from mpa_emu.scenario import loads, run_scenario

SCENARIO = """\
name = "erdma reject"
seed = 5

[[host]]
name = "ini"
address = "192.0.2.1"
stack = "erdma"

[[host]]
name = "resp"
address = "192.0.2.2"
stack = "erdma"

[[listen]]
host = "resp"
port = 31001
policy = "reject"
private_data = "not today"

[[connect]]
from = "ini"
to = "resp"
port = 31001
private_data = "hello"
"""


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    cap = tmp_path / "erdma-reject.pcapng"
    run = run_scenario(loads(SCENARIO, "erdma-reject.toml"))
    assert run.ok
    run.net.write_pcapng(str(cap))
    return cap


def test_the_recording_has_the_peer_s_fin_first(recording: Path) -> None:
    from mpa_emu.views.inspection import inspect_capture

    (conn,) = inspect_capture(recording).connections
    assert conn.reply is not None and conn.reply.reject
    assert conn.ended.startswith("closed: FIN from the server")


def test_an_erdma_initiator_replays_its_reject_as_a_match(
        recording: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(recording), "--emulate", "192.0.2.1", "--profile", "erdma",
                 "--semantic"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("MATCH (semantic)"), out
    emulated = [line for line in out.splitlines() if line.strip().startswith("emulated")]
    (line,) = emulated
    assert "CONNECT_REPLY status -104 (-ECONNRESET)" in line
    assert "first close: FIN from the peer" in line


def test_the_erdma_responder_replays_its_reject_as_a_match(
        recording: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(recording), "--emulate", "192.0.2.2", "--profile", "erdma",
                 "--semantic"]) == 0
    assert capsys.readouterr().out.startswith("MATCH (semantic)")
