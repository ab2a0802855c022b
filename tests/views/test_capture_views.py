"""inspect, diagram, judge and the scapy layers on captures the emulator did not make:
TX checksum offload artefacts, MPA v1 without CRC and zero CRC fields, data after a
FIN, 60-byte RSTs with Ethernet padding, a v2 connection with CRC errors and a Terminate.

Expected values come from the captures' construction (tests/helpers/real_like_captures.py),
RFC 5040/5041/5044, and tshark's own decode of the same files.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.real_like_captures import (
    FRAMES,
    OFFLOAD_FRAMES,
    V2_FRAMES,
    linux_v1_offload,
    v2_crc_errors,
)
from scapy.layers.inet import TCP
from scapy.utils import rdpcap

from mpa_emu.capture.checksums import Mode
from mpa_emu.capture.tshark import Tshark
from mpa_emu.cli import main
from mpa_emu.frames import MPAFPDU, install_bindings
from mpa_emu.frames.stream import dissect_stream
from mpa_emu.views.diagram import from_capture
from mpa_emu.views.inspection import inspect_capture

TSHARK_FIELDS = ["tcp.checksum.status", "tcp.len", "tcp.flags.fin", "tcp.flags.reset",
                 "iwarp_ddp.qn", "iwarp_ddp.msn", "iwarp_ddp.mo", "iwarp_mpa.ulpdulength",
                 "iwarp_ddp.last_flag", "iwarp_rdma.sinkstag", "iwarp_mpa.crc",
                 "iwarp_mpa.crc_check", "iwarp_ddp.stag", "iwarp_rdma.srcstag",
                 "iwarp_rdma.srcto"]


@pytest.fixture(scope="module")
def v1(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return linux_v1_offload(tmp_path_factory.mktemp("real") / "linux_v1_offload.pcap")


@pytest.fixture(scope="module")
def v2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return v2_crc_errors(tmp_path_factory.mktemp("real") / "v2_crc_errors.pcap")


def tshark_rows(capture: Path) -> dict[int, dict[str, list[str]]]:
    judge = Tshark(disable_rpcrdma=True, extra_options=("-o", "tcp.check_checksum:TRUE"))
    return judge.field_by_frame(capture, TSHARK_FIELDS)


@pytest.mark.tshark
def test_tshark_sees_the_offload_frames_as_bad_and_the_rest_as_good(v1: Path) -> None:
    rows = tshark_rows(v1)
    bad = [n for n, row in rows.items() if row.get("tcp.checksum.status") == ["0"]]
    assert bad == OFFLOAD_FRAMES  # tshark 4.0: 0 Bad, 1 Good
    assert all(rows[n]["tcp.checksum.status"] == ["1"] for n in rows if n not in bad)


def test_inspect_offload_reading_notes_artefacts_once_and_exits_0(
        v1: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(v1)]) == 0
    out = capsys.readouterr().out
    assert "checksums offload: TX checksum offload artefacts are notes, not errors" in out
    assert out.count("TX checksum offload: not verified") == 1
    assert "client frames: TX checksum offload: not verified (8 frames" in out
    assert "ERROR" not in out and "bad TCP checksum" not in out


def test_inspect_strict_reading_makes_every_artefact_an_error(v1: Path) -> None:
    report = inspect_capture(v1, Mode.STRICT)
    (conn,) = report.connections
    bad = [f.frame for f in conn.findings if f.severity == "error"
           and f.text.startswith("bad TCP checksum")]
    assert bad == OFFLOAD_FRAMES
    assert report.checksums == "strict"
    off = inspect_capture(v1, Mode.OFF)
    assert not any("checksum" in f.text for f in off.connections[0].findings)


def test_inspect_decodes_the_v1_story_without_rtr_or_crc_verdicts(v1: Path) -> None:
    (conn,) = inspect_capture(v1).connections
    assert conn.crc is False and "MPA rev 1, CRC off, markers off" in conn.negotiated
    assert conn.rtr == ""  # MPA v1: the first FPDU is the ULP's first message
    assert [f.frame for f in conn.fpdu_list] == [7, 8, 9, 11]
    assert all(f.crc is None for f in conn.fpdu_list)
    assert not any("CRC" in f.text for f in conn.findings)


@pytest.mark.tshark
def test_fpdu_fields_match_tshark(v1: Path, v2: Path) -> None:
    for capture in (v1, v2):
        rows = tshark_rows(capture)
        for f in inspect_capture(capture).connections[0].fpdu_list:
            row = rows[f.frame]
            assert row["iwarp_mpa.ulpdulength"] == [str(f.ulpdu_length)]
            assert row["iwarp_ddp.last_flag"] == ["1" if f.last else "0"]
            if f.qn is not None:
                assert row["iwarp_ddp.qn"] == [str(f.qn)]
                assert row["iwarp_ddp.msn"] == [str(f.msn)]
                assert row["iwarp_ddp.mo"] == [str(f.mo)]
            if f.opcode == 1:
                assert int(row["iwarp_rdma.sinkstag"][0], 16) == f.stag
                assert int(row["iwarp_rdma.srcstag"][0], 16) == f.src_stag
                assert int(row["iwarp_rdma.srcto"][0], 0) == f.src_to
            # CRC off: tshark shows the field unchecked; CRC on: a verdict.
            assert ("iwarp_mpa.crc_check" in row) == (f.crc is not None)


def test_fpdu_listing_as_built(v1: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "--fpdus", str(v1)]) == 0
    out = capsys.readouterr().out
    assert ("frame 8 client: RDMA Read Request (64 bytes), QN 1 MSN 1 MO 0, sink STag "
            "0x1000 TO 0x0, source STag 0x2000 TO 0x0, ULPDU_Length 46, L\n") in out
    assert "frame 9 client: Send (5 bytes), QN 0 MSN 3 MO 0, ULPDU_Length 23, L\n" in out


def test_rdmap_findings_and_the_whole_ending(v1: Path) -> None:
    (conn,) = inspect_capture(v1).connections
    texts = {(f.frame, f.severity): f.text for f in conn.findings}
    assert "never answered" in texts[(FRAMES["read"], "warning")]
    assert "QN 0 MSN 3 after MSN 1: 1 message missing" in texts[(FRAMES["send3"], "warning")]
    assert "client data after the server's FIN" in texts[(FRAMES["late_send"], "warning")]
    assert conn.ended == (
        "reset: FIN from the server (frame 10), client data after the server's FIN: "
        "32 bytes (frame 11), RST from the server (frame 12), RST from the client "
        "(frame 13)")


@pytest.mark.tshark
def test_ending_frames_match_tshark_and_padding_is_not_data(v1: Path) -> None:
    rows = tshark_rows(v1)
    fins = [n for n, r in rows.items() if r["tcp.flags.fin"] == ["1"]]
    rsts = [n for n, r in rows.items() if r["tcp.flags.reset"] == ["1"]]
    assert (fins, rsts) == ([FRAMES["server_fin"]], [FRAMES["server_rst"],
                                                      FRAMES["client_rst"]])
    assert rows[FRAMES["server_rst"]]["tcp.len"] == ["0"]
    assert len(rdpcap(str(v1))[FRAMES["server_rst"] - 1]) == 60  # 6 bytes of padding


def test_fingerprints_state_their_evidence(v1: Path, v2: Path) -> None:
    (conn,) = inspect_capture(v1).connections
    assert conn.fingerprints[0].startswith(
        "client: Linux-like TCP stack (SYN options MSS, SACK, TS, NOP, WS; window 64240)")
    assert "not irdma (irdma always sets C)" in conn.fingerprints[0]
    (conn2,) = inspect_capture(v2).connections
    assert conn2.fingerprints[0].startswith(
        "client: irdma-shaped TCP (SYN options MSS, WS, EOL; window 65535); MPA rev 2, "
        "flags 0x50, P2P, offers write+read RTR: irdma's defaults")


@pytest.mark.tshark
def test_negotiated_crc_zero_and_wrong_and_terminate(v2: Path) -> None:
    (conn,) = inspect_capture(v2).connections
    assert conn.rtr == f"frame {V2_FRAMES['rtr']}: zero-length RDMA Read Request"
    verdicts = {f.frame: f.crc for f in conn.fpdu_list}
    assert verdicts == {7: "zero", 8: "bad", 9: "good"}
    judge = Tshark(disable_rpcrdma=True)
    assert [(v.frame, v.status) for v in judge.crc_verdicts(v2)] == [
        (7, "bad"), (8, "bad"), (9, "good")]
    term = next(f for f in conn.findings if f.frame == V2_FRAMES["terminate"])
    assert term.text.endswith("layer LLP (2), type MPA (0), code 0x02 MPA CRC error")
    detail = judge.decode(v2, "frame.number == 9", ("iwarp_ddp_rdmap",))
    assert "Layer: LLP (0x2)" in detail and "MPA Error (0x0)" in detail
    assert "MPA CRC Error (0x02)" in detail


def test_diagram_decodes_every_frame_and_names_no_crc_when_off(v1: Path, v2: Path) -> None:
    text = from_capture(v1).text()
    assert "not decoded" not in text and "CRC" not in text
    assert text.count("TX checksum offload: not verified") == 1
    assert "192.168.77.10: TX checksum offload: not verified (8 frames, first 1, last 13)" \
        in text
    strict = from_capture(v1, checksums=Mode.STRICT).text()
    assert strict.count("TCP checksum: offload artefact") == len(OFFLOAD_FRAMES)
    crc_on = from_capture(v2).text()
    assert crc_on.count("zero CRC") == 1 and crc_on.count("bad CRC") == 1


@pytest.mark.tshark
def test_judge_and_inspect_agree_in_each_reading(
        v1: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["judge", str(v1), "--no-rpcrdma", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["checksums"] == {"mode": "offload", "offload":
                                   {"192.168.77.10": OFFLOAD_FRAMES}, "bad": []}
    assert main(["inspect", str(v1)]) == 0
    capsys.readouterr()
    assert main(["judge", str(v1), "--no-rpcrdma", "--checksums", "strict"]) == 1
    assert main(["inspect", str(v1), "--checksums", "strict"]) == 1
    out = capsys.readouterr().out
    assert "checksums strict: tshark verifies IP and TCP checksums" in out
    assert main(["judge", str(v1), "--no-rpcrdma"]) == 0
    out = capsys.readouterr().out
    assert "192.168.77.10: TX checksum offload: not verified (8 frames, first 1, last 13)" \
        in out
    assert "CRC: 0 good, 0 bad, 4 unchecked (the unchecked FPDUs are on connections " \
        "without CRC" in out


def test_scapy_stream_gives_no_crc_verdict_and_reads_no_padding(v1: Path) -> None:
    install_bindings()
    out = dissect_stream(rdpcap(str(v1)))
    fpdus = [p[MPAFPDU] for p in out if MPAFPDU in p]
    assert len(fpdus) == 4 and all(f.crc_ok is None for f in fpdus)
    assert all("CRC" not in f.describe() for f in fpdus)
    rsts = [p for p in out if TCP in p and p[TCP].flags.R]
    assert len(rsts) == 2
    assert all(MPAFPDU not in p and p[TCP].payload.__class__.__name__ != "Raw"
               for p in rsts)
