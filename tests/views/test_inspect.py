"""mpa-emu inspect on hand-made captures: correct conversations and every malformation the
spec lists (wireshark-mpa section 7's broken cases, irdma_parse_mpa's refusals)."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.inspect_builders import Conversation, write_pcap, write_pcapng
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.inet import TCP

from mpa_emu.cli import main
from mpa_emu.views.inspection import (
    ConnectionReport,
    RawFrame,
    format_report,
    inspect_capture,
    inspect_frames,
    parse_tcp_options,
)

KEY_REQ = b"MPA ID Req Frame"
KEY_REP = b"MPA ID Rep Frame"
V2_REQUEST = KEY_REQ + bytes.fromhex("50020018" "8010c010") + b"hello from initiator"
V2_REPLY = KEY_REP + bytes.fromhex("5002000b" "80104010") + b"welcome"
V2_REJECT = KEY_REP + bytes.fromhex("70020010" "80104010") + b"it's not you"
V1_REQUEST = KEY_REQ + bytes.fromhex("40010000")
V1_REPLY = KEY_REP + bytes.fromhex("40010000")

# Zero-length RDMA Read Request as irdma's RTR (irdma_sc_send_rtt, RFC 6581 section 5): untagged DDP
# (L, DV=1), RDMAP
# v1 opcode 1, QN 1, MSN 1, MO 0; sink STag 0xabcd, TO 0, size 0, source STag 0x1234,
# TO 0. ULPDU 46 bytes, as tshark reports it.
RTR_READ_ULPDU = (bytes.fromhex("4141" "00000000" "00000001" "00000001" "00000000")
                  + bytes.fromhex("0000abcd" "0000000000000000" "00000000" "00001234"
                                  "0000000000000000"))
SEND_ULPDU = bytes.fromhex("4143" "00000000" "00000000" "00000001" "00000000") + b"x" * 19


def crc32c_castagnoli(data: bytes) -> int:
    """Bitwise CRC32c (reflected polynomial 0x82F63B78), independent of mpa_emu.wire.mpa."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def fpdu(ulpdu: bytes, good_crc: bool = True) -> bytes:
    body = struct.pack("!H", len(ulpdu)) + ulpdu
    body += b"\x00" * (-len(body) % 4)
    crc = crc32c_castagnoli(body) ^ (0 if good_crc else 0xDEADBEEF)
    return body + struct.pack("<I", crc)


def accept_conversation(cport: int = 40001, **kw: object) -> Conversation:
    return (Conversation(cport=cport, **kw).handshake()  # type: ignore[arg-type]
            .client_sends(V2_REQUEST).ack_from_server()
            .server_sends(V2_REPLY).ack_from_client()
            .client_sends(fpdu(RTR_READ_ULPDU)).server_sends(fpdu(SEND_ULPDU))
            .graceful_close())


def errors(conn: ConnectionReport) -> list[str]:
    return [f.text for f in conn.findings if f.severity == "error"]


def test_v2_accept_story_is_complete(tmp_path: Path) -> None:
    report = inspect_capture(write_pcapng(tmp_path / "a.pcapng", accept_conversation()))
    (conn,) = report.connections
    assert (conn.client, conn.server) == ("192.168.10.1:40001", "192.168.10.2:31000")
    assert "ISN 1000 [MSS 1460, WS 2]" in conn.handshake[0]
    assert "ISN 5000" in conn.handshake[1]
    assert conn.request is not None and conn.reply is not None
    assert (conn.request.ird, conn.request.ord, conn.request.rtr_names()) == (
        16, 16, ["write", "read"])
    assert conn.request.private_data == b"hello from initiator"
    assert conn.reply.rtr_names() == ["read"] and not conn.reply.reject
    assert conn.reply.private_data == b"welcome"
    assert conn.rtr == "frame 8: zero-length RDMA Read Request"
    assert conn.ended.startswith("closed: FIN from the client (frame 10)")
    assert errors(conn) == []
    assert report.errors == 0


