"""Bad scenario files get one clear error naming the file, line and key; a failed
expectation names its scenario line and what happened instead."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mpa_emu.cli import main
from mpa_emu.scenario import ScenarioError, loads, run_scenario
from mpa_emu.scenario.lines import LineIndex

HOSTS = """\
seed = 1
[[host]]
name = "alice"
address = "192.0.2.1"

[[host]]
name = "bob"
address = "192.0.2.2"
"""


def error_of(text: str) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        loads(text, "s.toml")
    return info.value


@pytest.mark.parametrize(("extra", "line", "key", "fragment"), [
    ('[[connect]]\nfrom = "alice"\nto = "bob"\nport = "x"\n', 13, "connect[1].port",
     "expected an integer"),
    ('[[connect]]\nfrom = "alice"\nto = "bob"\nport = 70000\n', 13, "connect[1].port",
     "0..65535"),
    ('[[connect]]\nfrom = "carol"\nto = "bob"\nport = 1\n', 11, "connect[1].from",
     "no [[host]] named 'carol'"),
    ('[[listen]]\nhost = "bob"\nport = 1\nbaklog = 3\n', 13, "listen[1].baklog",
     "unknown key 'baklog'"),
    ('[[event]]\nat = "1 fortnight"\naction = "link_down"\nhost = "bob"\n', 11,
     "event[1].at", "expected a duration"),
    ('[[event]]\nat = "1s"\naction = "explode"\nhost = "bob"\n', 12, "event[1].action",
     "expected one of"),
    ('[[expect.upcall]]\nhost = "bob"\nevent = "CONNECT_REQUEST"\nstatus = "EWHAT"\n', 13,
     "expect.upcall[1].status", "negative errno"),
    ('[[expect.state]]\nhost = "bob"\nconnection = "nope"\nstate = "CLOSED"\n', 12,
     "expect.state[1].connection", "no [[connect]] named 'nope'"),
    ('[[event]]\nat = "1s"\naction = "disconnect"\nhost = "bob"\nconnection = "c9"\n', 14,
     "event[1].connection", "no [[connect]] named 'c9'"),
    ('[[event]]\nat = "1s"\naction = "destroy_listener"\nhost = "bob"\nlistener = "l9"\n', 14,
     "event[1].listener", "no [[listen]] named 'l9'"),
    ('[[expect.upcall]]\nhost = "bob"\nevent = "CLOSE"\nconnection = "c9"\n', 13,
     "expect.upcall[1].connection", "no [[connect]] named 'c9'"),
    ('[[expect.frame]]\nfrom = "carol"\n', 11, "expect.frame[1].from",
     "no [[host]] named 'carol'"),
    ('[[event]]\nat = "1s"\naction = "teardown"\nhost = "bob"\n', 10, "event[1]",
     "needs 'address' or disconnect_all"),
    ('[[expect.listener]]\nhost = "bob"\nlistener = "l9"\nsyn_qhash = true\n', 12,
     "expect.listener[1].listener", "no [[listen]] named 'l9'"),
    ('[[expect.state]]\nhost = "bob"\nconnection = "c"\niwarp_state = "RUNNING"\n'
     '[[connect]]\nname = "c"\nfrom = "alice"\nto = "bob"\nport = 1\n', 13,
     "expect.state[1].iwarp_state", "expected one of"),
    ('[[expect.trace]]\nkind = "segment_dropped"\nhost = "carol"\n', 12,
     "expect.trace[1].host", "no [[host]] named 'carol'"),
    ('[[host]]\nname = "carol"\naddress = "192.0.2.3"\nmac = "zz"\n', 13, "host[3].mac",
     "not a MAC address: 'zz'"),
    ('[[event]]\nat = "1s"\naction = "set_neighbour"\nhost = "bob"\naddress = "192.0.2.1"\n'
     'mac = "02:00"\n', 15, "event[1].mac", "not a MAC address: '02:00'"),
    ('[wire]\nloss = 1.5\n', 11, "wire.loss", "probability"),
    ('[[wire.drop]]\nframe = "SYN-ACKK"\n', 11, "wire.drop[1].frame", "expected one of"),
])
def test_bad_value_names_line_and_key(extra: str, line: int, key: str, fragment: str) -> None:
    err = error_of(HOSTS + "\n" + extra)
    assert (err.line, err.key) == (line, key), str(err)
    assert str(err).startswith(f"s.toml:{line}: {key}: ")
    assert fragment in str(err)


def test_host_config_and_quirks_are_checked() -> None:
    text = HOSTS + '[host.config]\nretrans = 8\n[host.config.quirks]\nv2_pdata_plus5 = true\n'
    err = error_of(text)
    assert err.line == 12 and err.key == "host[2].config.quirks.v2_pdata_plus5"
    sc = loads(HOSTS + '[host.config]\nretrans = 8\nmpa_rev = 1\n', "s.toml")
    assert sc.hosts[1].config.retrans == 8 and sc.hosts[1].config.mpa_rev == 1
    assert sc.hosts[0].config.retrans != 8


def test_invalid_toml_reports_its_line() -> None:
    err = error_of(HOSTS + "port = = 3\n")
    assert err.line == 9 and "invalid TOML" in str(err)


def test_line_index_follows_arrays_of_tables_and_subtables() -> None:
    index = LineIndex(HOSTS + "[host.config]\nretrans = 8\n")
    assert index.line(("host", 1, "name")) == 7
    assert index.line(("host", 1, "config", "retrans")) == 10
    assert index.line(("host", 0, "address")) == 4


REJECT = HOSTS + """
[[listen]]
host = "bob"
port = 31000
policy = "reject"
private_data = "busy"

