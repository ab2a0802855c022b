"""``mpa-emu replay --suite``: the project's fixtures and goldens as a suite, the same
verdicts serially, on two processes and on a Dask cluster; JUnit XML a parser reads; a
wrong expectation fails and says why; bad suite files are one-line errors."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers.campaign_lab import PCAPS, ROOT, cli, dask_cluster
from junitparser import Failure, JUnitXml

from mpa_emu.campaign import dask_executor

SUITE = PCAPS / "suite.toml"


def _tool() -> Any:
    spec = importlib.util.spec_from_file_location("make_suite", ROOT / "tools" / "make_suite.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _verdicts(report: Path) -> list[tuple[Any, ...]]:
    cases = json.loads(report.read_text())["cases"]
    return [(c["name"], c["verdict"], c["exit"], c["divergence_frame"], c["passed"])
            for c in cases]


def test_suite_file_is_the_one_the_sidecars_and_goldens_give() -> None:
    assert SUITE.read_text() == _tool().render(), "run tools/make_suite.py"


def test_suite_cases_are_every_sidecar_replay_and_golden_host() -> None:
    sidecars = [json.loads(p.read_text()) for p in sorted(PCAPS.glob("*.json"))]
    expected = sum(len(s["replays"]) for s in sidecars) + len(list(
        (PCAPS / "golden").glob("*.pcapng"))) * 2 - 1  # syn_to_nobody: one host
    assert SUITE.read_text().count("[[case]]") == expected


def test_project_suite_same_verdicts_serial_two_processes_and_dask(tmp_path: Path) -> None:
    runs = {"serial": [], "-j 2": ["-j", "2"]}
    reports = {}
    for label, extra in runs.items():
        report = tmp_path / f"{label}.json"
        junit = tmp_path / f"{label}.xml"
        rc, out, err = cli("replay", "--suite", str(SUITE), *extra, "--json", str(report),
                           "--junit", str(junit))
        assert rc == 0, out + err
        lines = out.splitlines()
        n = SUITE.read_text().count("[[case]]")
        assert lines[-1] == f"{n} passed, 0 failed"
        assert all(line.startswith("PASS ") for line in lines[:-1]) and len(lines) == n + 1
        reports[label] = _verdicts(report)
    with dask_cluster() as address:
        report = tmp_path / "dask.json"
        rc, out, err = cli("replay", "--suite", str(SUITE), "--scheduler", address,
                           "--json", str(report))
        assert rc == 0, out + err
        reports["dask"] = _verdicts(report)
    assert reports["serial"] == reports["-j 2"] == reports["dask"]
    # the sidecars' expectations, independently of the suite runner
    by_name = {r[0]: r for r in reports["serial"]}
    assert by_name["backlog_drop 192.168.10.2 --backlog 2 #2"][1:4] == ("diverge", 1, 11)
    assert by_name["reject_v1 192.168.10.1 #2"][1:4] == ("diverge", 1, 4)
    xml = JUnitXml.fromfile(str(tmp_path / "-j 2.xml"))
    suites = list(xml)
    assert len(suites) == 1 and suites[0].tests == len(reports["serial"])
    assert suites[0].failures == 0 and suites[0].errors == 0
    assert [c.name for c in suites[0]] == [r[0] for r in reports["serial"]]


def _suite(tmp_path: Path, body: str) -> Path:
    shutil.copy(PCAPS / "backlog_drop.pcap", tmp_path / "backlog_drop.pcap")
    path = tmp_path / "s.toml"
    path.write_text(body)
    return path


WRONG = """
[[case]]
name = "right"
capture = "backlog_drop.pcap"
emulate = "192.168.10.2"
args = ["--backlog", "1"]
expect = "match"

[[case]]
name = "says match, diverges"
capture = "backlog_drop.pcap"
emulate = "192.168.10.2"
args = ["--backlog", "2"]
expect = "match"

[[case]]
name = "wrong frame"
capture = "backlog_drop.pcap"
emulate = "192.168.10.2"
args = ["--backlog", "2"]
expect = "diverge"
divergence_frame = 7
why = "made up"

[[case]]
capture = "missing.pcap"
emulate = "192.168.10.2"
expect = "error"

