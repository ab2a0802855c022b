"""replay --semantic of the data phase plays the recorded application (issue 31, items 5
and 6): the memory it registered, the Read Requests it issued, the receive buffers it
posted; a healthy connection replays without a Terminate the replay itself caused, a
recorded overflow Terminate is reproduced, and a Terminate is read as inspect reads it.

Expected values come from the captures' own bytes (helpers.data_phase_captures,
helpers.third_party_captures, pcaps/real sidecars) and siw's receive path:
siw_proc_send/siw_rqe_get/siw_send_check_ntoh (``receive space short``: the buffer
overflows at the segment it cannot hold, DDP untagged buffer error code 0x02),
siw_proc_rresp/siw_orqe_start_rx (a Read Response needs the Read Request on the ORQ),
siw_init_rresp/siw_check_sge (a Read Request's source STag must name a region),
siw_get_hdr (DDP version 1 only: DDP layer, untagged buffer error, code 0x06)."""

from __future__ import annotations

import contextlib
import io
import struct
from pathlib import Path
from typing import Any

import pytest
from helpers import data_phase_captures as dp
from helpers.replay_cli import PCAPS, replay
from helpers.third_party_captures import (
    CLIENT,
    SERVER,
    TERM_FRAMES,
    ddp_version_zero,
    siw_terminate,
    smb_direct_siw,
)
from scapy.layers.inet import IP, TCP
from scapy.utils import rdpcap

from mpa_emu.cli import main


def _emulated_terminates(report: dict[str, Any]) -> list[tuple[str, int, str]]:
    return [(conn["flow"], ev["frame"], ev["event"])
            for conn in report["semantic"]["connections"]
            for ev in conn["emulated"]["nic"] if ev["event"].startswith("Terminate")]


def _recorded_terminates(report: dict[str, Any]) -> list[tuple[str, int, str]]:
    return [(conn["flow"], ev["frame"], ev["event"])
            for conn in report["semantic"]["connections"]
            for ev in conn["recorded"]["nic"] if ev["event"].startswith("Terminate")]


@pytest.mark.parametrize("host", [CLIENT, SERVER])
def test_a_healthy_siw_smb_direct_connection_replays_without_a_terminate(
        host: str, tmp_path: Path) -> None:
    # The server reads 12,000 bytes of the client's STag 0x77 (frame 9); the client's
    # twelve Read Responses answer it. Emulating the client, the Read Request finds the
    # region the recording shows answered; emulating the server, its Read Request is
    # issued again, so the Read Responses find it on the ORQ (siw_orqe_start_rx).
    path = smb_direct_siw(tmp_path / "smb.pcap")
    rc, text, report = replay(path, "--emulate", host, "--semantic", "--profile", "siw",
                              tmp_path=tmp_path)
    assert _emulated_terminates(report) == [], text
    assert rc == 0, text
    verbs = [a["verb"] for a in report["actions"]]
    if host == SERVER:
        (read,) = [a for a in report["actions"] if a["verb"] == "post_read"]
        assert "12000 bytes" in read["detail"] and "source STag 0x77 TO 0x2000" in read["detail"]
        assert "sink STag 0x5a5a TO 0x10000" in read["detail"]
    else:
        assert "register_mr" in verbs and "post_read" not in verbs
    assert report["assumptions"], text
    assert "assumption: " in text


def _reissued_read(path: Path, out: Path) -> bytes:
    """The ULPDU of the Read Request the emulated server sent (from the merged output)."""
    for pkt in rdpcap(str(out)):
        if IP in pkt and pkt[IP].src == dp.SERVER and pkt[TCP].dport == dp.HEALTHY_PORT:
            data = bytes(pkt[TCP].payload)
            if len(data) > 4 and data[3] & 0x0F == 1 and not data[2] & 0x80:
                return data[2:2 + struct.unpack_from("!H", data)[0]]
    return b""