[[connect]]
name = "c1"
from = "alice"
to = "bob"
port = 31000

[[expect.upcall]]
host = "alice"
event = "CONNECT_REPLY"
connection = "c1"
status = 0
"""


def test_failed_expectation_names_line_and_what_happened() -> None:
    run = run_scenario(loads(REJECT, "r.toml"))
    assert not run.ok
    (failure,) = run.failures()  # into and out of FIN_WAIT1 are the 2 state records
    assert failure.line == 22
    text = failure.text("r.toml")
    assert text.startswith("r.toml:22: FAIL upcall CONNECT_REPLY on alice for c1 status 0")
    assert "instead:" in text and "-ECONNREFUSED" in text


def test_cli_exit_codes_and_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(HOSTS + '[[connect]]\nfrom = "alice"\nto = "bob"\nport = "x"\n')
    assert main(["run", str(bad)]) == 2
    assert f"{bad}:12: connect[1].port" in capsys.readouterr().err
    failing = tmp_path / "failing.toml"
    failing.write_text(REJECT)
    pcap, trace, summary = tmp_path / "o.pcapng", tmp_path / "t.jsonl", tmp_path / "s.json"
    assert main(["run", str(failing), "-o", str(pcap), "--trace", str(trace),
                 "--json", str(summary)]) == 1
    out = capsys.readouterr().out
    assert f"{failing}:22: FAIL" in out and "FAIL: 0 of 1 expectations hold" in out
    assert pcap.read_bytes()[:4] == b"\x0a\x0d\x0d\x0a"
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    assert any(r["kind"] == "state_changed" for r in records)
    data = json.loads(summary.read_text())
    assert data["ok"] is False
    assert data["expectations"][0]["line"] == 22
    assert data["hosts"]["alice"]["upcalls"][0]["status_text"] == "-ECONNREFUSED"
    passing = tmp_path / "passing.toml"
    passing.write_text(REJECT.replace("status = 0", 'status = "-ECONNREFUSED"'))
    assert main(["run", "-q", str(passing)]) == 0


def test_missing_file_and_garbage_never_give_a_traceback(tmp_path: Path) -> None:
    garbage = tmp_path / "g.toml"
    garbage.write_bytes(b"\xff\xfe[[[\x00")
    for path in (garbage, tmp_path / "missing.toml"):
        proc = subprocess.run([sys.executable, "-m", "mpa_emu", "run", str(path)],
                              capture_output=True, text=True)
        assert proc.returncode == 2
        assert "Traceback" not in proc.stderr
        assert proc.stderr.startswith("mpa-emu run: error: ")


def test_verb_failures_are_recorded_and_checkable() -> None:
    text = HOSTS + """
