"""The MPA peer over kernel sockets (loopback TCP, no privileges needed)."""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from mpa_emu.cli import main
from mpa_emu.live import peer
from mpa_emu.wire import mpa


@contextmanager
def tcp_pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A connected loopback TCP pair (client, server side)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname(), timeout=5)
        server, _ = listener.accept()
    with client, server:
        yield client, server


def in_thread(fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    box: dict[str, Any] = {}

    def body() -> None:
        box["value"] = fn(*args)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()

    def result() -> Any:
        thread.join(10)
        assert not thread.is_alive()
        return box["value"]
    return result


def test_v2_request_bytes_match_the_reference_capture() -> None:
    # spec wireshark-mpa section 7: flags C|S, rev 2, PD_Length 24, P2P IRD 16,
    # write0|read0 ORD 16, then "hello from initiator".
    frame = peer.build_request(peer.PeerOptions(private_data=b"hello from initiator"))
    assert frame.to_bytes() == (b"MPA ID Req Frame" + bytes.fromhex("50020018")
                                + bytes.fromhex("8010c010") + b"hello from initiator")


def test_v1_request_has_only_the_crc_flag_and_no_block() -> None:
    frame = peer.build_request(peer.PeerOptions(rev=1, private_data=b"x"))
    assert frame.to_bytes() == b"MPA ID Req Frame" + bytes.fromhex("40010001") + b"x"


def _rtr_sent_after(reply: mpa.MpaFrame) -> bytes:
    """Play a responder by hand: read the request, send ``reply``, return the ULPDU of
    the first FPDU the initiator sends."""
    with tcp_pair() as (client, server):
        initiator = in_thread(peer.run_initiator, client, peer.PeerOptions(timeout=3))
        stream = peer.MpaStream(server, 3)
        stream.read_frame(expect_request=True)
        stream.send_frame(reply)
        unit = stream.read_fpdu()
        initiator()
    assert unit.crc_ok
    return unit.ulpdu


def test_read_rtr_is_a_zero_length_read_request_with_irdma_stags() -> None:
    reply = mpa.MpaFrame(request=False, rev=2, flags=mpa.FLAG_CRC | mpa.FLAG_ENHANCED,
                         rtr=mpa.RtrBlock(ird=16, ord=16, read0=True))
    ulpdu = _rtr_sent_after(reply)
    # RFC 5041 section 4: untagged, L, DV 1; RFC 5040: RV 1, opcode 1; QN 1, MSN 1, MO 0;
    # then the Read Request header: sink STag 0xabcd, sink TO 0, size 0, source STag
    # 0x1234, source TO 0 (irdma_sc_send_rtt, ctrl.c). 46 bytes, as tshark
    # shows for the reference capture (spec wireshark-mpa section 7).
    assert ulpdu == (b"\x41\x41" + struct.pack("!IIII", 0, 1, 1, 0)
                     + struct.pack("!IQIIQ", 0xABCD, 0, 0, 0x1234, 0))
    assert len(ulpdu) == 46


def test_write_rtr_is_a_zero_length_tagged_write() -> None:
    reply = mpa.MpaFrame(request=False, rev=2, flags=mpa.FLAG_CRC | mpa.FLAG_ENHANCED,
                         rtr=mpa.RtrBlock(ird=16, ord=16, write0=True))
    assert _rtr_sent_after(reply) == b"\xc1\x40" + bytes(12)  # T|L|DV, RV|Write, STag 0, TO 0


def test_accepted_v2_exchange_carries_ird_ord_rtr_and_a_send() -> None:
    with tcp_pair() as (client, server):
        def serve() -> peer.PeerReport:
            with server:
                return peer.run_responder(server, peer.PeerOptions(
                    ird=4, ord=2, private_data=b"welcome", send=b"hello from the responder side"))
        responder = in_thread(serve)
        report = peer.run_initiator(client, peer.PeerOptions(
            private_data=b"hi", timeout=3, hold=0.5))
        other = responder()
    assert report.error is None and other.error is None
    assert report.accepted and other.accepted
    assert report.received is not None and report.received.rtr is not None
    assert (report.received.rtr.ird, report.received.rtr.ord) == (4, 2)
    assert report.received.private_data == b"welcome"
    assert report.rtr_sent == "read" and other.rtr_received == "read"
    assert other.received is not None and other.received.private_data == b"hi"
    kinds = [m.name for m in report.messages]
    assert kinds == ["RDMA Read Response", "Send"]
    assert report.messages[1].payload == b"hello from the responder side"
    assert report.close == "fin"


@pytest.mark.parametrize(("negotiate", "expected_ord"), [(True, 6), (False, 16)])
def test_responder_lowers_its_ord_to_the_initiator_ird_unless_literal(
        negotiate: bool, expected_ord: int) -> None:
    request = peer.build_request(peer.PeerOptions(ird=6, ord=2))
    reply = peer.build_reply(request, peer.PeerOptions(ird=16, ord=16, negotiate=negotiate))
    assert reply.rtr is not None and (reply.rtr.ird, reply.rtr.ord) == (16, expected_ord)


def test_responder_picks_write_when_preferred_and_offered() -> None:
    with tcp_pair() as (client, server):
        responder = in_thread(peer.run_responder, server, peer.PeerOptions(rtr="write"))
        report = peer.run_initiator(client, peer.PeerOptions(timeout=3))
        other = responder()
    assert report.rtr_sent == "write" and other.rtr_received == "write"


def test_v1_request_gets_a_v1_reply_and_no_rtr() -> None:
    with tcp_pair() as (client, server):
        responder = in_thread(peer.run_responder, server, peer.PeerOptions())
        report = peer.run_initiator(client, peer.PeerOptions(rev=1, timeout=3))
        responder()
    assert report.received is not None and report.received.rev == 1
    assert report.received.rtr is None and report.rtr_sent is None
    assert report.received.flags == mpa.FLAG_CRC


def test_reject_carries_private_data_and_is_followed_by_fin() -> None:
    with tcp_pair() as (client, server):
        responder = in_thread(peer.run_responder, server, peer.PeerOptions(
            reject=True, private_data=b"it's not you"))
        report = peer.run_initiator(client, peer.PeerOptions(timeout=3))
        client.close()
        other = responder()
    assert report.rejected and not report.accepted
    assert report.received is not None
    assert report.received.flags == mpa.FLAG_CRC | mpa.FLAG_REJECT | mpa.FLAG_ENHANCED
    assert report.received.private_data == b"it's not you"
    assert report.close == "fin" and other.close == "fin"
    assert any("reject" in line for line in report.lines)


def test_wrong_key_is_reported_with_the_bytes() -> None:
    with tcp_pair() as (client, server):
        server.sendall(b"MPA ID Rex Frame" + bytes(4))
        report = peer.run_initiator(client, peer.PeerOptions(timeout=2))
    assert report.error is not None and "MPA ID Rex Frame" in report.error


def test_private_data_length_over_512_is_refused() -> None:
    with tcp_pair() as (client, server):
        server.sendall(b"MPA ID Rep Frame" + bytes.fromhex("40010258") + bytes(600))
        report = peer.run_initiator(client, peer.PeerOptions(timeout=2))
    assert report.error is not None and "PD_Length 600" in report.error


def test_silence_ends_in_a_timeout_report() -> None:
    with tcp_pair() as (client, _server):
        report = peer.run_initiator(client, peer.PeerOptions(timeout=0.3))
    assert report.error is not None and "timed out" in report.error


def test_reset_while_waiting_is_reported_as_econnreset() -> None:
    with tcp_pair() as (client, server):
        server.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        server.close()
        report = peer.run_initiator(client, peer.PeerOptions(timeout=2))
    assert report.close == "reset" and report.error is not None and "reset" in report.error


def test_refused_connection_is_a_peer_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    with pytest.raises(peer.PeerError, match="refused"):
        peer.open_connection("127.0.0.1", port, 2)


def test_cli_rejects_a_malformed_endpoint(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["peer", "--connect", "192.0.2.1"]) == 2
    assert "IP:PORT" in capsys.readouterr().err


def test_cli_rejects_private_data_over_the_v2_limit(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["peer", "--connect", "192.0.2.1:1", "--private-data", "x" * 509]) == 2
    assert "allows 508" in capsys.readouterr().err


def test_cli_exchange_prints_fields_and_private_data(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def serve() -> peer.PeerReport:
            conn, _ = listener.accept()
            with conn:
                return peer.run_responder(conn, peer.PeerOptions(private_data=b"welcome"))
        responder = in_thread(serve)
        code = main(["peer", "--connect", f"127.0.0.1:{port}", "--ird", "3", "--ord", "5",
                     "--private-data", "hello", "--timeout", "3"])
        responder()
    out = capsys.readouterr().out
    assert code == 0
    assert "received MPA reply: rev 2, flags 0x50 (C S), PD_Length 11" in out
    assert "IRD 16, ORD 3, P2P read0" in out  # ORD lowered to the initiator's IRD 3
    assert '77656c636f6d65 "welcome"' in out
    assert "sent FPDU: RTR read" in out


def test_cli_json_report_carries_the_frames(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def serve() -> peer.PeerReport:
            conn, _ = listener.accept()
            with conn:
                return peer.run_responder(conn, peer.PeerOptions(
                    reject=True, private_data=b"busy", timeout=3))
        responder = in_thread(serve)
        code = main(["peer", "--connect", f"127.0.0.1:{port}", "--json", "--timeout", "3"])
        responder()
    out = capsys.readouterr().out.strip()
    report = json.loads(out)  # the only output: one JSON object
    assert code == 0
    assert report["rejected"] is True and report["accepted"] is False
    assert report["received"]["flags"] == 0x70 and report["received"]["private_data"] == "62757379"
    assert report["received"]["rtr"]["p2p"] is True
    assert report["sent"]["rtr"] == {"ird": 16, "ord": 16, "p2p": True, "send0": False,
                                     "write0": True, "read0": True}
    assert report["close"] == "fin" and report["error"] is None


def test_cli_listener_answers_count_connections_in_turn(capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    server = in_thread(main, ["peer", "--listen", str(port), "--bind", "127.0.0.1",
                              "--count", "2", "--reject", "--private-data", "full",
                              "--timeout", "3"])
    reports = []
    for _ in range(2):
        for _attempt in range(50):  # the listener may not be up yet
            try:
                sock = peer.open_connection("127.0.0.1", port, 3)
                break
            except peer.PeerError:
                threading.Event().wait(0.05)
        with sock:
            reports.append(peer.run_initiator(sock, peer.PeerOptions(timeout=3)))
    assert server() == 0
    assert [r.rejected for r in reports] == [True, True]
    assert capsys.readouterr().out.count("sent MPA reject") == 2


def test_without_crc_on_either_side_fpdus_carry_a_zero_crc() -> None:
    reply = mpa.MpaFrame(request=False, rev=2, flags=mpa.FLAG_ENHANCED,
                         rtr=mpa.RtrBlock(ird=16, ord=16, read0=True))
    with tcp_pair() as (client, server):
        initiator = in_thread(peer.run_initiator, client, peer.PeerOptions(crc=False, timeout=3))
        stream = peer.MpaStream(server, 3)
        request = stream.read_frame(expect_request=True)
        stream.send_frame(reply)
        unit = stream.read_fpdu()
        initiator()
    assert request.flags == mpa.FLAG_ENHANCED  # no C
    assert unit.crc == 0  # RFC 5044: the field is present, unused


def test_responder_without_crc_does_not_check_it() -> None:
    with tcp_pair() as (client, server):
        responder = in_thread(peer.run_responder, server, peer.PeerOptions(crc=False))
        report = peer.run_initiator(client, peer.PeerOptions(crc=False, timeout=3))
        client.close()
        other = responder()
    assert report.error is None and other.rtr_received == "read"
    assert any("CRC not in use" in line for line in other.lines)


def test_crc_is_used_when_only_one_side_sets_c() -> None:
    reply = mpa.MpaFrame(request=False, rev=2, flags=mpa.FLAG_ENHANCED | mpa.FLAG_CRC,
                         rtr=mpa.RtrBlock(ird=16, ord=16, read0=True))
    with tcp_pair() as (client, server):
        initiator = in_thread(peer.run_initiator, client, peer.PeerOptions(crc=False, timeout=3))
        stream = peer.MpaStream(server, 3)
        stream.read_frame(expect_request=True)
        stream.send_frame(reply)
        unit = stream.read_fpdu()
        initiator()
    assert unit.crc_ok and unit.crc != 0


# Under MPA v1 (RFC 5044) there is no RTR, but the Linux stacks that frame MPA for
# peer-to-peer send one anyway; --stack must do what the stack does:
# - cxgb4: process_mpa_reply's and process_mpa_request's revision-1 branch take the
#   module's p2p_type with peer2peer (pre-RFC 6581 Chelsio peer-to-peer), and rdma_init
#   has the initiator's firmware send it (build_rtr_msg: 1 Read, 0 Write);
# - irdma: irdma_cm_event_connected posts send_rdma0_op's RTR at every revision
#   (SEND_RDMA_READ_ZERO by default), and irdma_accept waits for it;
# - siw: siw_proc_mpareply takes its RTR mode from the v2 block only: none under v1.
@pytest.mark.parametrize(("stack", "params", "expected"), [
    ("cxgb4", {"mpa_rev": 1}, "read"),
    ("cxgb4", {"mpa_rev": 1, "p2p_type": 0}, "write"),
    ("cxgb4", {"mpa_rev": 1, "peer2peer": 0}, None),
    ("irdma", {"mpa_rev": 1}, "read"),
    ("siw", {"mpa_version": 1, "peer_to_peer": 1}, None),
])
def test_a_stack_framed_v1_initiator_sends_the_stack_s_rtr(
        stack: str, params: dict[str, int], expected: str | None) -> None:
    from mpa_emu.live.peer_stacks import peer_stack

    preset = peer_stack(stack, params)
    assert preset.rev == 1
    options = peer.PeerOptions(rev=1, p2p=preset.p2p, crc=preset.crc, rtr=preset.rtr,
                               v1_rtr=preset.v1_rtr, timeout=3)
    with tcp_pair() as (client, server):
        responder = in_thread(peer.run_responder, server, peer.PeerOptions(
            v1_rtr_expected=expected is not None, timeout=3))
        report = peer.run_initiator(client, options)
        other = responder()
    assert report.error is None and report.received is not None
    assert report.received.rev == 1 and report.received.rtr is None
    assert report.rtr_sent == expected and other.rtr_received == expected


def test_cli_stack_cxgb4_v1_sends_the_p2p_type_rtr(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def serve() -> peer.PeerReport:
            conn, _ = listener.accept()
            with conn:
                return peer.run_responder(conn, peer.PeerOptions(v1_rtr_expected=True,
                                                                  timeout=3))
        responder = in_thread(serve)
        code = main(["peer", "--connect", f"127.0.0.1:{port}", "--stack", "cxgb4",
                     "--param", "mpa_rev=1", "--timeout", "3"])
        other = responder()
    out = capsys.readouterr().out
    assert code == 0
    assert "received MPA reply: rev 1" in out
    assert "sent FPDU: RTR read" in out and other.rtr_received == "read"


def test_an_irdma_framed_v1_responder_waits_for_the_rtr_a_cxgb4_framed_one_does_not() -> None:
    # irdma_accept waits for the RTS AE the first FPDU brings, at every revision; what a
    # cxgb4 responder's firmware does without the RTR is not in cm.c
    from mpa_emu.live.peer_stacks import peer_stack

    assert peer_stack("irdma", {"mpa_rev": 1}).v1_wait_rtr
    assert not peer_stack("cxgb4", {"mpa_rev": 1}).v1_wait_rtr
    assert not peer_stack("siw", {"mpa_version": 1}).v1_wait_rtr
    with tcp_pair() as (client, server):
        responder = in_thread(peer.run_responder, server, peer.PeerOptions(
            v1_rtr_expected=True, timeout=3))
        report = peer.run_initiator(client, peer.PeerOptions(rev=1, v1_rtr="read", timeout=3))
        other = responder()
    assert report.rtr_sent == "read" and other.rtr_received == "read" and other.error is None
