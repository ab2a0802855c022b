"""``mpa-emu demo``: runs, exits 0, writes a capture tshark decodes as iWARP (requests,
replies, the reject's R flag and private data, no Error or Malformed), reproducibly."""

from __future__ import annotations

import json
from errno import ECONNREFUSED
from pathlib import Path

import pytest
from mpa_emu.stacks.contract.events import IwEvent

from mpa_emu.capture.tshark import Tshark
from mpa_emu.cli import main
from mpa_emu.demo.stories import REJECT_PORT, STORIES, run_demo

KEY_REQ = b"MPA ID Req Frame".hex()
KEY_REP = b"MPA ID Rep Frame".hex()


@pytest.fixture(scope="module")
def demo_capture(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("demo") / "demo.pcapng"
    import contextlib
    import io

    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        code = main(["demo", "-o", str(out), "--seed", "3"])
    assert code == 0
    return out, stdout.getvalue()


def test_demo_command_exits_0_and_prints_ladders_and_summary(
        demo_capture: tuple[Path, str]) -> None:
    path, text = demo_capture
    assert path.stat().st_size > 0
    assert "== alice connects with IRD 4 / ORD 8" in text
    assert "MPA Req v2" in text and "MPA Rep v2" in text and "MPA Rej v2" in text
    assert "CONNECT_REPLY -ECONNREFUSED" in text
    assert "MPAREQ_RCVD -> FIN_WAIT1" in text  # irdma_send_mpa_reject
    assert "freed (was TIME_WAIT)" in text  # the rejecting node after its close timer
    assert "Summary" in text and f"wrote {path}" in text
    assert "sorry, no resources" in text and b"sorry, no resources".hex() in text


def test_demo_accepts_rejects_and_closes() -> None:
    result = run_demo(3, stories=STORIES[:3])  # this module's three stories
    alice, bob = result.net.hosts["alice"], result.net.hosts["bob"]
    replies = alice.events(IwEvent.CONNECT_REPLY)
    assert [r.status for r in replies] == [0, -ECONNREFUSED, 0]
    # irdma_parse_mpa (v2): the reported private data runs 4 bytes past the reject's
    # (the RFC 6581 block is counted), the quirk on by default.
    reason = b"sorry, no resources"
    assert replies[1].private_data[:len(reason)] == reason
    assert replies[1].private_data_len == len(reason) + 4
    assert len(bob.events(IwEvent.ESTABLISHED)) == 2
    assert alice.events(IwEvent.CLOSE) and bob.events(IwEvent.CLOSE)
    accepted = replies[0]
    # irdma_negotiate_mpa_v2_ird_ord: the responder's ORD is capped at alice's IRD 4,
    # and alice keeps ORD = min(8, bob's IRD).
    assert accepted.ord <= 8 and accepted.ird == 4
    assert not any(line.startswith("story") for line in result.summary)


def test_same_seed_same_pcapng_bytes_and_a_new_seed_changes_the_isns(tmp_path: Path) -> None:
    paths = []
    for name, seed in (("a", 5), ("b", 5), ("c", 6)):
        path = tmp_path / f"{name}.pcapng"
        assert main(["demo", "-q", "-o", str(path), "--seed", str(seed)]) == 0
        paths.append(path.read_bytes())
    assert paths[0] == paths[1]
    assert paths[0] != paths[2]
    first = [f.segment.seq for f in run_demo(5).net.frames if f.kind == "SYN"]
    other = [f.segment.seq for f in run_demo(6).net.frames if f.kind == "SYN"]
    assert first and len(first) == len(other) and first != other


def test_trace_option_writes_json_lines(tmp_path: Path) -> None:
    trace = tmp_path / "demo.jsonl"
    assert main(["demo", "-q", "-o", str(tmp_path / "d.pcapng"), "--trace", str(trace)]) == 0
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    kinds = {r["kind"] for r in records}
    assert {"segment_sent", "segment_received", "state_changed", "upcall"} <= kinds
    assert all(isinstance(r["t_ns"], int) and r["host"] and r["fn"] for r in records)


def test_unwritable_output_is_a_one_line_error(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "-q", "-o", str(tmp_path)]) == 2
    assert main(["demo", "-q", "-o", str(tmp_path / "missing" / "x.pcapng")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("mpa-emu demo: error:") for line in err)


def test_a_story_can_be_added_by_name_and_a_missing_one_is_reported() -> None:
    result = run_demo(1, stories=["mpa_emu.demo.stories:rejected_connection",
                                  "mpa_emu.no_such_module:story"])
    assert [r.status for r in result.net.hosts["alice"].events(IwEvent.CONNECT_REPLY)] == \
        [-ECONNREFUSED]
    assert result.summary[-1].startswith("story 'mpa_emu.no_such_module:story' unavailable")
    assert len(STORIES) >= 3


@pytest.mark.tshark
def test_tshark_decodes_the_demo_as_iwarp(demo_capture: tuple[Path, str]) -> None:
    path, _ = demo_capture
    judge = Tshark()
    summaries = judge.summary(path)
    # three stories of mpa_emu.demo.stories, then the teardown story's four accepted connections
    assert sum("MPA Request Frame" in s for s in summaries) == 3 + 4
    assert sum("MPA Reply Frame" in s for s in summaries) == 3 + 4
    rows = judge.fields(path, ["iwarp_mpa.key.req", "iwarp_mpa.key.rep", "iwarp_mpa.rej_flag",
                               "iwarp_mpa.rev", "iwarp_mpa.privatedata", "tcp.srcport",
                               "tcp.flags.fin"], display_filter="iwarp_mpa.key.rep")
    rejects = [r for r in rows if r.get("iwarp_mpa.rej_flag") in (["1"], ["True"])]
    assert len(rejects) == 1
    reject = rejects[0]
    assert reject["tcp.srcport"] == [str(REJECT_PORT)]
    assert reject["iwarp_mpa.rev"] == ["2"]
    assert reject["tcp.flags.fin"] in (["1"], ["True"])  # irdma sends the reject with FIN
    pdata = reject["iwarp_mpa.privatedata"][0].replace(":", "")
    assert pdata.endswith(b"sorry, no resources".hex())
    assert judge.problems(path) == []
    notes = [e for e in judge.expert(path) if e.summary.startswith("Reject bit")]
    assert notes and notes[0].severity == "Note"


def test_a_failing_story_is_reported_and_the_others_still_run() -> None:
    from mpa_emu.demo.stories import DemoContext, rejected_connection

    def broken(ctx: DemoContext) -> None:
        """A story with a bug."""
        ctx.client.connect("192.0.2.2", 31009)
        raise RuntimeError("boom")

    result = run_demo(1, stories=[broken, rejected_connection])
    assert result.failures == ["broken"]
    assert any(line.startswith("story broken failed at 0.000000 s: RuntimeError: boom")
               for line in result.summary)
    assert result.ladders[0][0].endswith("[failed]")
    statuses = [r.status for r in result.net.hosts["alice"].events(IwEvent.CONNECT_REPLY)]
    assert -ECONNREFUSED in statuses
