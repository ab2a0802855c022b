"""``mpa-emu judge`` cuts a long capture into pieces for tshark (bounded memory) and
reports exactly what tshark says of the whole file: the expected side of every test
here is tshark run once on the whole capture, through :class:`Tshark` directly.

The pieces are made tiny (a few frames) so that small captures are cut many times."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.real_like_captures import partial_sum
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import ARP, Ether
from scapy.packet import Packet
from scapy.utils import rdpcap, wrpcap, wrpcapng

import mpa_emu.capture.tshark_pieces as tshark_pieces
from mpa_emu.capture.tshark import Tshark
from mpa_emu.capture.tshark_pieces import cut_capture
from mpa_emu.cli import main
from mpa_emu.frames import MPAReply, MPARequest
from mpa_emu.frames.conversation import Conversation, Endpoint
from mpa_emu.wire import ddp

pytestmark = [pytest.mark.tshark, pytest.mark.slow(5)]

MPA_FILTER = "iwarp_mpa || iwarp_ddp_rdmap"
PIECE = 24


@pytest.fixture(scope="module")
def judge() -> Tshark:
    return Tshark(extra_options=("-o", "ip.check_checksum:TRUE", "-o",
                                 "tcp.check_checksum:TRUE"))


@pytest.fixture(autouse=True)
def _tiny_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tshark_pieces, "PIECE_FRAMES", PIECE)
    monkeypatch.setattr(tshark_pieces, "CARRY_LIMIT", PIECE)


def _conversation(n: int, *, bad_crc: bool = False, close: bool = True) -> Conversation:
    conv = Conversation(
        initiator=Endpoint("02:00:00:00:00:01", f"192.168.10.{n + 1}", 40001 + n,
                           0x159BF75F + 7919 * n),
        responder=Endpoint("02:00:00:00:00:02", "192.168.10.200", 31000, 0x2A3B4C5D))
    conv.handshake()
    conv.data(True, bytes(MPARequest(flags="CS", rev=2, ird=8, ord=8, write0=1, read0=1)))
    conv.data(False, bytes(MPAReply(flags="CS", rev=2, ird=8, ord=8, read0=1)))
    rtr = ddp.fpdu(ddp.read_rtr())
    conv.data(True, rtr[:-1] + bytes([rtr[-1] ^ 1]) if bad_crc else rtr)
    if close:
        conv.close()
    return conv


def _timed(packets: list[Packet], start: float = 0.0, step: float = 0.000250) -> list[Packet]:
    for i, pkt in enumerate(packets):
        pkt.time = start + i * step
    return packets


def _sequential(count: int = 6, bad: int = 3) -> list[Packet]:
    """``count`` connections one after another; connection ``bad`` has a bad CRC."""
    packets: list[Packet] = []
    for n in range(count):
        packets += _conversation(n, bad_crc=n == bad).packets
    return _timed(packets)


def _with_long_connection(count: int = 6) -> tuple[list[Packet], set[int]]:
    """Short connections one after another while one long connection stays open
    across them; returns the frames and the (1-based) frame numbers of the long one."""
    long = _conversation(50, close=False)
    tail = Conversation(initiator=long.initiator, responder=long.responder)
    tail.close()
    long_frames = long.packets + tail.packets
    packets: list[Packet] = []
    long_numbers: set[int] = set()
    pending = list(long_frames)
    for n in range(count):
        for pkt in _conversation(n).packets:
            packets.append(pkt)
            if pending and len(packets) % 3 == 0:
                packets.append(pending.pop(0))
                long_numbers.add(len(packets))
    for pkt in pending:
        packets.append(pkt)
        long_numbers.add(len(packets))
    return _timed(packets), long_numbers


def _expected(judge: Tshark, path: Path) -> dict[str, object]:
    """tshark's verdicts on the whole file, read without the judge's pieces."""
    crcs = judge.crc_verdicts(path)
    return {
        "frames": judge.summary(path, MPA_FILTER),
        "crc": [{"frame": v.frame, "status": v.status, "text": v.text} for v in crcs],
        "expert": [{"severity": e.severity, "group": e.group, "protocol": e.protocol,
                    "summary": e.summary, "count": e.count}
                   for e in judge.expert(path) if e.protocol.startswith("IWARP")],
        "problems": judge.problems(path),
    }


def _report(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(["judge", str(path), "--checksums", "--json"])
    report = json.loads(capsys.readouterr().out)
    return code, {k: report[k] for k in ("frames", "crc", "expert", "problems")}


def _piece_count(path: Path) -> int:
    """How many pieces the judge cuts the capture into; 0 when it judges it whole."""
    pieces: list[tshark_pieces.Piece] = []
    try:
        for piece in cut_capture(str(path)):
            pieces.append(piece)
    except tshark_pieces.Unsplittable:
        return 0
    finally:
        for piece in pieces:
            piece.remove()
    return 0 if pieces[0].whole else len(pieces)


@pytest.mark.parametrize("write", [wrpcap, wrpcapng], ids=["pcap", "pcapng"])
def test_sequential_connections_judged_in_pieces_as_tshark_judges_the_whole_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], write: object,
        judge: Tshark) -> None:
    path = tmp_path / "sequential.cap"
    write(str(path), _sequential())  # type: ignore[operator]
    assert _piece_count(path) >= 3
    code, report = _report(path, capsys)
    assert report == _expected(judge, path)
    assert code == 1  # the bad CRC


def test_frame_numbers_and_times_are_the_captures_own(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    packets = _sequential(bad=4)
    path = tmp_path / "sequential.pcap"
    wrpcap(str(path), packets)
    assert _piece_count(path) >= 3
    _code, report = _report(path, capsys)
    # Connections of 12 frames each; the RTR is the 8th frame of connection 4.
    bad_frame = 4 * 12 + 8
    assert bytes(packets[bad_frame - 1][TCP].payload) != b""
    assert [v["frame"] for v in report["crc"] if v["status"] == "bad"] == [bad_frame]
    assert f"frame {bad_frame}: " in " ".join(report["problems"])
    # The MPA Request of connection 5 is the capture's frame 5 * 12 + 4, sent 0.25 ms
    # per frame after the first.
    line = next(f for f in report["frames"] if f.startswith(f"{5 * 12 + 4} "))
    assert "MPA Request Frame" in line
    assert line.split()[1] == f"{(5 * 12 + 3) * 0.000250:.6f}"


def test_a_connection_open_across_a_cut_is_never_split(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], judge: Tshark) -> None:
    packets, long_numbers = _with_long_connection()
    path = tmp_path / "long.pcap"
    wrpcap(str(path), packets)
    first_long = min(long_numbers)
    pieces = list(cut_capture(str(path)))
    try:
        assert len(pieces) >= 3 and not pieces[0].whole
        for piece in pieces:
            numbers = [piece.carried_numbers[i - 1] if piece.number(i) is None
                       else piece.number(i) for i in range(1, len(rdpcap(piece.path)) + 1)]
            long_here = [n for n in numbers if n in long_numbers]
            if long_here:
                # Every piece that holds the long connection holds it from its SYN on.
                assert long_here[0] == first_long
                assert long_here == sorted(n for n in long_numbers if n <= long_here[-1])
    finally:
        for piece in pieces:
            piece.remove()
    monkeypatch_free = _report(path, capsys)[1]
    assert monkeypatch_free == _expected(judge, path)


def test_text_report_from_pieces_is_the_one_of_the_whole_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "sequential.pcapng"
    wrpcapng(str(path), _sequential())
    assert main(["judge", str(path)]) == 1
    pieces = capsys.readouterr().out
    monkeypatch.setattr(tshark_pieces, "PIECE_FRAMES", 10**9)
    assert _piece_count(path) == 0
    assert main(["judge", str(path)]) == 1
    assert pieces == capsys.readouterr().out


def test_standard_input_is_judged_in_pieces_too(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, judge: Tshark) -> None:
    path = tmp_path / "sequential.pcap"
    wrpcap(str(path), _sequential())
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(path.read_bytes())))
    assert main(["judge", "-", "--checksums", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["capture"] == "-"
    expected = _expected(judge, path)
    assert {k: report[k] for k in expected} == expected


def test_a_frame_after_its_connection_ended_in_an_earlier_piece_means_one_piece(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], judge: Tshark) -> None:
    packets = _sequential()
    late = packets[12].copy()  # the final ACK of the first connection, again at the end
    packets = _timed([*packets, late])
    path = tmp_path / "late.pcap"
    wrpcap(str(path), packets)
    with pytest.raises(tshark_pieces.Unsplittable):
        for piece in cut_capture(str(path)):
            piece.remove()
    assert _report(path, capsys)[1] == _expected(judge, path)


def test_a_capture_with_other_traffic_than_tcp_is_judged_whole(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], judge: Tshark) -> None:
    packets = _sequential()
    packets.insert(40, Ether(dst="ff:ff:ff:ff:ff:ff", src="02:00:00:00:00:01") /
                   ARP(psrc="192.168.10.1", pdst="192.168.10.200"))
    path = tmp_path / "arp.pcap"
    wrpcap(str(path), _timed(packets))
    assert _piece_count(path) == 0
    assert _report(path, capsys)[1] == _expected(judge, path)


def test_offload_artefacts_and_bad_checksums_keep_the_captures_frame_numbers(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], judge: Tshark) -> None:
    packets = _sequential()
    # The initiators of connections 2 and 4 (in different pieces) send partial sums.
    artefacts: dict[str, list[int]] = {"192.168.10.3": [], "192.168.10.5": []}
    for number, pkt in enumerate(packets, 1):
        if pkt[IP].src in artefacts:
            pkt[TCP].chksum = partial_sum(pkt[IP].src, pkt[IP].dst, len(bytes(pkt[TCP])))
            artefacts[pkt[IP].src].append(number)
    wrong = 5 * 12 + 2  # the SYN/ACK of connection 5
    packets[wrong - 1][TCP].chksum = 0x1234
    path = tmp_path / "offload.pcap"
    wrpcap(str(path), packets)
    assert _piece_count(path) >= 3
    assert main(["judge", str(path), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["checksums"] == {"mode": "offload", "offload": artefacts, "bad": [wrong]}
    # SYN, ACK, request, ACK of the reply, RTR, FIN, last ACK: 7 frames each.
    assert [len(v) for v in artefacts.values()] == [7, 7]
    assert artefacts["192.168.10.3"][0] == 2 * 12 + 1
    expected = _expected(Tshark(extra_options=("-o", "ip.check_checksum:TRUE")), path)
    assert report["frames"] == expected["frames"]
    assert report["problems"] == [*expected["problems"],  # type: ignore[misc]
                                  f"frame {wrong}: bad TCP checksum (not a TX offload "
                                  "partial sum)"]