def test_reject_reason_and_fin_are_reported(tmp_path: Path) -> None:
    conv = (Conversation().handshake().client_sends(V2_REQUEST).ack_from_server()
            .server_sends(V2_REJECT, flags="FA"))
    (conn,) = inspect_capture(write_pcap(tmp_path / "r.pcap", conv)).connections
    assert conn.reply is not None and conn.reply.reject
    assert conn.reply.private_data == b"it's not you"
    assert "rejected by the responder" in conn.negotiated
    assert "FIN from the server (frame 6)" in conn.ended


def test_text_output_shows_hex_and_text_private_data(tmp_path: Path, capsys:
                                                     pytest.CaptureFixture[str]) -> None:
    cap = write_pcap(tmp_path / "a.pcap", accept_conversation())
    assert main(["inspect", str(cap)]) == 0
    out = capsys.readouterr().out
    assert '68656c6c6f2066726f6d20696e69746961746f72 "hello from initiator"' in out
    assert "RTR offered: write read; chosen: read" in out


def test_json_output_is_machine_readable(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    cap = write_pcap(tmp_path / "a.pcap", accept_conversation())
    assert main(["inspect", "--json", str(cap)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["connections"][0]["reply"]["private_data"] == b"welcome".hex()


def test_v1_connection_has_no_rtr_block(tmp_path: Path) -> None:
    conv = (Conversation().handshake().client_sends(V1_REQUEST).ack_from_server()
            .server_sends(V1_REPLY))
    (conn,) = inspect_capture(write_pcap(tmp_path / "v1.pcap", conv)).connections
    assert conn.request is not None and conn.request.rev == 1
    assert not conn.request.has_block
    assert conn.negotiated[0] == "MPA rev 1, CRC on, markers off"


BROKEN = {
    41001: (b"MPA ID Rex Frame" + bytes.fromhex("40010000"), "wrong MPA key"),
    41002: (KEY_REQ + bytes.fromhex("40030000"), "unknown MPA revision 3"),
    41004: (KEY_REQ + bytes.fromhex("40010258") + b"p" * 600, "PD_Length 600 > 512"),
    41005: (KEY_REQ + bytes.fromhex("40010064") + b"p" * 12,
            "PD_Length 100 but only 12 bytes"),
}


@pytest.mark.parametrize("port", sorted(BROKEN))
def test_malformed_request_is_named(tmp_path: Path, port: int) -> None:
    payload, expected = BROKEN[port]
    conv = Conversation(cport=port).handshake().client_sends(payload)
    (conn,) = inspect_capture(write_pcap(tmp_path / "b.pcap", conv)).connections
    assert any(expected in e for e in errors(conn)), conn.findings


def test_request_split_over_two_segments_is_what_irdma_fails(tmp_path: Path) -> None:
    conv = (Conversation(cport=41007).handshake().client_sends(V2_REQUEST[:10])
            .client_sends(V2_REQUEST[10:]))
    (conn,) = inspect_capture(write_pcap(tmp_path / "s.pcap", conv)).connections
    assert conn.request is not None and conn.request.private_data == b"hello from initiator"
    assert any("split over segments" in e and "no reassembly" in e for e in errors(conn))


def test_oversized_segment_and_wrong_key_in_reply(tmp_path: Path) -> None:
    big = KEY_REQ + bytes.fromhex("40010200") + b"a" * 512 + b"trailing-bytes"
    c1 = Conversation(cport=41020).handshake().client_sends(big)
    c2 = (Conversation(cport=41021).handshake().client_sends(V2_REQUEST)
          .server_sends(V2_REQUEST))
    c1_rep, c2_rep = inspect_capture(write_pcap(tmp_path / "o.pcap", c1, c2)).connections
    assert any("over irdma's 544" in e for e in errors(c1_rep))
    assert any("found the request key" in e for e in errors(c2_rep))


def test_bad_fpdu_crc_is_reported_with_the_expected_value(tmp_path: Path) -> None:
    conv = (Conversation(cport=41009).handshake().client_sends(V2_REQUEST).ack_from_server()
            .server_sends(V2_REPLY).client_sends(fpdu(RTR_READ_ULPDU))
            .server_sends(fpdu(SEND_ULPDU, good_crc=False)))
    (conn,) = inspect_capture(write_pcap(tmp_path / "c.pcap", conv)).connections
    body = fpdu(SEND_ULPDU)[:-4]
    want = f"expected 0x{crc32c_castagnoli(body):08x}"
    assert any("server FPDU CRC32c" in e and want in e for e in errors(conn))
    assert any("1 with a bad CRC" in line for line in conn.fpdus)


def test_reply_without_p2p_and_wrong_rtr(tmp_path: Path) -> None:
    no_p2p = KEY_REP + bytes.fromhex("50020004" "00104010")
    two_rtr = KEY_REP + bytes.fromhex("50020004" "8010c010")
    c1 = (Conversation(cport=41030).handshake().client_sends(V2_REQUEST)
          .server_sends(no_p2p))
    c2 = (Conversation(cport=41031).handshake().client_sends(V2_REQUEST)
          .server_sends(two_rtr))
    r1, r2 = inspect_capture(write_pcap(tmp_path / "p.pcap", c1, c2)).connections
    assert any("without P2P" in e for e in errors(r1))
    # RFC 6581 section 5: exactly one; a warning, the initiator's stack decides
    assert any(f.severity == "warning" and "chooses 2 RTR types" in f.text
               for f in r2.findings)
    assert not any("chooses 2 RTR types" in e for e in errors(r2))


def test_bad_tcp_checksum_and_zero_length_option(tmp_path: Path) -> None:
    conv = Conversation(cport=41040).handshake()
    conv.client_sends(V2_REQUEST, chksum=0x1234)
    (conn,) = inspect_capture(write_pcap(tmp_path / "k.pcap", conv)).connections
    assert any(f.frame == 4 and f.text == "bad TCP checksum" for f in conn.findings)
    opts, problem = parse_tcp_options(bytes([0x02, 0x04, 0x05, 0xB4, 0x1E, 0x00]))
    assert opts == {"mss": 1460}
    assert "loop forever" in problem


def test_ipv6_vlan_connection_and_syn_retransmission(tmp_path: Path) -> None:
    conv = accept_conversation(client="fd00::1", server="fd00::2", vlan=100)
    syn = conv.frames[0].copy()
    conv.frames.insert(1, syn)
    (conn,) = inspect_capture(write_pcap(tmp_path / "v6.pcap", conv)).connections
    assert conn.client == "[fd00::1]:40001" and conn.vlan == 100
    assert "sent 2 times" in conn.handshake[0]
    assert errors(conn) == []


def test_refused_syn_then_v1_retry_on_the_same_ports_is_two_connections(
        tmp_path: Path) -> None:
    first = Conversation(cport=41050)
    first._frame(True, "S", options=[("MSS", 1460), ("WScale", 2)])
    first._frame(False, "RA", ack=first.c_nxt)
    retry = (Conversation(cport=41050, client_isn=first.c_nxt).handshake()
             .client_sends(V1_REQUEST))
    c1, c2 = inspect_capture(write_pcap(tmp_path / "f.pcap", first, retry)).connections
    assert c1.handshake[-1].startswith("refused: RST from the server")
    assert c1.ended.startswith("reset")
    assert c2.request is not None and c2.request.rev == 1


def test_unreadable_files_give_one_line_errors(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"this is not a capture")
    good = write_pcap(tmp_path / "a.pcap", accept_conversation())
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(good.read_bytes()[:-30])
    for path, code in ((junk, 2), (tmp_path / "missing.pcap", 2), (cut, 1)):
        proc = subprocess.run([sys.executable, "-m", "mpa_emu", "inspect", str(path)],
                              capture_output=True, text=True)
        assert proc.returncode == code, proc.stderr
        assert "Traceback" not in proc.stderr
        if code == 2:
            assert proc.stderr.startswith("mpa-emu inspect: error: ")
            assert len(proc.stderr.splitlines()) == 1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(min_size=0, max_size=120), min_size=1, max_size=6),
       st.sampled_from([1, 101, 113, 276, 228, 229, 147]))
def test_any_bytes_give_findings_not_tracebacks(blobs: list[bytes], link: int) -> None:
    # Each blob rides in front of a valid Ethernet/IPv4/TCP header some of the time, so
    # the analysis past the link layer is exercised too.
    base = bytes(accept_conversation().frames[3])
    frames = [RawFrame(i + 1, float(i), link, (base[:54] + b) if i % 2 else b, 200)
              for i, b in enumerate(blobs)]
    report = inspect_frames(frames, "fuzz")
    assert report.frames == len(blobs)


def test_frames_with_mutated_tcp_payload_never_raise(tmp_path: Path) -> None:
    conv = accept_conversation()
    for i, f in enumerate(conv.frames):
        if f.haslayer(TCP) and bytes(f[TCP].payload):
            data = bytearray(bytes(f[TCP].payload))
            data[(7 * i) % len(data)] ^= 0xFF
            f[TCP].remove_payload()
            f[TCP].add_payload(bytes(data))
    report = inspect_capture(write_pcap(tmp_path / "m.pcap", conv))
    assert len(report.connections) == 1


def test_capture_cut_inside_the_last_frame_keeps_the_rest(tmp_path: Path) -> None:
    good = write_pcap(tmp_path / "a.pcap", accept_conversation())
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(good.read_bytes()[:-30])
    report = inspect_capture(cut)
    assert report.frames == 11
    assert report.connections[0].reply is not None
    assert any("after frame 11" in p for p in report.problems)


def _scenario_capture(tmp_path: Path, name: str) -> Path:
    from mpa_emu.scenario import load_scenario, run_scenario

    root = Path(__file__).resolve().parents[2]
    run = run_scenario(load_scenario(root / "scenarios" / f"{name}.toml"))
    out = tmp_path / f"{name}.pcapng"
    run.net.write_pcapng(out)
    return out


def test_our_reject_capture(tmp_path: Path) -> None:
    report = inspect_capture(_scenario_capture(tmp_path, "reject_with_private_data"))
    (conn,) = report.connections
    assert conn.reply is not None and conn.reply.reject
    assert conn.reply.private_data == b"it's not you"
    assert conn.ended.startswith("closed: FIN from the server")
    assert report.errors == 0
    # mpa_emu's frame comments name the kernel function behind each frame.
    assert any("irdma_send_mpa_reject" in text for _, text in conn.comments)


def test_our_interop_captures(tmp_path: Path) -> None:
    siw = inspect_capture(_scenario_capture(tmp_path, "siw_initiator_irdma_responder"))
    reset, p2p = siw.connections
    assert any("request without P2P" in f.text for f in reset.findings)
    assert reset.ended.startswith("reset: RST from the server")
    assert p2p.reply is not None and p2p.reply.rtr_names() == ["read"]
    fallback = inspect_capture(_scenario_capture(tmp_path, "v1_fallback"))
    first, retry = fallback.connections  # the v1 retry reuses the 4-tuple
    assert first.client == retry.client
    assert first.request is not None and first.request.rev == 2
    assert retry.request is not None and retry.request.rev == 1
    # MPA v1 has no RTR (RFC 6581 is v2 only): the zero-length Read irdma still sends is
    # its first FPDU, noted as such; the responder's zero-length Read Response (RFC 5040
    # section 5.3) and the initiator's ACK of it follow.
    assert retry.rtr == ""
    assert any(f.frame == retry.last_frame - 2 and "MPA v1 has no RTR" in f.text
               for f in retry.findings)


def test_capture_starting_mid_connection_finds_the_initiator(tmp_path: Path) -> None:
    conv = accept_conversation()
    conv.frames = conv.frames[4:]  # from the server's ACK of the MPA request on
    (conn,) = inspect_capture(write_pcap(tmp_path / "mid.pcap", conv)).connections
    assert conn.client == "192.168.10.1:40001"  # the reply's receiver
    assert conn.handshake == ["no SYN in the capture (connection already open)"]
    assert conn.request is None
    assert conn.reply is not None and conn.reply.private_data == b"welcome"


def test_cli_selects_connections(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = accept_conversation(cport=40001)
    bad = Conversation(cport=41002).handshake().client_sends(BROKEN[41002][0])
    cap = write_pcap(tmp_path / "two.pcap", good, bad)
    assert main(["inspect", "--port", "40001", str(cap)]) == 0
    out = capsys.readouterr().out
    assert "Connection 1:" in out and "Connection 2:" not in out
    assert main(["inspect", "--problems", str(cap)]) == 1
    out = capsys.readouterr().out
    assert "Connection 2:" in out and "Connection 1:" not in out
    assert main(["inspect", "-c", "1", "-c", "2", str(cap)]) == 1


def test_request_without_rtr_types_and_reset_order(tmp_path: Path) -> None:
    no_rtr = KEY_REQ + bytes.fromhex("50020004" "80100010")  # P2P, IRD 16, ORD 16, no C/D
    conv = Conversation(cport=41060).handshake().client_sends(no_rtr)
    conv._frame(False, "RA")
    conv._frame(True, "RA")
    (conn,) = inspect_capture(write_pcap(tmp_path / "n.pcap", conv)).connections
    assert any("neither the Read nor the Write RTR" in f.text for f in conn.findings)
    assert conn.ended == ("reset: RST from the server (frame 5), RST from the client "
                          "(frame 6)")


def test_segment_beyond_irdma_window_is_named_as_a_check_seq_drop() -> None:
    # The fixture's frame 5 starts 69937 bytes past rcv_nxt (sidecar: outside
    # [rcv_nxt, rcv_nxt + 65535]), not a hole in the capture.
    root = Path(__file__).resolve().parents[2]
    (conn,) = inspect_capture(root / "pcaps" / "check_seq_drops.pcap").connections
    (finding,) = [f for f in conn.findings if f.frame == 5]
    assert finding.severity == "warning"
    assert finding.text == ("client segment starts 69937 bytes past the client's data so "
                            "far: outside irdma's receive window (65535), irdma_check_seq "
                            "drops it silently")


def test_short_request_names_the_header_size_and_irdmas_answer() -> None:
    root = Path(__file__).resolve().parents[2]
    (conn,) = inspect_capture(root / "pcaps" / "parse_short.pcap").connections
    assert [(f.frame, f.severity, f.text) for f in conn.findings if f.severity == "error"] == [
        (4, "error", "MPA request cut short: only 10 bytes of the 20-byte header "
                     "(irdma_parse_mpa: -EINVAL, RST)")]


def test_header_counts_every_connection_and_says_how_many_are_selected(
        capsys: pytest.CaptureFixture[str]) -> None:
    root = Path(__file__).resolve().parents[2]
    backlog = root / "pcaps" / "backlog_drop.pcap"  # three clients, ports 40001-40003
    assert main(["inspect", str(backlog), "-c", "2"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        f"{backlog}: 14 frames, 14 TCP, 3 connections (1 selected), 0 errors")
    accept = root / "pcaps" / "v2_accept.pcap"
    assert main(["inspect", str(accept), "--problems"]) == 0
    # Every report names the checksum reading it used (issue 10, item 1).
    assert capsys.readouterr().out == (
        f"{accept}: 10 frames, 10 TCP, 1 connection (0 selected), 0 errors\n"
        "  checksums offload: TX checksum offload artefacts are notes, not errors\n")


def test_empty_private_data_is_just_its_length() -> None:
    root = Path(__file__).resolve().parents[2]
    report = inspect_capture(root / "pcaps" / "reject_v2_empty.pcap")
    text = format_report(report)
    assert "              reject reason (0 bytes)\n" in text
    assert '""' not in text
