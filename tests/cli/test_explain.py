"""``mpa-emu explain``: its contract (JSON keys, order, exit codes), the healthy siw-to-siw
SMB Direct capture, the project's own captures with the verdicts their sidecars describe,
HTML and --verbose."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.inspect_builders import write_pcap
from helpers.stack_captures import rejected_by_siw_application, siw_smb_direct

from mpa_emu.cli import main
from mpa_emu.judge.catalogue import CAUSES

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = {"flow", "verdict", "cause", "initiator_event", "initiator_status",
            "responder_events", "evidence", "fix"}


def test_siw_to_siw_smb_direct_is_ok(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_pcap(tmp_path / "smbd.pcap", siw_smb_direct())
    assert main(["explain", str(path), "--json", "-"]) == 0
    (conn,) = json.loads(capsys.readouterr().out)["connections"]
    assert set(conn) >= CONTRACT
    assert conn["flow"] == "10.0.0.1:40100 -> 10.0.0.2:5445"
    assert (conn["verdict"], conn["cause"]) == ("ok", "ok")
    assert conn["stacks"] == {"client": "siw", "server": "siw"}
    # siw_accept without an RTR to wait for: ESTABLISHED at once (siw_cm_upcall), the
    # initiator's CONNECT_REPLY 0; both see the close.
    assert (conn["initiator_event"], conn["initiator_status"]) == (
        "RDMA_CM_EVENT_ESTABLISHED", 0)
    assert conn["responder_events"] == ["RDMA_CM_EVENT_CONNECT_REQUEST",
                                        "RDMA_CM_EVENT_ESTABLISHED",
                                        "RDMA_CM_EVENT_DISCONNECTED"]


def test_connections_in_first_frame_order_and_exit_one_on_a_failure(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_pcap(tmp_path / "two.pcap", siw_smb_direct(cport=40200),
                      rejected_by_siw_application(cport=40100))
    out = tmp_path / "e.json"
    assert main(["explain", str(path), "--json", str(out)]) == 1
    text = capsys.readouterr().out
    assert text.splitlines()[0] == f"{path}: 2 connections: 1 ok, 0 warning, 1 failed"
    conns = json.loads(out.read_text())["connections"]
    assert [c["flow"].split(" -> ")[0].rsplit(":", 1)[1] for c in conns] == ["40200",
                                                                            "40100"]
    assert [c["verdict"] for c in conns] == ["ok", "failed"]


def test_a_failed_connection_takes_a_few_lines_and_verbose_adds_the_story(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_pcap(tmp_path / "r.pcap", rejected_by_siw_application())
    assert main(["explain", str(path)]) == 1
    short = capsys.readouterr().out.strip().split("\n\n")[1].splitlines()
    assert short[0].startswith("Connection 1: 10.0.1.1:41100 -> 10.0.1.2:31000: FAILED, "
                               "rejected")
    assert '"no resources"' in short[0]
    assert len(short) <= 8
    assert any(line.split()[0] == "fix" for line in short)
    assert main(["explain", str(path), "--verbose"]) == 1
    long = capsys.readouterr().out
    assert "IW_CM_EVENT_CONNECT_REPLY -ECONNRESET" in long and "cma_iw_handler" in long


def test_html_report_marks_the_evidence(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    path = write_pcap(tmp_path / "r.pcap", rejected_by_siw_application())
    html = tmp_path / "r.html"
    assert main(["explain", str(path), "--html", str(html)]) == 1
    capsys.readouterr()
    page = html.read_text()
    assert "rejected by the responder" in page and "RDMA_CM_EVENT_REJECTED" in page
    assert 'class="row hl"' in page


@pytest.mark.parametrize("content, message", [
    (None, "No such file"),
    (b"", "empty"),
    (b"not a capture at all", ""),
])
def test_unreadable_input_exits_two_with_one_line(
        content: bytes | None, message: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "x.pcap"
    if content is not None:
        path.write_bytes(content)
    assert main(["explain", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mpa-emu explain: error:") and err.count("\n") == 1
    assert message in err


def test_every_catalogue_cause_is_documented() -> None:
    doc = (ROOT / "docs" / "explain.md").read_text()
    for key in CAUSES:
        assert f"`{key}`" in doc, key


# What each of the project's captures shows, read from its sidecar (pcaps/NAME.json:
# "title" and "shows"), as (verdict, cause) per connection.
SIDECARS = {
    "v2_accept": [("ok", "ok")],  # "MPA v2 accept (canonical)"
    "v2_accept_ipv6": [("ok", "ok")],
    "v2_accept_vlan": [("ok", "ok")],
    "duplicate_syn": [("ok", "ok")],  # the duplicate is ignored, the connection completes
    "mss_min_piggybacked_request": [("ok", "ok")],
    "softiwarp_v1_semantic": [("ok", "ok")],  # a siw-like peer, v1, accepted
    "v2_reject": [("failed", "rejected")],  # "P rejects with private data"
    "reject_v1": [("failed", "rejected")],
    "reject_v1_empty": [("failed", "rejected")],
    "reject_v2_empty": [("failed", "rejected")],
    "reject_v2_pd255": [("failed", "rejected")],
    "retrans_reject_expiry": [("failed", "rejected")],
    "parse_v2_no_p2p": [("failed", "no-p2p")],  # "requires the P2P bit: -EOPNOTSUPP"
    "parse_no_rtr_bit": [("failed", "rtr-mismatch")],  # "offering neither WRITE0 nor READ0"
    "parse_bad_rev": [("failed", "revision")],  # "Rev 3"
    "parse_pd_over_512": [("failed", "pd-over-limit")],  # "PD_Length 513 > 512"
    "parse_over_544": [("failed", "pd-over-limit")],  # "600 bytes > 544"
    "parse_truncated": [("failed", "split-frame")],  # "PD_Length larger than the segment"
    "parse_short": [("failed", "split-frame")],  # "payload shorter than 20 bytes"
    "parse_wrong_key": [("failed", "wrong-key")],  # "reply key where a request is due"
    "parse_active_wrong_key": [("failed", "wrong-key")],
    "retrans_mpareq_expiry": [("failed", "mpa-timeout")],  # "retransmitted to expiry"
    "retrans_mpareq_acked": [("failed", "mpa-timeout")],  # "reply never comes"
    "retrans_syn_expiry": [("failed", "tcp-timeout")],
    "retrans_synack_expiry": [("failed", "tcp-timeout")],
    "syn_bad_mss_dropped": [("failed", "tcp-timeout")],  # "stays silent through resends"
    "fallback_syn_refused": [("failed", "tcp-refused"), ("failed", "tcp-refused")],
    # "A v1-only responder resets the v2 request; the irdma initiator retries once ...
    # with MPA v1 ... then completes."
    "fallback_v2_to_v1": [("warning", "revision"), ("ok", "ok")],
    # "the third client's SYN and its resends are dropped silently"
    "backlog_drop": [("warning", "incomplete"), ("warning", "incomplete"),
                     ("failed", "tcp-timeout")],
}


@pytest.mark.parametrize("name", sorted(SIDECARS))
def test_project_captures_get_the_verdicts_their_sidecars_describe(
        name: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = next(p for p in (ROOT / "pcaps").glob(f"{name}.pcap*") if p.suffix != ".json")
    failed = any(v == "failed" for v, _ in SIDECARS[name])
    assert main(["explain", str(path), "--json", "-"]) == (1 if failed else 0)
    conns = json.loads(capsys.readouterr().out)["connections"]
    assert [(c["verdict"], c["cause"]) for c in conns] == SIDECARS[name]


def test_rejects_show_their_private_data(capsys: pytest.CaptureFixture[str]) -> None:
    sidecar = json.loads((ROOT / "pcaps" / "v2_reject.json").read_text())
    assert "private data" in sidecar["shows"]
    assert main(["explain", str(ROOT / "pcaps" / "v2_reject.pcap"), "--json", "-"]) == 1
    (conn,) = json.loads(capsys.readouterr().out)["connections"]
    # irdma_send_mpa_reject carries the application's data; this capture's is
    # "it's not you, it's the listener" (the bytes of frame 6).
    assert bytes.fromhex(conn["private_data"]).startswith(b"it's not you")
    assert (conn["initiator_event"], conn["initiator_status"]) == (
        "RDMA_CM_EVENT_REJECTED", -111)


def test_standard_input_with_html(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import sys

    path = write_pcap(tmp_path / "r.pcap", rejected_by_siw_application())
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(path.read_bytes())))
    html = tmp_path / "r.html"
    assert main(["explain", "-", "--html", str(html)]) == 1
    assert capsys.readouterr().out.startswith("-: 1 connection: 0 ok, 0 warning, 1 failed")
    assert "mpa-emu explain -" in html.read_text()


def test_diagram_names_each_address_stack(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = write_pcap(tmp_path / "smbd.pcap", siw_smb_direct())
    assert main(["diagram", str(path)]) == 0
    assert "(siw)" not in capsys.readouterr().out.splitlines()[0]
    assert main(["diagram", str(path), "--stacks"]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert "10.0.0.1 (siw)" in head and "10.0.0.2 (siw)" in head
    assert main(["diagram", str(path), "--profile", "10.0.0.2=cxgb4"]) == 0
    assert "10.0.0.2 (cxgb4)" in capsys.readouterr().out.splitlines()[0]


@pytest.mark.tshark
def test_judge_lists_the_stacks_when_asked(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = write_pcap(tmp_path / "smbd.pcap", siw_smb_direct())
    assert main(["judge", str(path), "--json", "--profile", "10.0.0.1=irdma"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["stacks"] == ["10.0.0.1:40100 -> 10.0.0.2:5445: client irdma (profile), "
                                "server siw (fingerprint)"]


def test_diagram_with_stacks_adds_the_stack_errors_to_their_frames(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_pcap(tmp_path / "smbd.pcap", siw_smb_direct())
    assert main(["diagram", str(path), "--profile", "irdma"]) == 0
    out = capsys.readouterr().out
    # irdma_negotiate_mpa_v2_ird_ord refuses the request (frame 4) and the reply (frame 6)
    # without P2P, each in the receiving side's role.
    assert out.count("ERROR irdma ") == 2
    assert "ERROR irdma responder (server, by --profile) refuses request without P2P" in out
    assert main(["diagram", str(path), "--stacks"]) == 0
    assert "ERROR" not in capsys.readouterr().out
