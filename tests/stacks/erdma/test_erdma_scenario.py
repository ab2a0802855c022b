"""A scenario file with ``stack = "erdma"`` (and ``[host.params]``) runs through
``mpa-emu run``; its frame expectations read erdma's private data after the 8-byte
extension (erdma_send_mpareqrep's layout), not at an RFC 5044 frame's offset."""

from __future__ import annotations

from pathlib import Path

import pytest

from mpa_emu.cli import main
from mpa_emu.scenario import loads, run_scenario

SCENARIO = '''
name = "erdma to erdma"
seed = 5

[[host]]
name = "ini"
address = "192.0.2.1"
stack = "erdma"

[[host]]
name = "resp"
address = "192.0.2.2"
stack = "erdma"
[host.params]
cc = 2

[[listen]]
host = "resp"
port = 31000
private_data = "welcome"

[[listen]]
host = "resp"
port = 31001
policy = "reject"
private_data = "not today"

[[connect]]
name = "ok"
from = "ini"
to = "resp"
port = 31000
private_data = "hello"

[[connect]]
name = "no"
from = "ini"
to = "resp"
port = 31001
at = "1ms"

[[expect.frame]]
kind = "MPA request"
from = "ini"
private_data = "hello"
mpa_rev = 129
count = 1

[[expect.frame]]
kind = "MPA reply"
from = "resp"
private_data = "welcome"
count = 1

[[expect.frame]]
kind = "MPA reject"
from = "resp"
private_data = "not today"
count = 1

[[expect.upcall]]
host = "resp"
event = "CONNECT_REQUEST"
private_data = "hello"
private_data_len = 5

[[expect.upcall]]
host = "ini"
connection = "no"
event = "CONNECT_REPLY"
status = "-ECONNRESET"
private_data = "not today"

[[expect.state]]
host = "ini"
connection = "ok"
state = "RDMA_MODE"
iwarp_state = "RTS"
'''


def test_the_scenario_holds() -> None:
    run = run_scenario(loads(SCENARIO, "erdma.toml"))
    assert run.ok, [e.text("erdma.toml") for e in run.failures()]


def test_a_wrong_private_data_expectation_fails() -> None:
    text = SCENARIO.replace('private_data = "welcome"\ncount = 1',
                            'private_data = "welcomX"\ncount = 1')
    run = run_scenario(loads(text, "erdma.toml"))
    assert not run.ok


def test_mpa_emu_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "erdma.toml"
    path.write_text(SCENARIO)
    assert main(["run", str(path), "-o", str(tmp_path / "erdma.pcapng")]) == 0
    assert "PASS: 6 of 6 expectations hold" in capsys.readouterr().out
