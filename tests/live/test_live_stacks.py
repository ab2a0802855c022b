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
from mpa_emu.stacks.contract.events import IwEvent

from mpa_emu.live import peer
from mpa_emu.live.driver import Accept
from mpa_emu.live.netns import entered
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
