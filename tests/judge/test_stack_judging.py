"""Each side of a connection judged by its own stack.

The captures are written byte by byte (tests/helpers/stack_captures.py) after the kernel
source they cite; the expected findings come from that source: irdma_negotiate_mpa_v2_ird_ord
refuses a request or reply without P2P, siw_proc_mpareq / siw_proc_mpareply do not ask for
it (peer_to_peer off), siw_recv_mpa_rr limits PD_Length to 256.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.inspect_builders import write_pcap
from helpers.stack_captures import (
    pdata_over_siw_limit,
    reply_without_p2p_to_irdma,
    siw_request_to_irdma,
    siw_smb_direct,
    siw_smb_direct_with_bad_smb2,
)

from mpa_emu.cli import main
from mpa_emu.judge.profile import ProfileError, parse_profiles
from mpa_emu.views.inspection import inspect_capture


def _only(path: Path, profile: list[str] | None = None):  # type: ignore[no-untyped-def]
    (conn,) = inspect_capture(path, profiles=parse_profiles(profile)).connections
    return conn


def test_siw_to_siw_smb_direct_is_healthy_and_judged_siw(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    path = write_pcap(tmp_path / "smbd.pcap", siw_smb_direct())
    conn = _only(path)
    assert [(s.side, s.stack, s.source) for s in conn.stacks] == [
        ("client", "siw", "fingerprint"), ("server", "siw", "fingerprint")]
    assert [f for f in conn.findings if f.severity in ("error", "warning")] == []
    # What only irdma refuses is a hint naming irdma and its function, never an error
    # (a hint: both sides are judged siw, so irdma's rules are shown with --verbose).
    notes = [f for f in conn.findings if f.severity == "hint" and f.stack == "irdma"]
    assert {(f.frame, f.rule, f.fn) for f in notes} == {
        (4, "no-p2p", "irdma_negotiate_mpa_v2_ird_ord"),
        (6, "no-p2p", "irdma_negotiate_mpa_v2_ird_ord")}
    assert all("would refuse" in f.text for f in notes)
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "ERROR" not in out and "0 errors" in out


def test_the_evidence_names_what_rules_irdma_out(tmp_path: Path) -> None:
    conn = _only(write_pcap(tmp_path / "smbd.pcap", siw_smb_direct()))
    client = conn.stacks[0]
    text = " ".join(client.evidence)
    assert "SACK and timestamps" in text  # tcp_syn_options, never irdma_send_syn
    assert "without C" in text  # irdma_build_mpa_v2 always sets C
    assert "without P2P" in text  # siw's peer_to_peer is off


def test_a_siw_request_to_irdma_is_an_irdma_error(tmp_path: Path) -> None:
    conn = _only(write_pcap(tmp_path / "a.pcap", siw_request_to_irdma()))
    assert [s.stack for s in conn.stacks] == ["siw", "irdma"]
    (err,) = [f for f in conn.findings if f.severity == "error"]
    assert (err.frame, err.stack, err.rule, err.fn) == (
        4, "irdma", "no-p2p", "irdma_negotiate_mpa_v2_ird_ord")
    assert err.text.startswith("irdma responder (server, by its fingerprint) refuses")


def test_an_irdma_initiator_refuses_a_reply_without_p2p(tmp_path: Path) -> None:
    conn = _only(write_pcap(tmp_path / "b.pcap", reply_without_p2p_to_irdma()))
    assert conn.stacks[0].stack == "irdma"
    errors = [f for f in conn.findings if f.severity == "error"]
    assert [(f.frame, f.stack, f.rule) for f in errors] == [(6, "irdma", "no-p2p")]
    assert "CONNECT_REPLY -ECONNRESET" in errors[0].text


def test_profile_overrides_the_fingerprint_per_side(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    path = write_pcap(tmp_path / "smbd.pcap", siw_smb_direct())
    conn = _only(path, ["10.0.0.1=irdma,10.0.0.2=cxgb4"])
    assert [(s.stack, s.source) for s in conn.stacks] == [("irdma", "profile"),
                                                          ("cxgb4", "profile")]
    errors = [f for f in conn.findings if f.severity == "error"]
    # The initiator (irdma by profile) refuses the reply without P2P; the responder
    # (cxgb4 by profile) takes a request without P2P (process_mpa_request).
    assert [(f.frame, f.stack, f.rule) for f in errors] == [(6, "irdma", "no-p2p")]
    assert main(["inspect", str(path), "--profile", "10.0.0.1=irdma",
                 "--profile", "10.0.0.2=cxgb4"]) == 1
    assert "irdma initiator (client, by --profile) refuses" in capsys.readouterr().out


def test_a_bare_profile_name_is_every_side(tmp_path: Path) -> None:
    conn = _only(write_pcap(tmp_path / "smbd.pcap", siw_smb_direct()), ["irdma"])
    assert [s.stack for s in conn.stacks] == ["irdma", "irdma"]
    assert {f.frame for f in conn.findings if f.severity == "error"} == {4, 6}


def test_profile_makes_siws_private_data_limit_an_error(tmp_path: Path) -> None:
    path = write_pcap(tmp_path / "pd.pcap", pdata_over_siw_limit())
    # A Linux SYN-ACK alone does not tell siw from a userspace library.
    unknown = _only(path)
    assert unknown.stacks[1].stack == "unknown"
    assert not [f for f in unknown.findings if f.severity == "error"]
    assert any(f.stack == "siw" and f.rule == "pd-over-limit" and f.severity == "note"
               for f in unknown.findings)
    siw = _only(path, ["10.0.1.2=siw"])
    (err,) = [f for f in siw.findings if f.severity == "error"]
    assert (err.stack, err.rule, err.fn) == ("siw", "pd-over-limit", "siw_recv_mpa_rr")
    assert "PD_Length 304 over siw's MPA_MAX_PRIVDATA (256)" in err.text


@pytest.mark.parametrize("value, message", [
    ("10.0.0.1=foo", "unknown stack 'foo'"),
    ("nohost=siw", "'nohost' is not an IP address"),
])
def test_bad_profiles_are_one_line_errors(value: str, message: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ProfileError, match=message):
        parse_profiles([value])
    path = write_pcap(tmp_path / "smbd.pcap", siw_smb_direct())
    for command in ("inspect", "explain", "diagram", "judge"):
        assert main([command, str(path), "--profile", value]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err


def test_inspect_json_carries_the_stacks_and_the_rule_of_each_finding(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_pcap(tmp_path / "a.pcap", siw_request_to_irdma())
    assert main(["inspect", "--json", str(path)]) == 1
    (conn,) = json.loads(capsys.readouterr().out)["connections"]
    assert [s["stack"] for s in conn["stacks"]] == ["siw", "irdma"]
    errors = [f for f in conn["findings"] if f["severity"] == "error"]
    assert [(f["stack"], f["rule"], f["fn"]) for f in errors] == [
        ("irdma", "no-p2p", "irdma_negotiate_mpa_v2_ird_ord")]


@pytest.mark.tshark
def test_judge_calls_siw_smb_direct_healthy(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = write_pcap(tmp_path / "smbd.pcap", siw_smb_direct())
    assert main(["judge", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["problems"] == []
    # tshark 4.0 predates RFC 6581: its Rev/Res warnings on the rev 2 request are a
    # known limitation (spec wireshark-mpa section 4), shown, not counted.
    if "4.0." in report["tshark"]:
        assert any("Rev field is NOT set to one" in k for k in report["known_limitations"])


@pytest.mark.tshark
@pytest.mark.slow(8)
def test_judge_does_not_fail_on_an_smb2_error(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = write_pcap(tmp_path / "smb2.pcap", siw_smb_direct_with_bad_smb2())
    assert main(["judge", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["problems"] == []
    # tshark's own verdict on frame 11 (the cut SMB2 header): Malformed, by SMB2.
    assert "frame 11: Error/Malformed: Malformed Packet (Exception occurred) (SMB2)" in \
        report["not_counted"]
    assert main(["judge", str(path)]) == 0
    assert "errors of dissectors above iWARP (not counted):" in capsys.readouterr().out


def test_irdmas_mss_rule_is_a_note_when_the_receiver_is_not_irdma(tmp_path: Path) -> None:
    # irdma_process_options refuses an MSS option below 536; a Linux socket takes it.
    from helpers.inspect_builders import Conversation
    from helpers.stack_captures import LINUX_SYNACK, SIW_REQUEST

    small = [("MSS", 500), *LINUX_SYNACK[1:]]
    conv = Conversation(client="10.0.3.1", server="10.0.3.2").handshake(small, LINUX_SYNACK)
    conv.client_sends(SIW_REQUEST)
    conn = _only(write_pcap(tmp_path / "m.pcap", conv))
    (mss,) = [f for f in conn.findings if f.fn == "irdma_process_options"]
    assert (mss.frame, mss.severity, mss.stack) == (1, "note", "irdma")
    assert mss.text.endswith(f"the server is {conn.stacks[1].stack}")


def test_irdma_reads_a_rev_2_request_without_s_as_having_the_block(tmp_path: Path) -> None:
    # irdma_parse_mpa decides on Rev == 2 alone: "abcd" read as the block has no A bit
    # (0x61 & 0x80 == 0), so irdma_negotiate_mpa_v2_ird_ord refuses it.
    from helpers.inspect_builders import Conversation
    from helpers.real_like_captures import KEY_REQ
    from helpers.stack_captures import IRDMA_SYN, mpa

    conv = Conversation(client="10.0.3.1", server="10.0.3.2").handshake(IRDMA_SYN, IRDMA_SYN)
    conv.client_sends(mpa(KEY_REQ, 0x40, 2, b"abcdefgh"))
    conn = _only(write_pcap(tmp_path / "s.pcap", conv))
    (err,) = [f for f in conn.findings if f.severity == "error"]
    assert (err.frame, err.stack, err.rule) == (4, "irdma", "no-p2p")