[[listen]]
host = "bob"
port = 31000
[[listen]]
host = "bob"
port = 31000
at = "1ms"
[[expect.verb_failure]]
host = "bob"
verb = "create_listen"
errno = "ENOMEM"
count = 1
"""
    run = run_scenario(loads(text, "v.toml"))
    assert run.ok, [e.text("v.toml") for e in run.failures()]


def test_private_data_forms_and_conflicts() -> None:
    base = HOSTS + '[[connect]]\nfrom = "alice"\nto = "bob"\nport = 1\n'
    assert loads(base + 'private_data_hex = "00ff"\n').connects[0].private_data == b"\x00\xff"
    sized = loads(base + "private_data_size = 40\n").connects[0].private_data
    assert len(sized) == 40 and sized.startswith(b"0123456789abcdefghijklmnopqrstuvwxyz0123")
    err = error_of(base + 'private_data = "a"\nprivate_data_size = 3\n')
    assert err.key == "connect[1].private_data_size" and "only one of" in str(err)
    err = error_of(base + 'private_data_hex = "zz"\n')
    assert err.key == "connect[1].private_data_hex" and err.line == 13


def test_cli_runs_several_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    failing = tmp_path / "failing.toml"
    failing.write_text(REJECT)
    passing = tmp_path / "passing.toml"
    passing.write_text(REJECT.replace("status = 0", 'status = "-ECONNREFUSED"'))
    assert main(["run", str(passing), str(passing)]) == 0
    assert capsys.readouterr().out.endswith("2 of 2 scenarios pass\n")
    assert main(["run", str(passing), str(failing)]) == 1
    out = capsys.readouterr().out
    assert f"{failing}:22: FAIL" in out and out.endswith("1 of 2 scenarios pass\n")
    assert main(["run", str(passing), str(failing), "-o", str(tmp_path / "x.pcapng")]) == 2
    assert "need a single scenario file" in capsys.readouterr().err


def test_host_the_network_refuses_is_a_scenario_error(capsys: pytest.CaptureFixture[str],
                                                      tmp_path: Path) -> None:
    text = HOSTS.replace('name = "bob"', 'name = "bob"\nmac = "02:00:00:00:00:01"')
    sc = loads(text, "m.toml")  # the clash is with alice's automatic MAC
    with pytest.raises(ScenarioError, match=r"^m\.toml:6: host bob: MAC 02:00:00:00:00:01"):
        run_scenario(sc)
    path = tmp_path / "m.toml"
    path.write_text(text)
    assert main(["run", str(path)]) == 2
    assert main(["diagram", str(path)]) == 2
    assert "host bob" in capsys.readouterr().err


def test_trace_expectation_reports_what_was_recorded() -> None:
    text = REJECT.replace("status = 0", 'status = "-ECONNREFUSED"') + """
[[expect.trace]]
kind = "state_changed"
host = "bob"
text = "FIN_WAIT1"
count = 2

[[expect.trace]]
kind = "kernel_bug"
"""
    run = run_scenario(loads(text, "t.toml"))
    (failure,) = run.failures()  # into and out of FIN_WAIT1 are the 2 state records
    assert failure.what == "trace kernel_bug (at least 1)"
    assert failure.actual == "0 matching; no kernel_bug records"
