"""The rdma_cm event beside each upcall is the same truth everywhere: Host.cm_events, the
trace, the ladder (diagram), run's text, JSON and HTML, and replay's text and JSON of the
capture the run wrote. The reject scenario: alice's CONNECT_REPLY(-ECONNREFUSED) is
RDMA_CM_EVENT_REJECTED with status -111 (cma_iw_handler), bob's CONNECT_REQUEST is
RDMA_CM_EVENT_CONNECT_REQUEST with status 0 (iw_conn_req_handler)."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from mpa_emu import Network, Reject
from mpa_emu.cli import main
from mpa_emu.ulp.rdma_cm import RdmaCmEventType

SCENARIO = """
name = "reject"
seed = 3

[[host]]
name = "alice"
address = "192.0.2.1"

[[host]]
name = "bob"
address = "192.0.2.2"

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
private_data = "hi"

[[expect.cm_event]]
host = "alice"
event = "RDMA_CM_EVENT_REJECTED"
connection = "c1"
status = "-ECONNREFUSED"
count = 1

[[expect.cm_event]]
host = "bob"
event = "CONNECT_REQUEST"
status = 0
"""

REJECTED = "=> RDMA_CM_EVENT_REJECTED status -111 (-ECONNREFUSED)"


def test_host_cm_events_and_trace() -> None:
    net = Network(seed=1)
    alice = net.add_host("alice", "192.0.2.1")
    bob = net.add_host("bob", "192.0.2.2")
    bob.listen(31000, policy=Reject(b"no"))
    alice.connect("192.0.2.2", 31000, private_data=b"hello")
    net.run()
    assert [(e.name, e.status) for e in alice.cm_events] == [("RDMA_CM_EVENT_REJECTED", -111)]
    assert [(e.event, e.status) for e in bob.cm_events] == [
        (RdmaCmEventType.CONNECT_REQUEST, 0)]
    assert net.trace is not None
    records = [r for r in net.trace.records if r.kind == "rdma_cm_event"]
    assert [(r.host, r.fields["event"], r.fields["status"]) for r in records] == [
        ("bob", "RDMA_CM_EVENT_CONNECT_REQUEST", 0), ("alice", "RDMA_CM_EVENT_REJECTED", -111)]


@pytest.fixture
def ran(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, str]:
    path = tmp_path / "reject.toml"
    path.write_text(SCENARIO)
    assert main(["run", str(path), "-o", str(tmp_path / "r.pcapng"), "--json",
                 str(tmp_path / "r.json"), "--html", str(tmp_path / "r.html"), "--trace",
                 str(tmp_path / "r.jsonl")]) == 0
    return tmp_path, capsys.readouterr().out


def test_run_text_checks_the_cm_event_expectations(ran: tuple[Path, str]) -> None:
    _, out = ran
    assert ("ok   rdma_cm event RDMA_CM_EVENT_REJECTED on alice for c1 status -ECONNREFUSED "
            "(exactly 1)") in out
    assert "ok   rdma_cm event RDMA_CM_EVENT_CONNECT_REQUEST on bob status 0" in out


def test_json_html_trace_and_ladder_agree(ran: tuple[Path, str],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    tmp, _ = ran
    data = json.loads((tmp / "r.json").read_text())
    steps = data["hosts"]["alice"]["rdma_cm_events"]
    assert [(s["iw_event"], s["iw_status"], s["rdma_cm"]["event"], s["rdma_cm"]["status"])
            for s in steps] == [("CONNECT_REPLY", -111, "RDMA_CM_EVENT_REJECTED", -111)]
    page = html.unescape((tmp / "r.html").read_text())
    assert REJECTED in page and "rdma_cm event" in page and "Kernel log" in page
    assert "klog" not in page.split("Kernel log", 1)[0]  # the ladder leaves them out
    records = [json.loads(line) for line in (tmp / "r.jsonl").read_text().splitlines()]
    events = [r for r in records if r["kind"] == "rdma_cm_event" and r["host"] == "alice"]
    assert [(r["event"], r["status"], r["fn"]) for r in events] == [
        ("RDMA_CM_EVENT_REJECTED", -111, "cma_iw_handler")]
    assert main(["diagram", str(tmp / "reject.toml")]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if "<< CONNECT_REPLY -ECONNREFUSED" in line)
    assert REJECTED in lines[at + 1]


def test_replay_of_the_capture_tells_the_same(ran: tuple[Path, str],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    tmp, _ = ran
    code = main(["replay", str(tmp / "r.pcapng"), "--emulate", "192.0.2.1", "--semantic",
                 "--json", str(tmp / "replay.json"), "--html", str(tmp / "replay.html")])
    out = capsys.readouterr().out
    assert code == 0, out
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines)
              if "upcall CONNECT_REPLY status -111" in line and line.startswith("  t="))
    assert REJECTED in lines[at + 1]
    assert "rdma_cm RDMA_CM_EVENT_REJECTED status -111" in out  # the injected frame's line
    report = json.loads((tmp / "replay.json").read_text())
    [up] = report["upcalls"]
    assert (up["event"], up["status"]) == ("CONNECT_REPLY", -111)
    assert (up["rdma_cm"]["event"], up["rdma_cm"]["status"]) == ("RDMA_CM_EVENT_REJECTED",
                                                                 -111)
    page = html.unescape((tmp / "replay.html").read_text())
    assert "rdma_cm event" in page and REJECTED in page


def test_failed_cm_event_expectation_says_what_came(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "wrong.toml"
    path.write_text(SCENARIO.replace('event = "RDMA_CM_EVENT_REJECTED"',
                                     'event = "RDMA_CM_EVENT_ESTABLISHED"'))
    assert main(["run", str(path)]) == 1
    out = capsys.readouterr().out
    assert "FAIL rdma_cm event RDMA_CM_EVENT_ESTABLISHED on alice" in out
    assert ("instead: 0 matching; no RDMA_CM_EVENT_ESTABLISHED; rdma_cm events on alice: "
            "RDMA_CM_EVENT_REJECTED status -111 pdata_len 8 (conn 1) (-ECONNREFUSED)") in out


def test_unknown_cm_event_name_is_a_one_line_error(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(SCENARIO.replace('event = "CONNECT_REQUEST"', 'event = "CONNECTED"'))
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert "unknown rdma_cm event 'CONNECTED'" in err
    assert len(err.strip().splitlines()) == 1


def test_refused_connect_prints_errno_and_message(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A connect from an address alice does not have: irdma_connect's -EADDRNOTAVAIL."""
    path = tmp_path / "refused.toml"
    text = SCENARIO.replace('private_data = "hi"',
                            'private_data = "hi"\nlocal_address = "192.0.2.9"')
    text += '\n[[expect.state]]\nhost = "alice"\nconnection = "c1"\nstate = "freed"\n'
    path.write_text(text)
    assert main(["run", str(path)]) == 1
    out = capsys.readouterr().out
    assert "alice: connect refused at 0.000000 s: EADDRNOTAVAIL: " in out
    assert "c1 was never created (connect refused: EADDRNOTAVAIL: " in out