def test_the_recorded_overflow_terminate_is_reproduced_and_the_healthy_one_stays_healthy(
        tmp_path: Path) -> None:
    path = dp.data_phase(tmp_path / "dp.pcap")
    merged = tmp_path / "merged.pcapng"
    rc, text, report = replay(path, "--emulate", dp.SERVER, "--semantic", "--profile", "siw",
                              "-o", str(merged), tmp_path=tmp_path)
    assert rc == 0, text
    overflow = f"{dp.SERVER}:{dp.PORT} <-> {dp.CLIENT}:{dp.OVERFLOW_PORT}"
    # siw_send_check_ntoh: the buffer (at least MO 7120, under 7120 + 1424) overflows at
    # MO 7120 with DDP layer, untagged buffer error, code 0x02, siw's layout.
    word = "Terminate (DDP layer, etype 2, code 0x02, siw layout)"
    assert [(f, e) for f, _n, e in _recorded_terminates(report)] == [(overflow, word)]
    assert [(f, e) for f, _n, e in _emulated_terminates(report)] == [(overflow, word)]
    assumed = [a["text"] for a in report["assumptions"] if a["flow"] == overflow]
    assert any(f"MSN 2 MO {dp.OVERFLOW_MO}" in a and "fewer than 8544" in a for a in assumed)
    # The emulated Terminate quotes the segment it overflowed at: MSN 2, MO 7120.
    quoted = []
    for pkt in rdpcap(str(merged)):
        if IP in pkt and pkt[IP].src == dp.SERVER and pkt[TCP].dport == dp.OVERFLOW_PORT:
            data = bytes(pkt[TCP].payload)
            if len(data) >= 48 and data[3] & 0x0F == 7:
                quoted.append(struct.unpack_from("!III", data, 2 + 18 + 4 + 2 + 6))
    assert quoted == [(0, 2, dp.OVERFLOW_MO)]
    # The healthy connection: the server's Read Request issued again, as recorded.
    read = _reissued_read(path, merged)
    sink, sink_to, size, src, src_to = struct.unpack_from("!IQIIQ", read, 18)
    assert (sink, sink_to, size, src, src_to) == (dp.READ_SINK, dp.READ_SINK_TO, dp.READ_SIZE,
                                                  dp.READ_SOURCE, dp.READ_SOURCE_TO)


def test_the_client_of_both_connections_invents_no_terminate(tmp_path: Path) -> None:
    # The client takes the server's Terminate (siw_proc_terminate: no Terminate back),
    # answers the Read Request from the region the recording shows answered and takes
    # the server's RDMA Write into STag 0x3499.
    path = dp.data_phase(tmp_path / "dp.pcap")
    _rc, text, report = replay(path, "--emulate", dp.CLIENT, "--semantic", "--profile",
                               "siw", tmp_path=tmp_path)
    assert _emulated_terminates(report) == [], text
    healthy = f"{dp.CLIENT}:{dp.HEALTHY_PORT} <-> {dp.SERVER}:{dp.PORT}"
    assert not [d for d in report["semantic"]["divergences"] if d["flow"] == healthy], text
    regions = [a["detail"] for a in report["actions"] if a["verb"] == "register_mr"]
    assert any(d.startswith(f"STag {dp.READ_SOURCE:#x}, {dp.READ_SIZE} bytes at "
                            f"{dp.READ_SOURCE_TO:#x}") for d in regions), regions
    assert any(d.startswith(f"STag {dp.WRITE_STAG:#x}, {dp.WRITE_SIZE} bytes at "
                            f"{dp.WRITE_TO:#x}") for d in regions), regions


def test_profile_auto_finds_siw_for_the_server_of_the_data_phase(tmp_path: Path) -> None:
    path = dp.data_phase(tmp_path / "dp.pcap")
    rc, text, report = replay(path, "--emulate", dp.SERVER, "--semantic", "--profile", "auto",
                              tmp_path=tmp_path)
    assert rc == 0, text
    assert "siw" in report["same_outcome_profiles"], text


def test_the_emulated_terminate_is_read_in_the_layout_inspect_reads(tmp_path: Path) -> None:
    # siw_get_hdr: a Send with DDP version 0 -> DDP layer, untagged buffer error, code
    # 0x06 (DDP_ECODE_UT_VERSION), nothing quoted; siw's bit-fields put layer 1 in the low
    # nibble, etype 2 in the high one. Read as RFC 5040 lays it out it would say layer 2.
    path = ddp_version_zero(tmp_path / "v.pcap")
    merged = tmp_path / "merged.pcapng"
    _rc, text, report = replay(path, "--emulate", SERVER, "--semantic", "--profile", "siw",
                               "-o", str(merged), tmp_path=tmp_path)
    ((_flow, _n, event),) = _emulated_terminates(report)
    assert event == "Terminate (DDP layer, etype 2, code 0x06, siw layout)", text
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["inspect", str(merged)])
    names = "layer DDP (1), type Untagged Buffer Error (2), code 0x06 Invalid DDP version"
    assert f"server sends a Terminate: {names}" in out.getvalue()
    line = next(d["text"] for d in report["semantic"]["divergences"] if d["aspect"] == "nic")
    # The difference names the Terminate as inspect does, and the rule behind it.
    assert f"{event}: {names}" in line
    assert "siw_get_hdr" in line and "MPA layer" not in text


def test_a_read_request_the_recording_never_answers_is_an_assumption(tmp_path: Path) -> None:
    # real_v1_crc_off_zero_crc: the client's Read Request (frame 12) is never answered by
    # the recorded server (a userspace program). The recording does not show its source
    # STag valid, so no region is registered; siw's Terminate (siw_init_rresp ->
    # siw_check_sge: STag unknown) is named with its cause, and the assumption is said.
    cap = PCAPS / "real" / "real_v1_crc_off_zero_crc.pcap"
    _rc, _text, report = replay(cap, "--emulate", "192.0.2.2", "--semantic", "--profile",
                               "siw", tmp_path=tmp_path)
    (first,) = [d for d in report["semantic"]["divergences"] if d["aspect"] == "nic"]
    assert first["frame"] == 12
    assert "Remote Protection Error (1), code 0x00 Invalid STag" in first["text"]
    assert "siw_check_sge: STag unknown" in first["text"]
    assert any("frame 12" in a["text"] and "no Read Response in the recording" in a["text"]
               for a in report["assumptions"])


