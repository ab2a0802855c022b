"""The report: JSON with every divergence, the merged pcapng, extra frames, NIC
warnings, time tolerance, forced answers, semantic mode, determinism."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

from helpers.replay_cli import PCAPS, replay
from scapy.layers.inet import TCP
from scapy.utils import rdpcap, wrpcap

from mpa_emu.capture.pcap import read_capture
from mpa_emu.cli import main

A, P = "192.168.10.1", "192.168.10.2"


def first_frames(tmp_path: Path, name: str, count: int) -> Path:
    pkts = rdpcap(str(PCAPS / name))[:count]
    out = tmp_path / f"cut-{name}"
    wrpcap(str(out), pkts)
    return out


def test_frames_after_the_capture_end_are_extra_not_failures(tmp_path: Path) -> None:
    # The SYN and its first two resends; the capture stops at 3 s.
    cap = first_frames(tmp_path, "retrans_syn_expiry.pcap", 3)
    rc, text, report = replay(cap, "--emulate", A, tmp_path=tmp_path)
    assert rc == 0, text
    # The remaining 30 resends and the RST at expiry, all after the capture.
    assert len(report["extra"]) == 31
    assert report["extra"][-1]["flags"] == "RST|ACK"
    assert abs(report["extra"][-1]["time"] - 316.003) < 0.002
    assert "31 extra frame(s)" in text.splitlines()[0]


def test_capture_silence_proves_a_frame_should_not_be_sent(tmp_path: Path) -> None:
    # Drop P's ACK of the MPA request (frame 5) from the capture: the emulator still
    # sends it while the capture runs, so that is a divergence.
    pkts = list(rdpcap(str(PCAPS / "v2_accept.pcap")))
    del pkts[4]
    cap = tmp_path / "no-ack.pcap"
    wrpcap(str(cap), pkts)
    rc, _, report = replay(cap, "--emulate", P, tmp_path=tmp_path)
    assert rc == 1
    d = next(d for d in report["divergences"] if d["severity"] == "error")
    assert (d["kind"], d["frame"], d["actual"]["flags"]) == ("unexpected", 4, "ACK")
    assert d["actual"]["comment"].startswith("irdma_send_ack")


def test_nic_frames_after_offload_are_warnings_unless_strict(tmp_path: Path) -> None:
    pkts = rdpcap(str(PCAPS / "v2_accept.pcap"))
    pkts[8][TCP].window = 1000  # the NIC's ACK of the RTR
    del pkts[8][TCP].chksum
    cap = tmp_path / "nic.pcap"
    wrpcap(str(cap), pkts)
    rc, text, report = replay(cap, "--emulate", P, tmp_path=tmp_path)
    assert rc == 0, text
    warnings = [d for d in report["divergences"] if d["severity"] == "warning"]
    assert [(w["frame"], [f["name"] for f in w["fields"]]) for w in warnings] == [(9, ["window"])]
    assert "1 NIC warning(s)" in text
    rc, _, report = replay(cap, "--emulate", P, "--strict-offload", tmp_path=tmp_path)
    assert rc == 1
    assert report["first_divergence_frame"] == 9


def test_the_mpa_reply_is_always_compared_even_after_offload(tmp_path: Path) -> None:
    pkts = rdpcap(str(PCAPS / "v2_accept.pcap"))
    pkts[5][TCP].window = 1000  # the LSMM reply, built by the CM at accept
    del pkts[5][TCP].chksum
    cap = tmp_path / "reply.pcap"
    wrpcap(str(cap), pkts)
    rc, _, report = replay(cap, "--emulate", P, tmp_path=tmp_path)
    assert rc == 1
    assert report["first_divergence_frame"] == 6


def test_time_outside_the_tolerance_is_a_divergence(tmp_path: Path) -> None:
    pkts = rdpcap(str(PCAPS / "v2_accept.pcap"))
    for p in pkts[1:]:
        p.time += 0.05  # the SYN-ACK and everything after it, 50 ms late
    cap = tmp_path / "late.pcap"
    wrpcap(str(cap), pkts)
    rc, _, report = replay(cap, "--emulate", P, tmp_path=tmp_path)
    assert rc == 1
    d = report["divergences"][0]
    assert (d["frame"], [f["name"] for f in d["fields"]]) == (2, ["time"])
    rc, _, _ = replay(cap, "--emulate", P, "--time-tolerance", "0.06", tmp_path=tmp_path)
    assert rc == 0


def test_forced_reject_diverges_from_a_recorded_accept(tmp_path: Path) -> None:
    rc, text, report = replay(PCAPS / "v2_accept.pcap", "--emulate", P, "--on-request",
                              "reject", tmp_path=tmp_path)
    assert rc == 1
    d = report["divergences"][0]
    assert d["frame"] == 6
    assert d["actual"]["flags"] == "FIN|ACK"
    assert "irdma_send_mpa_reject" in text


def test_forced_accept_matches_a_recorded_accept(tmp_path: Path) -> None:
    rc, text, _ = replay(PCAPS / "v2_accept.pcap", "--emulate", P, "--on-request", "accept",
                         tmp_path=tmp_path)
    assert rc == 0, text


def test_json_lists_every_divergence_with_both_frames(tmp_path: Path) -> None:
    rc, _, report = replay(PCAPS / "reject_v1.pcap", "--emulate", A, tmp_path=tmp_path)
    assert rc == 1
    errors = [d for d in report["divergences"] if d["severity"] == "error"]
    assert len(errors) >= 2
    first = errors[0]
    assert first["expected"]["frame"] == 4
    assert "MPA request rev 1" in first["expected"]["summary"]
    assert "MPA request rev 2" in first["actual"]["summary"]
    assert first["actual"]["comment"].startswith("irdma_send_mpa_request")
    assert first["actual"]["state"] == "MPAREQ_SENT"
    assert report["actions"][0]["verb"] == "connect"


def test_merged_pcapng_holds_both_directions_with_comments(tmp_path: Path) -> None:
    out = tmp_path / "merged.pcapng"
    rc, _, _ = replay(PCAPS / "v2_reject.pcap", "--emulate", P, "-o", str(out),
                      tmp_path=tmp_path)
    assert rc == 0
    records = list(read_capture(out))
    assert len(records) == 9
    comments = [r.comment or "" for r in records]
    assert comments[0].startswith("injected frame 1")
    assert "irdma_send_mpa_reject: MPAREQ_RCVD -> FIN_WAIT1 | matches frame 6" in comments
    assert any("dropped by" in c and "check_seq" in c for c in comments)


def test_same_input_gives_byte_identical_outputs(tmp_path: Path) -> None:
    outs = []
    for i in range(2):
        pcap = tmp_path / f"o{i}.pcapng"
        report = tmp_path / f"r{i}.json"
        with contextlib.redirect_stdout(io.StringIO()):
            main(["replay", str(PCAPS / "backlog_drop.pcap"), "--emulate", P, "--backlog",
                  "2", "-o", str(pcap), "--json", str(report)])
        outs.append((pcap.read_bytes(), report.read_bytes()))
    assert outs[0] == outs[1]


def test_semantic_mode_reports_what_happened_to_each_injected_frame(tmp_path: Path) -> None:
    rc, text, report = replay(PCAPS / "check_seq_drops.pcap", "--emulate", P, "--semantic",
                              tmp_path=tmp_path)
    assert rc == 0
    outcomes = {i["frame"]: i["outcome"] for i in report["injections"]}
    assert outcomes[1].startswith("accepted; state none -> SYN_RCVD")
    assert "dropped by" in outcomes[3] and "check_seq" in outcomes[3]
    assert "outside" in outcomes[5]
    assert "upcall CONNECT_REQUEST" in outcomes[7]
    assert "FIN ignored" in outcomes[10]
    assert "injected frames:" in text


def test_semantic_mode_still_fails_when_the_meaning_differs(tmp_path: Path) -> None:
    # The recorded responder accepted; forcing a reject changes what the frames mean.
    rc, _, report = replay(PCAPS / "v2_accept.pcap", "--emulate", P, "--semantic",
                           "--on-request", "reject", tmp_path=tmp_path)
    assert rc == 1
    d = report["divergences"][0]
    assert d["fields"][0]["name"] == "kind"
    assert d["fields"][0]["expected"] == "ACK + reply"
    assert d["fields"][0]["actual"] == "FIN|ACK + reject"


def test_progress_bar_draws_on_stderr_for_long_replays(capsys: Any) -> None:
    from mpa_emu.cli.replay import _Progress

    bar = _Progress()
    bar(2048, 1000)  # short replays draw nothing
    assert capsys.readouterr().err == ""
    bar(50_000, 100_000)
    bar(100_000, 100_000)
    bar.close()
    err = capsys.readouterr().err
    assert "\rreplay [###############...............] 50000/100000 frames" in err
    assert err.endswith("100000/100000 frames\n")


def _with_tcp_checksum(frames: list[int], value: int, tmp_path: Path) -> Path:
    pkts = rdpcap(str(PCAPS / "v2_accept.pcap"))
    for number in frames:
        pkts[number - 1][TCP].chksum = value
    cap = tmp_path / "csum.pcap"
    wrpcap(str(cap), pkts)
    return cap


def test_checksums_left_to_the_nic_on_the_emulated_hosts_frames_are_fine(
        tmp_path: Path) -> None:
    # A capture taken on the sending host shows checksums its NIC fills in later.
    cap = _with_tcp_checksum([2, 5, 6, 9], 0, tmp_path)
    rc, text, _ = replay(cap, "--emulate", P, tmp_path=tmp_path)
    assert rc == 0, text


def test_an_injected_frame_with_a_bad_checksum_is_dropped_by_the_nic(tmp_path: Path) -> None:
    cap = _with_tcp_checksum([4], 0x1234, tmp_path)
    out = tmp_path / "merged.pcapng"
    rc, text, report = replay(cap, "--emulate", P, "-o", str(out), tmp_path=tmp_path)
    assert rc == 1
    d = report["divergences"][0]
    assert (d["kind"], d["frame"]) == ("missing", 5)
    assert "last in   frame 4: dropped by the NIC: bad TCP checksum" in text
    comments = [r.comment or "" for r in read_capture(out)]
    assert any(c.startswith("injected frame 4: dropped by the NIC") for c in comments)


def _two_connections_on_one_four_tuple(tmp_path: Path) -> Path:
    """v2_reject twice on the same ports, the second one second later with new ISNs."""
    from scapy.layers.inet import IP

    first = list(rdpcap(str(PCAPS / "v2_reject.pcap")))
    second = list(rdpcap(str(PCAPS / "v2_reject.pcap")))
    shift = {A: 0x10000000, P: 0x20000000}
    peer = {A: P, P: A}
    for pkt in second:
        src = pkt[IP].src
        pkt.time += 1
        pkt[TCP].seq = (pkt[TCP].seq + shift[src]) & 0xFFFFFFFF
        if int(pkt[TCP].flags) & 0x10:
            pkt[TCP].ack = (pkt[TCP].ack + shift[peer[src]]) & 0xFFFFFFFF
        del pkt[TCP].chksum
    cap = tmp_path / "twice.pcap"
    wrpcap(str(cap), first + second)
    return cap


def test_a_four_tuple_reused_by_a_second_connection_replays_from_both_sides(
        tmp_path: Path) -> None:
    cap = _two_connections_on_one_four_tuple(tmp_path)
    for ip, sent in ((P, 8), (A, 10)):
        rc, text, report = replay(cap, "--emulate", ip, tmp_path=tmp_path)
        assert rc == 0, text
        assert report["matched"] == report["compared"] == sent
        verbs = [a["verb"] for a in report["actions"] if a["verb"] != "listen"]
        assert verbs == (["reject", "reject"] if ip == P else ["connect", "connect"])


def test_fast_and_traced_runs_send_the_same_frames() -> None:
    # replay_capture relies on it: a first run without the core's trace, a second with.
    from mpa_emu.replay.engine import Engine, EngineOptions
    from mpa_emu.replay.recording import load
    from mpa_emu.replay.recording_source import RecordingSource
    from mpa_emu.wire.addr import ip_bytes

    for name, ip in (("v2_reject.pcap", A), ("backlog_drop.pcap", P),
                     ("retrans_reject_expiry.pcap", P), ("fallback_v2_to_v1.pcap", A)):
        rec = load(PCAPS / name, ip_bytes(ip))
        runs = [Engine(rec, EngineOptions(trace=trace, backlog=1),
                       source=RecordingSource(rec)).run() for trace in (False, True)]
        frames = [[(e.time_ns, e.seg, e.comment) for e in run.emitted] for run in runs]
        assert frames[0] == frames[1], name
        assert len(frames[0]) >= 3


def test_forced_answer_without_a_recorded_reply_is_given_at_the_request(tmp_path: Path) -> None:
    # The capture stops after P's ACK of the request: nothing shows P's answer, so a
    # forced accept answers at once, and the reply is a frame the capture does not show.
    cap = first_frames(tmp_path, "v2_accept.pcap", 5)
    rc, _, report = replay(cap, "--emulate", P, "--on-request", "accept", tmp_path=tmp_path)
    assert rc == 1
    d = report["divergences"][0]
    assert (d["kind"], d["frame"]) == ("unexpected", 4)
    assert "MPA reply" in d["actual"]["summary"]
    assert d["actual"]["time"] == 0.00015
    rc, text, _ = replay(cap, "--emulate", P, tmp_path=tmp_path)  # auto: no answer at all
    assert rc == 0, text


def test_a_match_with_nothing_compared_says_it_only_proves_silence(tmp_path: Path) -> None:
    # P never answers the SYN with MSS 500 (sidecar: compared 0): a vacuous-looking
    # MATCH must say what it does and does not prove.
    rc, text, _ = replay(PCAPS / "syn_bad_mss_dropped.pcap", "--emulate", P, tmp_path=tmp_path)
    assert rc == 0
    assert text.splitlines()[:2] == [
        f"MATCH: 0/0 frames of {P} matched, 0 NIC warning(s), 0 extra frame(s) after the "
        "capture",
        f"note: the capture holds no frame sent by {P}: the match only says that the "
        "emulator stayed silent while the capture lasted"]
    rc, text, _ = replay(PCAPS / "v2_accept.pcap", "--emulate", P, tmp_path=tmp_path)
    assert rc == 0 and "stayed silent" not in text
