"""qedr in the registry-driven commands: a scenario file with ``stack = "qedr"`` and
``[host.params]`` run by ``mpa-emu run``, ``mpa-emu kernel-map --stack qedr`` (text and
JSON), and one-line errors for a bad parameter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mpa_emu.cli import main
from mpa_emu.stacks import STACKS

SCENARIO = """\
name = "qedr pair"
seed = 3

[[host]]
name = "a"
address = "192.0.2.1"
stack = "qedr"

[[host]]
name = "b"
address = "192.0.2.2"
stack = "qedr"
[host.params]
fw_mpa_timeout_secs = 5

[[listen]]
host = "b"
port = 31000

[[connect]]
name = "c1"
from = "a"
to = "b"
port = 31000
ird = 4
ord = 4

[[expect.upcall]]
host = "a"
event = "CONNECT_REPLY"
connection = "c1"
status = 0

[[expect.state]]
host = "a"
connection = "c1"
state = "ESTABLISHED"
iwarp_state = "RTS"
"""


def test_a_scenario_runs_qedr_hosts(tmp_path: Path) -> None:
    path = tmp_path / "qedr.toml"
    path.write_text(SCENARIO)
    out = tmp_path / "qedr.pcapng"
    assert main(["run", str(path), "-o", str(out), "-q"]) == 0
    assert out.stat().st_size > 0


def test_a_bad_qedr_parameter_is_one_line(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(SCENARIO.replace("fw_mpa_timeout_secs = 5", "fw_mpa_timeout_secs = 0"))
    with pytest.raises(SystemExit) as info:
        raise SystemExit(main(["run", str(path), "-q"]))
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "fw_mpa_timeout_secs" in err and "1..86400" in err and "Traceback" not in err


def test_kernel_map_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernel-map", "--stack", "qedr", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    kmap = STACKS["qedr"].kernel_map
    assert [r["function"] for r in rows] == [*kmap.functions, *kmap.also[0].functions]
    assert [r["source"] for r in rows[:27]] == ["drivers/infiniband/hw/qedr/qedr_iw_cm.c"] * 27
    assert {r["source"] for r in rows[27:]} == {"drivers/net/ethernet/qlogic/qed/qed_iwarp.c"}
    assert {r["kernel_version"] for r in rows} == {"5.8"}


def test_kernel_map_text_shows_both_files(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernel-map", "--stack", "qedr"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("drivers/infiniband/hw/qedr/qedr_iw_cm.c (Linux 5.8)\n")
    assert "\ndrivers/net/ethernet/qlogic/qed/qed_iwarp.c (Linux 5.8)\n" in out
    assert "27 functions: " in out and "72 functions: " in out
    assert main(["kernel-map", "--stack", "qedr", "qed_iwarp_mpa_v2_set_private"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("drivers/net/ethernet/qlogic/qed/qed_iwarp.c")
    assert lines[2].split()[1] == "qed_iwarp_mpa_v2_set_private"


def test_kernel_map_one_function_without_its_prefix(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernel-map", "--stack", "qedr", "iw_connect"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("drivers/infiniband/hw/qedr/qedr_iw_cm.c")
    assert out.splitlines()[2].split()[1] == "qedr_iw_connect"
