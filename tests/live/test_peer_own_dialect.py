"""``mpa-emu peer --stack erdma``: a peer that frames MPA in erdma's own dialect.

erdma_cm.c writes every request, reply and reject as ``struct mpa_rr`` (the 16-byte key,
the big-endian ``params.bits`` whose low byte is the revision, MPA_REVISION_EXT_1 = 129,
and whose high byte holds the M/C/R flags; the big-endian ``pd_len``), then the 8 bytes
of ``struct erdma_mpa_ext`` that PD_Length does not count (``__be32 cookie``, ``__be32
bits`` whose low nibble, MPA_EXT_FLAG_CC = cpu_to_be32(0xf), is the congestion control),
then the private data, in one kernel_sendmsg (erdma_send_mpareqrep). The expected bytes
below are written from that layout by hand, not with the project's codec.
"""

from __future__ import annotations

import dataclasses
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
from mpa_emu.live.peer_stacks import peer_stack
from mpa_emu.wire import mpa

KEY_REQ = b"MPA ID Req Frame"
KEY_REP = b"MPA ID Rep Frame"


def erdma_frame(key: bytes, flags: int, cookie: int, bits: int, pdata: bytes) -> bytes:
    """struct mpa_rr (flags in the high byte of params.bits, revision 129 in the low),
    struct erdma_mpa_ext, the private data."""
    return (key + struct.pack(">HH", flags << 8 | 129, len(pdata))
            + struct.pack(">II", cookie, bits) + pdata)


def erdma_options(*, cc: int = 0, cookie: int = 0, **kw: object) -> peer.PeerOptions:
    """The options ``--stack erdma --param cc=CC --cookie COOKIE`` gives."""
    f = peer_stack("erdma", {"cc": cc})
    assert f.ext is not None
    return peer.PeerOptions(rev=f.rev, p2p=f.p2p, crc=f.crc, rtr=f.rtr,
                            ext=dataclasses.replace(f.ext, cookie=cookie),
                            timeout=3, **kw)  # type: ignore[arg-type]


@contextmanager
def tcp_pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A connected loopback TCP pair (client, server side)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname(), timeout=5)
        server, _ = listener.accept()
    with client, server:
        yield client, server