[[case]]
name = "bad option"
capture = "backlog_drop.pcap"
emulate = "192.168.10.2"
args = ["--backlog", "-1"]
expect = "error"
"""


def test_wrong_expectations_fail_and_say_why(tmp_path: Path) -> None:
    path = _suite(tmp_path, WRONG)
    junit = tmp_path / "j.xml"
    rc, out, _ = cli("replay", "--suite", str(path), "--junit", str(junit))
    assert rc == 1
    lines = out.splitlines()
    assert lines[0].startswith("PASS right: MATCH: ")
    # backlog 2 admits the third SYN: the capture shows frame 11 did not happen
    assert lines[1].startswith("FAIL says match, diverges: expected match, got diverge: "
                               "DIVERGENCE at frame 11")
    assert lines[2].startswith("FAIL wrong frame: expected the first divergence at frame 7, "
                               "got frame 11 (made up): DIVERGENCE at frame 11")
    assert lines[3].startswith("PASS missing.pcap: ") and "No such file" in lines[3]
    assert lines[4].startswith("PASS bad option: ")
    assert "--backlog must be 0..2147483647" in lines[4]
    assert lines[5] == "3 passed, 2 failed"
    [suite] = list(JUnitXml.fromfile(str(junit)))
    assert (suite.tests, suite.failures, suite.errors) == (5, 2, 0)
    failed = {c.name: c.result[0] for c in suite if c.result}
    assert isinstance(failed["says match, diverges"], Failure)
    assert failed["says match, diverges"].message.startswith("expected match, got diverge")


@pytest.mark.parametrize(("body", "message"), [
    ("[[case]]\ncapture = 'a.pcap'\nemulate = '10.0.0.1'\n", "expect must be a non-empty"),
    ("[[case]]\ncapture = 'a.pcap'\nemulate = '10.0.0.1'\nexpect = 'pass'\n",
     "expect must be match, diverge or error, got 'pass'"),
    ("[[case]]\ncapture = 'a.pcap'\nemulate = '10.0.0.1'\nexpect = 'match'\nfoo = 1\n",
     "case 1: unknown key 'foo'"),
    ("[[case]]\ncapture = 'a.pcap'\nemulate = '10.0.0.1'\nexpect = 'match'\n"
     "divergence_frame = 3\n", "divergence_frame goes with expect = \"diverge\""),
    ("[[case]]\ncapture = 'a.pcap'\nemulate = '10.0.0.1'\nexpect = 'match'\n"
     "args = ['--json', 'x']\n", "args may not hold --json"),
    ("[[case]]\ncapture = 'a.pcap'\nemulate = '10.0.0.1'\nexpect = 'match'\nargs = '-x'\n",
     "args must be a list of strings"),
    ("title = 'x'\n", "unknown top-level key 'title'"),
    ("", "no [[case]] tables"),
    ("[[case]\n", "not valid TOML"),
])
def test_bad_suite_files_are_one_line_errors(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "s.toml"
    path.write_text(body)
    rc, out, err = cli("replay", "--suite", str(path))
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and message in err, err


def test_suite_refuses_a_capture_and_an_unreachable_scheduler(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Nothing listens on port 9: the scheduler refuses, retried for a second, not ten.
    monkeypatch.setattr(dask_executor, "CONNECT_TIMEOUT_S", 1)
    rc, _, err = cli("replay", str(PCAPS / "v2_accept.pcap"), "--suite", str(SUITE))
    assert rc == 2 and "no CAPTURE or --emulate" in err
    rc, _, err = cli("replay", "--suite", str(SUITE), "--scheduler", "tcp://127.0.0.1:9")
    assert rc == 2 and "cannot reach the Dask scheduler at tcp://127.0.0.1:9" in err
    rc, _, err = cli("replay", "--suite", str(tmp_path / "none.toml"))
    assert rc == 2 and "No such file" in err
    rc, _, err = cli("replay", str(PCAPS / "v2_accept.pcap"), "--emulate", "192.168.10.2",
                     "-j", "2")
    assert rc == 2 and "-j, --scheduler and --junit go with --suite" in err
