"""Each emulated stack against the real Linux TCP stack through a TAP device: a kernel
socket peer (mpa_emu.live.peer) meets siw and cxgb4 as it meets irdma. What each side
must see is read from the stacks' kernel sources, named at each assertion."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.live_lab import EMU_V4, KERNEL_V4, EmulatedHost, Lab, make_host, packed

from mpa_emu.live import peer
from mpa_emu.live.driver import Accept
from mpa_emu.live.netns import entered
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.wire import mpa

pytestmark = pytest.mark.live

PORT = 4792


def _kernel_initiator(address: str, options: peer.PeerOptions) -> peer.PeerReport:
    with peer.open_connection(address, PORT, options.timeout) as sock:
        return peer.run_initiator(sock, options)


def _kernel_responder(listener: socket.socket, options: peer.PeerOptions) -> peer.PeerReport:
    with listener, peer.accept_one(listener, options.timeout) as conn:
        return peer.run_responder(conn, options)


def _established(emu: EmulatedHost) -> bool:
    return bool(emu.host.events(IwEvent.ESTABLISHED))


def test_kernel_client_meets_an_emulated_siw_listener(lab: Lab) -> None:
    emu = make_host(lab, stack="siw")
    emu.host.listen(PORT, policy=Accept(b"welcome"))
    client = lab.in_kernel(_kernel_initiator, EMU_V4, peer.PeerOptions(
        ird=8, ord=4, private_data=b"hello", crc=False, timeout=5))
    assert emu.host.run_until(lambda: not client.is_alive() and _established(emu), 8)
    report = client.result()
    assert report.error is None and report.accepted
    reply = report.received
    assert reply is not None and reply.rtr is not None
    # siw_send_mpareqrep answers with the request's own header bits (rev 2, S; no C
    # since the request had none), the key changed to the reply's.
    assert (reply.rev, reply.flags) == (2, mpa.FLAG_ENHANCED)
    # siw_proc_mpareq: P2P in the request is echoed and the Write RTR picked when offered;
    # the responder's ORD is the request's IRD and its IRD the request's ORD.
    assert reply.rtr.peer_to_peer and reply.rtr.write0 and not reply.rtr.read0
    assert (reply.rtr.ird, reply.rtr.ord) == (4, 8)
    assert reply.private_data == b"welcome"
    (request,) = emu.host.events(IwEvent.CONNECT_REQUEST)
    # siw_cm_upcall: the private data after the RFC 6581 block, without it.
    assert request.private_data == b"hello"


def test_emulated_siw_initiator_with_p2p_completes_with_a_kernel_listener(lab: Lab) -> None:
    emu = make_host(lab, stack="siw", params={"peer_to_peer": True})
    with entered(lab.ns.name):
        listener = peer.open_listener(PORT, KERNEL_V4)
    server = lab.in_kernel(_kernel_responder, listener, peer.PeerOptions(
        ird=4, ord=2, private_data=b"welcome", crc=False, timeout=5))
    conn = emu.host.connect(packed(KERNEL_V4), PORT, private_data=b"hello", ird=16, ord=16)
    assert emu.host.run_until(
        lambda: bool(emu.host.events(IwEvent.CONNECT_REPLY)) and not server.is_alive(), 8)
    report = server.result()
    (reply,) = emu.host.events(IwEvent.CONNECT_REPLY)
    # siw_proc_mpareply -> siw_qp_mpa_rts sends the RTR, then CONNECT_REPLY(0).
    assert (reply.conn, reply.status) == (conn, 0)
    request = report.received
    assert request is not None and request.rtr is not None
    # siw_connect: rev mpa_version 2 with S; no C (mpa_crc_required off); with
    # peer_to_peer, P2P and both RTRs (rtr_type's default, Write and Read).
    assert (request.rev, request.flags) == (2, mpa.FLAG_ENHANCED)
    assert request.rtr.peer_to_peer and request.rtr.read0 and request.rtr.write0
    assert request.private_data == b"hello"
    # The kernel peer picks Read when both are offered; siw then sends a zero-length
    # RDMA Read Request as its RTR (siw_qp_mpa_rts).
    assert report.rtr_received == "read"


def test_live_cli_refuses_an_unknown_stack_parameter_in_one_line() -> None:
    proc = subprocess.run([sys.executable, "-m", "mpa_emu", "live", "--tap", "mpaemu-x",
                           "--address", "192.0.2.1", "--stack", "siw", "--param",
                           "peer2peer=1"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "siw: unknown parameter 'peer2peer'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_live_cli_keeps_irdma_options_to_irdma(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "mpa_emu", "live", "--tap", "mpaemu-x",
                           "--address", "192.0.2.1", "--stack", "siw", "--retrans", "3"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "--retrans" in proc.stderr and "--param" in proc.stderr


def _options_of(stack: str) -> peer.PeerOptions:
    from mpa_emu.live.peer_stacks import peer_stack

    preset = peer_stack(stack)
    return peer.PeerOptions(rev=preset.rev, p2p=preset.p2p, crc=preset.crc, rtr=preset.rtr,
                            timeout=5)


def test_a_cxgb4_framed_kernel_peer_meets_an_emulated_cxgb4_listener(lab: Lab) -> None:
    emu = make_host(lab, stack="cxgb4")
    emu.host.listen(PORT, policy=Accept(b"welcome"))
    client = lab.in_kernel(_kernel_initiator, EMU_V4, _options_of("cxgb4"))
    assert emu.host.run_until(lambda: not client.is_alive() and _established(emu), 8)
    report = client.result()
    assert report.error is None and report.accepted
    reply = report.received
    assert reply is not None and reply.rtr is not None
    # send_mpa_reply: C from the request or crc_enabled (process_mpa_request), rev 2
    # with the enhanced bit; P2P and the RTR of the responder's own p2p_type (1: Read).
    assert (reply.rev, reply.flags) == (2, mpa.FLAG_CRC | mpa.FLAG_ENHANCED)
    assert reply.rtr.peer_to_peer and reply.rtr.read0 and not reply.rtr.write0
    assert report.rtr_sent == "read"


def _erdma_options(**kw: object) -> peer.PeerOptions:
    """What ``mpa-emu peer --stack erdma`` frames with (mpa_emu.cli.peer._options)."""
    from mpa_emu.live.peer_stacks import peer_stack

    f = peer_stack("erdma")
    return peer.PeerOptions(rev=f.rev, p2p=f.p2p, crc=f.crc, rtr=f.rtr, ext=f.ext,
                            timeout=5, **kw)  # type: ignore[arg-type]


def test_an_erdma_framed_kernel_peer_meets_an_emulated_erdma_listener(lab: Lab) -> None:
    emu = make_host(lab, stack="erdma", params={"cc": 2})
    emu.host.listen(PORT, policy=Accept(b"welcome"))
    client = lab.in_kernel(_kernel_initiator, EMU_V4, _erdma_options(
        private_data=b"hello", hold=0.3))
    assert emu.host.run_until(lambda: not client.is_alive() and _established(emu), 8)
    report = client.result()
    assert report.error is None and report.accepted
    reply, ext = report.received, report.received_ext
    assert reply is not None and ext is not None
    # erdma_accept: the request's params.bits (rev 129, no flag) under the reply key,
    # ext_data.bits cleared then the QP's CC, the private data after the 8-byte
    # extension; no RTR. The peer's CC (0, NewReno) is not the device's (2): the QP was
    # moved to RTS with COMPROMISE_CC (Cubic, 1) first, and that is what the reply names.
    assert (reply.rev, reply.flags, reply.rtr) == (129, 0, None)
    assert ext.cc == 1 and reply.private_data == b"welcome"
    assert report.rtr_sent is None
    (request,) = emu.host.events(IwEvent.CONNECT_REQUEST)
    # erdma_cm_upcall: PD_Length bytes of mpa.pdata, the extension not among them
    assert request.private_data == b"hello"


def test_an_emulated_erdma_initiator_is_rejected_by_an_erdma_framed_kernel_peer(
        lab: Lab) -> None:
    emu = make_host(lab, stack="erdma", params={"cc": 1})
    with entered(lab.ns.name):
        listener = peer.open_listener(PORT, KERNEL_V4)
    server = lab.in_kernel(_kernel_responder, listener, _erdma_options(
        reject=True, private_data=b"busy"))
    conn = emu.host.connect(packed(KERNEL_V4), PORT, private_data=b"hello", ird=8, ord=8)
    assert emu.host.run_until(
        lambda: bool(emu.host.events(IwEvent.CONNECT_REPLY)) and not server.is_alive(), 8)
    report = server.result()
    request, ext = report.received, report.received_ext
    # erdma_newconn_connected: bits 0 with MPA_REVISION_EXT_1, the QP's CC (cc 1)
    assert request is not None and ext is not None
    assert (request.rev, request.flags, request.private_data) == (129, 0, b"hello")
    assert ext.cc == 1
    # the peer's reject echoes that extension (erdma_reject); erdma_proc_mpareply:
    # MPA_RR_FLAG_REJECT is CONNECT_REPLY(-ECONNRESET), with the reject's private data
    (reply,) = emu.host.events(IwEvent.CONNECT_REPLY)
    assert (reply.conn, reply.status) == (conn, -104)
    assert reply.private_data == b"busy"
    assert report.sent_ext is not None and report.sent_ext.cookie == ext.cookie