def in_thread(fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    """Run ``fn(*args)`` in a thread; the returned function joins it and gives its value."""
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


def _read_all(sock: socket.socket) -> bytes:
    """Everything the other side sends until its FIN; then our own FIN."""
    sock.settimeout(3)
    chunks = []
    while chunk := sock.recv(4096):
        chunks.append(chunk)
    sock.shutdown(socket.SHUT_WR)
    return b"".join(chunks)


def test_the_framing_is_erdma_newconn_connected_s() -> None:
    f = peer_stack("erdma", {"cc": 3})
    # erdma_newconn_connected: bits 0 then MPA_REVISION_EXT_1: no C, no P2P block, no RTR
    assert (f.rev, f.crc, f.p2p, f.rtr, f.v1_rtr) == (129, False, False, "none", "none")
    assert f.ext is not None and f.ext.bits == 3  # __mpa_ext_set_cc(qp->attrs.cc)
    assert f.ext.reject_echoes_request and f.ext.takes_only_ext
    assert f.max_private_data == 256  # MPA_MAX_PRIVDATA
    assert peer_stack("siw").ext is None  # RFC 5044's layout


def test_request_bytes_follow_erdma_send_mpareqrep() -> None:
    request = peer.build_ext_request(erdma_options(cc=1, cookie=0x12345678,
                                                   private_data=b"hello"))
    assert request.to_bytes() == erdma_frame(KEY_REQ, 0, 0x12345678, 1, b"hello")
    assert request.to_bytes()[16:20] == bytes.fromhex("00810005")


def test_an_accepted_exchange_between_two_erdma_framed_peers() -> None:
    with tcp_pair() as (client, server):
        def serve() -> peer.PeerReport:
            with server:
                return peer.run_responder(server, erdma_options(
                    cc=2, cookie=0xCAFEF00D, private_data=b"welcome"))
        responder = in_thread(serve)
        report = peer.run_initiator(client, erdma_options(
            cc=1, cookie=0x01020304, private_data=b"hi", hold=0.3))
        other = responder()
    assert report.error is None and other.error is None
    assert report.accepted and other.accepted
    # erdma_accept: ext_data.bits cleared then the responder's own CC, its own cookie
    assert report.received_ext is not None
    assert (report.received_ext.cookie, report.received_ext.ext_bits) == (0xCAFEF00D, 2)
    assert report.received_ext.to_bytes() == erdma_frame(KEY_REP, 0, 0xCAFEF00D, 2,
                                                         b"welcome")
    assert other.received_ext is not None
    assert (other.received_ext.cookie, other.received_ext.cc) == (0x01020304, 1)
    assert other.received is not None and other.received.private_data == b"hi"
    # erdma has no RTR: neither side sends or waits for one
    assert report.rtr_sent is None and other.rtr_received is None
    assert report.close == "fin"
    as_json = report.to_dict()
    assert as_json["received"]["ext"] == {"cookie": 0xCAFEF00D, "bits": 2, "cc": 2,
                                          "cc_name": "HPCC-RTT"}
    assert any("erdma ext cookie 0xcafef00d cc HPCC-RTT" in line for line in report.lines)


def test_a_reject_echoes_the_request_s_extension_with_the_private_data() -> None:
    with tcp_pair() as (client, server):
        responder = in_thread(peer.run_responder, server, erdma_options(
            cc=0, cookie=0xAAAAAAAA, reject=True, private_data=b"no thanks"))
        client.sendall(erdma_frame(KEY_REQ, 0, 0x0BADCAFE, 4, b"hello"))
        wire = _read_all(client)
        report = responder()
    # erdma_reject: params.bits |= MPA_RR_FLAG_REJECT (0x20 of the flags byte); ext_data
    # is the request's, as erdma_recv_mpa_rr read it; then sock_release: a FIN
    assert wire == erdma_frame(KEY_REP, 0x20, 0x0BADCAFE, 4, b"no thanks")
    assert report.error is None and report.rejected


def test_a_request_with_crc_gets_erdma_proc_mpareq_s_reject() -> None:
    with tcp_pair() as (client, server):
        responder = in_thread(peer.run_responder, server, erdma_options(
            private_data=b"welcome"))
        client.sendall(erdma_frame(KEY_REQ, 0x40 | 0x80, 7, 1, b"x"))
        wire = _read_all(client)
        report = responder()
    # "does not support marker and crc": M and C cleared, R set, no private data, the
    # request's extension back
    assert wire == erdma_frame(KEY_REP, 0x20, 7, 1, b"")
    assert report.rejected


def test_an_rfc_request_is_refused_with_nothing_sent() -> None:
    with tcp_pair() as (client, server):
        def serve() -> peer.PeerReport:
            with server:
                return peer.run_responder(server, erdma_options())
        responder = in_thread(serve)
        client.sendall(peer.build_request(peer.PeerOptions(private_data=b"x")).to_bytes())
        wire = _read_all(client)
        report = responder()
    # erdma_recv_mpa_rr: a revision other than MPA_REVISION_EXT_1 is -EPROTO, no frame
    assert wire == b""
    assert report.error is not None and "-EPROTO" in report.error
    assert report.received is not None and report.received.rev == 2


def test_an_rfc_framed_peer_reads_an_erdma_frame_whole() -> None:
    # The extension is not taken for private data, whatever the reader's own framing.
    with tcp_pair() as (client, server):
        client.sendall(erdma_frame(KEY_REQ, 0, 9, 1, b"pd") + b"next")
        frame, ext = peer.MpaStream(server, 3).read_any_frame(expect_request=True)
        assert server.recv(4) == b"next"
    assert (frame.rev, frame.private_data, frame.rtr) == (129, b"pd", None)
    assert ext is not None and (ext.cookie, ext.cc) == (9, 1)


def test_cli_stack_erdma_frames_the_request_with_cookie_and_cc(
        capsys: pytest.CaptureFixture[str]) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def answer() -> bytes:
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(3)
                got = conn.recv(4096)
                conn.sendall(erdma_frame(KEY_REP, 0, 0x55, 0, b"ok"))
            return got
        server = in_thread(answer)
        code = main(["peer", "--connect", f"127.0.0.1:{port}", "--stack", "erdma",
                     "--param", "cc=1", "--cookie", "0x1234", "--private-data", "hi",
                     "--timeout", "2", "--json"])
        got = server()
    assert code == 0
    assert got == erdma_frame(KEY_REQ, 0, 0x1234, 1, b"hi")
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["accepted"] and out["sent"]["ext"]["cookie"] == 0x1234
    assert out["received"]["ext"]["cookie"] == 0x55 and out["received"]["rev"] == 129
    assert out["rtr_sent"] is None


def test_cli_cookie_needs_a_stack_with_an_extension(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["peer", "--connect", "127.0.0.1:9", "--stack", "siw", "--cookie", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--cookie" in err


def test_cli_stack_erdma_caps_private_data_at_mpa_max_privdata(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["peer", "--connect", "127.0.0.1:9", "--stack", "erdma",
                 "--private-data-hex", "00" * 257]) == 2
    assert "erdma sends at most 256" in capsys.readouterr().err


def test_cli_mpa_rev_2_with_stack_erdma_frames_rfc_5044() -> None:
    import argparse

    from mpa_emu.cli import peer as cli_peer

    parser = argparse.ArgumentParser()
    cli_peer.add_arguments(parser)
    options = cli_peer._options(parser.parse_args(
        ["--connect", "127.0.0.1:9", "--stack", "erdma", "--mpa-rev", "2"]))
    assert options.ext is None and options.rev == 2
    frame = peer.build_request(options)
    assert frame.to_bytes()[17] == 2 and frame.flags & mpa.FLAG_ENHANCED


def test_peer_still_frames_the_rfc_stacks(capsys: pytest.CaptureFixture[str]) -> None:
    # siw's framing is RFC 6581's: the options are accepted, and the connection to a
    # port nothing listens on is the peer's own error (exit 1), not a refused --stack.
    assert main(["peer", "--connect", "127.0.0.1:9", "--stack", "siw",
                 "--timeout", "1"]) != 2
    assert "--stack" not in capsys.readouterr().err