def test_a_terminate_at_mo_0_is_reproduced_with_no_buffer_for_that_send(
        tmp_path: Path) -> None:
    # The server's Terminate (frame 7: DDP, untagged buffer, 0x02) quotes the client's
    # first Send, MSN 1 MO 0: siw_proc_send found no receive WQE (siw_rqe_get). Replay
    # posts none, and siw answers the Send with the same Terminate.
    path = siw_terminate(tmp_path / "t.pcap")
    _rc, text, report = replay(path, "--emulate", SERVER, "--semantic", "--profile", "siw",
                               tmp_path=tmp_path)
    word = "Terminate (DDP layer, etype 2, code 0x02, siw layout)"
    assert [(n, e) for _f, n, e in _recorded_terminates(report)] == [
        (TERM_FRAMES["terminate"], word)]
    assert [e for _f, _n, e in _emulated_terminates(report)] == [word], text
    assert not [d for d in report["semantic"]["divergences"] if d["aspect"] == "nic"]
    (assumed,) = [a["text"] for a in report["assumptions"]]
    assert "quotes MSN 1 MO 0" in assumed and "no receive buffer" in assumed
    assert [a["detail"] for a in report["actions"] if a["verb"] == "post_recv"] == [
        "no receive buffer"]


REAL_CAPTURES = sorted([*(PCAPS / "real").glob("*.pcap"), *(PCAPS / "real" / "siw").glob("*.pcap")])


def _unanswered_reads(cap: Path, host: str) -> list[int]:
    """Frames of the peer's non-zero RDMA Read Requests (sidecar fpdus, opcode 1) that
    ``host`` never answered with a Read Response (opcode 2), the read size taken from the
    frame's bytes (RFC 5040 section 4.4: after the 18-byte untagged header, sink STag 4,
    sink TO 8, then the size)."""
    import json
    meta = json.loads(cap.with_suffix(".json").read_text())
    frames = rdpcap(str(cap))
    out = []
    for conn in meta["connections"]:
        side = "server" if conn["server"].startswith(f"{host}:") else "client"
        fpdus = conn.get("fpdus", [])
        for f in fpdus:
            if f["opcode"] != 1 or f["from"] == side:
                continue
            data = bytes(frames[f["frame"] - 1][TCP].payload)
            size = struct.unpack_from("!I", data, 2 + 18 + 12)[0]
            answered = any(g["opcode"] == 2 and g["from"] == side and g["frame"] > f["frame"]
                           for g in fpdus)
            if size and not answered:
                out.append(f["frame"])
    return out


@pytest.mark.parametrize("profile", ["siw", "mpa-v1"])
@pytest.mark.parametrize("host", ["192.0.2.1", "192.0.2.2"])
@pytest.mark.parametrize("cap", REAL_CAPTURES, ids=[c.stem for c in REAL_CAPTURES])
def test_real_captures_replay_as_siw_without_a_terminate_the_recording_does_not_explain(
        cap: Path, host: str, profile: str, tmp_path: Path) -> None:
    # None of these recorded hosts sent a Terminate. The only one siw may send is for a
    # Read Request the recorded host never answered (real_v1_crc_off_zero_crc frame 12:
    # its source STag is not shown valid, siw_check_sge), said as an assumption.
    _rc, text, report = replay(cap, "--emulate", host, "--semantic", "--profile", profile,
                               tmp_path=tmp_path)
    assert _recorded_terminates(report) == []
    unanswered = _unanswered_reads(cap, host)
    got = [(n, e) for _f, n, e in _emulated_terminates(report)]
    assert got == [(n, "Terminate (RDMAP layer, etype 1, code 0x00, siw layout)")
                   for n in unanswered], text
    for n in unanswered:
        assert any(f"frame {n}" in a["text"] and "no Read Response" in a["text"]
                   for a in report["assumptions"]), text


def test_text_json_and_html_state_the_same_assumptions(tmp_path: Path) -> None:
    import html
    path = dp.data_phase(tmp_path / "dp.pcap")
    page = tmp_path / "r.html"
    _rc, text, report = replay(path, "--emulate", dp.SERVER, "--semantic", "--profile", "siw",
                               "--html", str(page), tmp_path=tmp_path)
    lines = [line.removeprefix("assumption: ") for line in text.splitlines()
             if line.startswith("assumption: ")]
    assert lines == [f"{a['flow']}: {a['text']}" for a in report["assumptions"]]
    shown = page.read_text()
    assert "Assumptions (what the recording cannot show)" in shown
    for line in lines:
        assert html.escape(line, quote=False) in shown or html.escape(line) in shown
