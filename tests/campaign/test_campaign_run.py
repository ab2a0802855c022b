"""``mpa-emu run`` of many scenario files as one campaign: the same report serially and
on two processes, in the order given, with JUnit XML."""

from __future__ import annotations

from pathlib import Path

from helpers.campaign_lab import ROOT, cli
from junitparser import JUnitXml

SCENARIOS = sorted(str(p) for p in (ROOT / "scenarios").glob("*.toml"))


def test_many_scenarios_same_report_serial_and_two_processes(tmp_path: Path) -> None:
    rc1, serial, _ = cli("run", *SCENARIOS)
    rc2, parallel, _ = cli("run", *SCENARIOS, "-j", "2", "--junit", str(tmp_path / "r.xml"))
    assert rc1 == rc2 == 0
    assert serial == parallel
    verdicts = [line for line in serial.splitlines() if line.startswith(("PASS", "FAIL"))]
    assert [v.rsplit("(", 1)[1].rstrip(")") for v in verdicts] == SCENARIOS
    assert serial.splitlines()[-1] == f"{len(SCENARIOS)} of {len(SCENARIOS)} scenarios pass"
    [suite] = list(JUnitXml.fromfile(str(tmp_path / "r.xml")))
    assert suite.tests == len(SCENARIOS) and suite.failures == 0


def test_a_failing_scenario_is_a_junit_failure_with_its_lines(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    text = (ROOT / "scenarios" / "v2_accept.toml").read_text()
    # the v2 accept scenario expects alice's connection OFFLOADED; expect TIME_WAIT
    assert 'state = "OFFLOADED"' in text
    bad.write_text(text.replace('state = "OFFLOADED"', 'state = "TIME_WAIT"', 1))
    junit = tmp_path / "r.xml"
    rc, out, _ = cli("run", str(bad), SCENARIOS[0], "--junit", str(junit))
    assert rc == 1
    assert out.splitlines()[-1] == "1 of 2 scenarios pass"
    [suite] = list(JUnitXml.fromfile(str(junit)))
    assert (suite.tests, suite.failures) == (2, 1)
    failing = next(c for c in suite if c.result)
    assert "FAIL:" in failing.result[0].text and str(bad) in failing.result[0].text


def test_single_file_options_refused_in_a_campaign(tmp_path: Path) -> None:
    rc, _, err = cli("run", SCENARIOS[0], "-j", "2", "-o", str(tmp_path / "x.pcapng"))
    assert rc == 2 and "need a single scenario file" in err
