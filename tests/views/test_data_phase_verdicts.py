"""Messages counted as messages, a Terminate leading to the FPDU it answers, and cut
captures read as tshark reads them, on an SMB Direct capture shaped like a real one
(``helpers.falloc_captures``). Expected values come from the capture's layout (RFC 5041
section 5: a message is every segment of one QN/MSN up to L) and tshark's decode."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers.falloc_captures import (
    BIG_MSN,
    BIG_SEND,
    FALLOC,
    FALLOC2,
    READ_SIZE,
    SPLIT_MSN,
    SPLIT_SEND,
    falloc,
)
from helpers.third_party_captures import (
    READ_SEGMENT,
    READ_SEGMENTS,
    SNAP_FRAMES,
    TERM_FRAMES,
    siw_terminate,
    smb_direct_siw,
    snapped_v1,
)

from mpa_emu.cli import main
from mpa_emu.views.inspection import format_report, inspect_capture

needs_tshark = pytest.mark.skipif(shutil.which("tshark") is None, reason="needs tshark")
needs_editcap = pytest.mark.skipif(shutil.which("editcap") is None, reason="needs editcap")


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return falloc(tmp_path_factory.mktemp("falloc") / "falloc.pcap")


def _tshark(path: Path, *fields: str) -> list[list[str]]:
    args = ["tshark", "-n", "-r", str(path), "-o", "tcp.try_heuristic_first:TRUE",
            "-T", "fields"]
    for f in fields:
        args += ["-e", f]
    rows = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    return [r.split("\t") for r in rows.splitlines()]


def _explain(capsys: pytest.CaptureFixture[str], path: Path) -> list[dict[str, Any]]:
    main(["explain", "--json", "-", str(path)])
    out: list[dict[str, Any]] = json.loads(capsys.readouterr().out)["connections"]
    return out


# Messages, not segments


@needs_tshark
def test_a_send_in_six_segments_is_one_message(capture: Path) -> None:
    # tshark: the client's DDP segments with MSN 22, each ULPDU less its 18-byte header.
    rows = [r for r in _tshark(capture, "frame.number", "tcp.srcport", "iwarp_ddp.msn",
                               "iwarp_mpa.ulpdulength") if r[2] == str(SPLIT_MSN)
            and r[1] == "40001"]
    assert len(rows) == 6
    assert sum(int(r[3]) - 18 for r in rows) == SPLIT_SEND
    conn = inspect_capture(capture).connections[0]
    msg = next(m for m in conn.messages if m.side == "client" and m.msn == SPLIT_MSN)
    assert (msg.bytes, msg.segments, msg.first_frame, msg.complete) == \
        (SPLIT_SEND, 6, int(rows[0][0]), True)
    assert msg.frames == [int(r[0]) for r in rows]
    assert f"1 Send ({SPLIT_SEND} bytes in 6 segments)" in conn.fpdus[0]
    assert f"1 Send ({BIG_SEND} bytes in 12 segments)" in conn.fpdus[0]
    assert "Send (1424 bytes)" not in conn.fpdus[0]
    assert conn.fpdus[0].startswith("client: 41 FPDUs in 25 messages (")


def test_a_read_response_in_twelve_segments_is_one_message(capture: Path) -> None:
    conn = inspect_capture(capture).connections[1]
    assert f"1 RDMA Read Response ({READ_SIZE} bytes in 12 segments)" in conn.fpdus[0]
    msg = next(m for m in conn.messages if m.name == "RDMA Read Response")
    assert (msg.first_frame, msg.last_frame) == (FALLOC2["response_first"],
                                                 FALLOC2["response_last"])


def test_messages_in_json_text_and_html(capture: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    main(["inspect", "--json", str(capture)])
    conn = json.loads(capsys.readouterr().out)["connections"][0]
    big = next(m for m in conn["messages"] if m["msn"] == BIG_MSN and m["side"] == "client")
    assert (big["bytes"], big["segments"], big["first_frame"]) == (BIG_SEND, 12, 77)
    assert f"1 Send ({BIG_SEND} bytes in 12 segments)" in conn["fpdus"][0]
    main(["inspect", str(capture)])
    assert f"1 Send ({SPLIT_SEND} bytes in 6 segments)" in capsys.readouterr().out
    html = tmp_path / "i.html"
    main(["inspect", str(capture), "--html", str(html)])
    capsys.readouterr()
    assert f"1 Send ({SPLIT_SEND} bytes in 6 segments)" in html.read_text()


def test_fpdus_keeps_one_row_per_segment(capture: Path) -> None:
    text = format_report(inspect_capture(capture), fpdus=True)
    assert "frame 82 client: Send (1424 bytes), QN 0 MSN 25 MO 7120" in text
    assert "frame 77 client: Send (1424 bytes), QN 0 MSN 25 MO 0" in text


def test_smb_direct_read_of_twelve_thousand_bytes(tmp_path: Path) -> None:
    conn = inspect_capture(smb_direct_siw(tmp_path / "smb.pcap")).connections[0]
    size = READ_SEGMENTS * READ_SEGMENT
    assert f"1 RDMA Read Response ({size} bytes in {READ_SEGMENTS} segments)" \
        in conn.fpdus[0]


# A Terminate leads to what it answers


@needs_tshark
def test_terminate_names_the_segment_it_quotes(capture: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    # tshark reads frame 82 as MSN 25 MO 7120 and frame 77 as the same message's MO 0.
    rows = {r[0]: r[1:] for r in _tshark(capture, "frame.number", "iwarp_ddp.msn",
                                          "iwarp_ddp.mo")}
    assert rows["82"] == [str(BIG_MSN), "7120"] and rows["77"] == [str(BIG_MSN), "0"]
    e = _explain(capsys, capture)[0]
    assert (e["verdict"], e["cause"]) == ("failed", "rx-overflow")
    assert e["evidence"] == [FALLOC["big_first"], FALLOC["big_sixth"], FALLOC["terminate"]]
    assert "answering frame 82 (the client's Send, QN 0 MSN 25 MO 7120: segment 6 of 12 " \
           "of a 16520-byte Send that began at frame 77)" in e["summary"]
    assert "\n" not in e["summary"] and len(e["summary"]) < 300
    assert "frame 82" in e["fix"]
    assert any(n.startswith("the Terminate quotes 20 bytes") for n in e["notes"])
    conn = inspect_capture(capture).connections[0]
    term = next(f for f in conn.fpdu_list if f.frame == FALLOC["terminate"])
    assert term.answers == FALLOC["big_sixth"]


def test_terminate_evidence_is_highlighted(capture: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    html = tmp_path / "e.html"
    main(["explain", str(capture), "--html", str(html)])
    capsys.readouterr()
    page = html.read_text()
    for frame in (77, 82, 90):
        assert f'class="row hl" data-row="{frame - 1}" data-frame="{frame}"' in page
    for frame in (4, 5):
        assert f'class="row hl" data-row="{frame - 1}" data-frame="{frame}"' not in page


def test_short_terminate_names_the_send(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    e = _explain(capsys, siw_terminate(tmp_path / "t.pcap"))[0]
    assert e["evidence"] == [TERM_FRAMES["send"], TERM_FRAMES["terminate"]]
    assert f"answering frame {TERM_FRAMES['send']}" in e["summary"]


# Cut captures


def _cut(path: Path, snap: int) -> Path:
    out = path.with_name(f"{path.stem}_{snap}.pcap")
    subprocess.run(["editcap", "-s", str(snap), str(path), str(out)], check=True)
    return out


@needs_tshark
@needs_editcap
@pytest.mark.parametrize("snap", [128, 200])
def test_cut_capture_keeps_the_terminate(capture: Path, snap: int,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    cut = _cut(capture, snap)
    # tshark on the cut file still decodes frame 90 as a Terminate (opcode 7).
    rows = {r[0]: r[1] for r in _tshark(cut, "frame.number", "iwarp_rdma.opcode")}
    assert rows[str(FALLOC["terminate"])] == "0x07"
    first, second = _explain(capsys, cut)
    assert (first["verdict"], first["cause"]) == ("failed", "rx-overflow")
    assert first["evidence"] == [77, 82, 90]
    assert any(n.startswith("cut-capture:") for n in first["notes"])
    # Nothing wrong in what connection 2 kept, but its Read Response payload was cut.
    assert (second["verdict"], second["cause"]) == ("warning", "cut-capture")
    conn = inspect_capture(cut).connections[0]
    term = next(f for f in conn.fpdu_list if f.frame == FALLOC["terminate"])
    assert not term.cut and term.answers == FALLOC["big_sixth"]
    assert any("captured short" in f.text and "placed by its sequence number" in f.text
               for f in conn.findings)


@needs_editcap
def test_cut_at_80_bytes_invents_nothing(capture: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    for e in _explain(capsys, _cut(capture, 80)):
        assert (e["verdict"], e["cause"]) == ("warning", "cut-capture")
        assert "reset" not in e["summary"]


def test_snapped_v1_is_not_a_reset(tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    # The capture: request (4) and reply (5) cut to 14 bytes of payload each.
    e = _explain(capsys, snapped_v1(tmp_path / "s.pcap"))[0]
    assert (e["verdict"], e["cause"]) == ("warning", "cut-capture")
    assert e["evidence"] == [SNAP_FRAMES["request"]]
    assert "reset" not in e["summary"]


@pytest.mark.parametrize(("layer", "etype", "code", "cause"), [
    (1, 2, 0x06, "ddp-version"),  # RFC 5041 section 7.2: untagged, Invalid DDP version
    (0, 2, 0x05, "rdmap-version"),  # RFC 5040 section 7.4: Invalid RDMAP version
    (0, 2, 0x06, "invalid-opcode"),  # RFC 5040 section 7.4: Unexpected OpCode
    (1, 2, 0x03, "msn-error"),  # RFC 5041 section 7.2: MSN range is not valid
])
def test_terminates_of_every_layer_have_their_cause(
        layer: int, etype: int, code: int, cause: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = siw_terminate(tmp_path / "t.pcap", layer=layer, etype=etype, code=code)
    e = _explain(capsys, path)[0]
    assert (e["verdict"], e["cause"]) == ("failed", cause)
    assert e["evidence"] == [TERM_FRAMES["send"], TERM_FRAMES["terminate"]]


@needs_editcap
def test_fpdu_rows_say_what_was_cut(capture: Path) -> None:
    text = format_report(inspect_capture(_cut(capture, 200)), fpdus=True)
    assert ("frame 82 client: Send (1424 bytes), QN 0 MSN 25 MO 7120, ULPDU_Length 1442, "
            "not last, captured short (header only, not judged)") in text
    assert "frame 90 server: Terminate" in text and "quotes the header of frame 82" in text


ROOT = Path(__file__).resolve().parents[2]


@needs_editcap
@pytest.mark.parametrize("snap", [80, 128, 200])
def test_cut_rtr_is_not_judged(snap: int, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    # v2_accept's RTR (frame 8, a zero-length Read Request) cut at 80 bytes kept 14 of
    # its bytes: what it is cannot be told, so it is no RTR mismatch.
    cut = tmp_path / "v2.pcap"
    subprocess.run(["editcap", "-s", str(snap), str(ROOT / "pcaps" / "v2_accept.pcap"),
                    str(cut)], check=True)
    e = _explain(capsys, cut)[0]
    assert e["verdict"] in ("ok", "warning") and e["cause"] in ("ok", "cut-capture")


@needs_editcap
def test_data_after_fin_counts_the_bytes_sent(tmp_path: Path) -> None:
    # The sidecar: frames 16 and 17 carry 1448 + 576 bytes after the server's FIN; a
    # capture cut at 128 bytes still counts what was sent, not what was kept.
    real = ROOT / "pcaps" / "real" / "real_v1_crc_off_zero_crc.pcap"
    facts = json.loads(real.with_suffix(".json").read_text())["connections"][0]
    sent = sum(x["bytes"] for x in facts["data_after_fin"])
    cut = tmp_path / "c.pcap"
    subprocess.run(["editcap", "-s", "128", str(real), str(cut)], check=True)
    for path in (real, cut):
        conn = inspect_capture(path).connections[0]
        assert f"client data after the server's FIN: {sent} bytes" in conn.ended


def test_fpdu_header_in_the_cut_bytes_is_read_again_at_the_next_segment(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Frame 6 carries two 64-byte FPDUs (Sends MSN 1 and 2; RFC 5044 section 4.1: 2 + 18
    # + 40 + 4); a snap length of 54 + 65 keeps the first whole and one byte of the
    # second's header. Frame 7 begins with the Send MSN 3: it is read, and MSN 2 hidden
    # in the cut bytes is no gap.
    from helpers.real_like_captures import fpdu
    from helpers.third_party_captures import (
        KEY_REP,
        KEY_REQ,
        Builder,
        mpa_frame,
        untagged,
        write_snapped,
    )
    b = Builder()
    b.handshake()
    b.add(True, "PA", mpa_frame(KEY_REQ, 0x00, 1, None))
    b.add(False, "PA", mpa_frame(KEY_REP, 0x00, 1, None))
    b.add(True, "PA", fpdu(untagged(3, 0, 1, b"a" * 40), "zero")
          + fpdu(untagged(3, 0, 2, b"b" * 40), "zero"))
    b.add(True, "PA", fpdu(untagged(3, 0, 3, b"c" * 40), "zero"))
    b.add(False, "A")
    path = write_snapped(tmp_path / "r.pcap", b.frames, 54 + 65)
    conn = inspect_capture(path).connections[0]
    assert [(f.frame, f.msn) for f in conn.fpdu_list] == [(6, 1), (7, 3)]
    assert any("read again from frame 7" in f.text for f in conn.findings)
    assert not [f for f in conn.findings if f.rule == "msn-error"]
    e = _explain(capsys, path)[0]
    assert (e["verdict"], e["cause"]) == ("warning", "cut-capture")
