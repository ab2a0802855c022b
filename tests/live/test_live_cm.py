"""The emulated irdma CM against the real Linux TCP stack, through a TAP device.

The kernel's side is an MPA peer (mpa_emu.live.peer) on ordinary sockets inside the lab
namespace; the emulated host is the real CM core driven by the live driver.
"""

from __future__ import annotations

import socket
from errno import ECONNRESET

import pytest
from helpers.live_lab import (
    EMU_V4,
    EMU_V6,
    KERNEL_V4,
    KERNEL_V6,
    EmulatedHost,
    KernelThread,
    Lab,
    make_host,
    packed,
)
from mpa_emu.stacks.contract.events import IwEvent

from mpa_emu.live import peer
from mpa_emu.live.driver import RX, TX, Accept, DropMatching, Manual, Reject
from mpa_emu.live.netns import entered
from mpa_emu.wire import mpa
from mpa_emu.wire.segment import ACK, FIN, RST, SYN, Segment

pytestmark = pytest.mark.live

PORT = 4791


def _kernel_initiator(address: str, options: peer.PeerOptions) -> peer.PeerReport:
    with peer.open_connection(address, PORT, options.timeout) as sock:
        return peer.run_initiator(sock, options)


def _kernel_responder(listener: socket.socket, options: peer.PeerOptions,
                      then_wait_s: float = 0.0) -> tuple[peer.PeerReport, str]:
    with listener, peer.accept_one(listener, options.timeout) as conn:
        report = peer.run_responder(conn, options)
        ending = peer.MpaStream(conn, 1).wait_close(then_wait_s) if then_wait_s else "open"
        return report, ending


def _listen_in_kernel(lab: Lab, address: str, port: int = PORT) -> socket.socket:
    with entered(lab.ns.name):
        return peer.open_listener(port, address)


def _established(emu: EmulatedHost) -> bool:
    return bool(emu.host.events(IwEvent.ESTABLISHED))


@pytest.mark.parametrize(("emu_ip", "v6"), [(EMU_V4, False), (EMU_V6, True)])
def test_kernel_client_reads_the_v2_accept_with_the_listener_ird_ord(lab: Lab, emu_ip: str,
                                                                    v6: bool) -> None:
    emu = make_host(lab, v6=v6)
    emu.host.listen(PORT, policy=Accept(b"welcome"), ipv6=v6)
    client = lab.in_kernel(_kernel_initiator, emu_ip, peer.PeerOptions(
        ird=8, ord=4, private_data=b"hello", timeout=5))
    assert emu.host.run_until(lambda: not client.is_alive() and _established(emu), 8)
    report = client.result()
    assert report.error is None and report.accepted
    reply = report.received
    assert reply is not None and reply.rtr is not None
    assert (reply.rev, reply.flags) == (2, mpa.FLAG_CRC | mpa.FLAG_ENHANCED)
    # irdma_negotiate_mpa_v2_ird_ord (responder): ORD = min(max_hw_ord 255, peer IRD 8),
    # IRD stays max_hw_ird 127; the READ RTR is chosen (irdma_negotiate_mpa_v2_ird_ord).
    assert (reply.rtr.ird, reply.rtr.ord) == (127, 8)
    assert reply.rtr.peer_to_peer and reply.rtr.read0 and not reply.rtr.write0
    assert reply.private_data == b"welcome"
    (request,) = emu.host.events(IwEvent.CONNECT_REQUEST)
    assert request.private_data[:5] == b"hello"
    assert request.private_data_len == 5 + 4  # irdma_parse_mpa: the v2 +4 quirk


def test_kernel_client_reads_the_reject_frame_and_sees_the_fin(lab: Lab) -> None:
    emu = make_host(lab)
    emu.host.listen(PORT, policy=Reject(b"go away"))
    client = lab.in_kernel(_kernel_initiator, EMU_V4, peer.PeerOptions(timeout=5))
    assert emu.host.run_until(lambda: not client.is_alive(), 8)
    report = client.result()
    assert report.rejected and report.close == "fin"
    reply = report.received
    assert reply is not None
    assert reply.flags == mpa.FLAG_CRC | mpa.FLAG_REJECT | mpa.FLAG_ENHANCED
    assert reply.private_data == b"go away"
    # irdma_send_mpa_reject: the reject and the FIN travel in one ACK|FIN segment.
    rejects = [seg for _f, seg in emu.segments("tx") if seg.payload[:16] == mpa.KEY_REP]
    assert len(rejects) >= 1 and rejects[0].flags & (FIN | ACK) == FIN | ACK
    # The kernel socket closed: its FIN takes the node through TIME_WAIT to freed.
    assert emu.host.run_until(lambda: not emu.host.core.conns(), 3)


@pytest.mark.parametrize(("kernel_ip", "v6"), [(KERNEL_V4, False), (KERNEL_V6, True)])
def test_emulated_initiator_completes_the_exchange_with_a_kernel_listener(
        lab: Lab, kernel_ip: str, v6: bool) -> None:
    emu = make_host(lab, v6=v6)
    listener = _listen_in_kernel(lab, kernel_ip)
    server = lab.in_kernel(_kernel_responder, listener, peer.PeerOptions(
        ird=4, ord=2, private_data=b"welcome", timeout=5))
    conn = emu.host.connect(packed(kernel_ip), PORT, private_data=b"hello", ird=16, ord=16)
    assert emu.host.run_until(
        lambda: bool(emu.host.events(IwEvent.CONNECT_REPLY)) and not server.is_alive(), 8)
    report, _ending = server.result()
    (reply,) = emu.host.events(IwEvent.CONNECT_REPLY)
    assert (reply.conn, reply.status) == (conn, 0)
    assert reply.private_data[:7] == b"welcome"
    request = report.received
    assert request is not None and request.rtr is not None
    assert (request.rev, request.flags) == (2, mpa.FLAG_CRC | mpa.FLAG_ENHANCED)
    assert request.rtr.peer_to_peer and request.rtr.read0 and request.rtr.write0
    assert (request.rtr.ird, request.rtr.ord) == (16, 16)
    assert request.private_data == b"hello"
    assert report.rtr_received == "read"  # irdma_sc_send_rtt: zero-length READ


def test_emulated_initiator_to_a_closed_port_retries_v1_then_aborts(lab: Lab) -> None:
    emu = make_host(lab)
    conn = emu.host.connect(packed(KERNEL_V4), 4999)
    assert emu.host.run_until(lambda: bool(emu.host.events(IwEvent.CONNECT_REPLY)), 5)
    (reply,) = emu.host.events(IwEvent.CONNECT_REPLY)
    assert (reply.conn, reply.status) == (conn, -ECONNRESET)
    syns = [seg for _f, seg in emu.segments("tx") if seg.flags & SYN]
    resets = [seg for _f, seg in emu.segments("rx") if seg.flags & RST]
    # irdma_handle_rst_pkt: the kernel's RST to the rev 2 SYN makes one rev 1 retry on
    # the same 4-tuple; the second RST ends it with active_open_err (no RST from us).
    assert len(syns) == 2 and len(resets) == 2
    assert syns[0].sport == syns[1].sport
    # The retry SYN starts at loc_seq_num (ISN + 1); each kernel RST acks its SYN.
    assert syns[1].seq == (syns[0].seq + 1) % 2**32
    assert [r.ack for r in resets] == [(s.seq + 1) % 2**32 for s in syns]
    retry_comment = [f.comment for f, seg in emu.segments("tx") if seg.flags & SYN][1]
    assert "v1" in retry_comment
    assert not [seg for _f, seg in emu.segments("tx") if seg.flags & RST]


def _is_bare_syn(seg: Segment) -> bool:
    return seg.flags & (SYN | ACK) == SYN


def test_emulated_syns_lost_twice_are_resent_after_1_then_2_seconds(lab: Lab) -> None:
    drop = DropMatching(TX, _is_bare_syn, count=2)
    emu = make_host(lab, fault=drop)
    listener = _listen_in_kernel(lab, KERNEL_V4)
    server = lab.in_kernel(_kernel_responder, listener, peer.PeerOptions(timeout=7))
    emu.host.connect(packed(KERNEL_V4), PORT)
    assert emu.host.run_until(
        lambda: bool(emu.host.events(IwEvent.CONNECT_REPLY)) and not server.is_alive(), 9)
    report, _ending = server.result()
    assert report.accepted and len(drop.dropped) == 2
    (reply,) = emu.host.events(IwEvent.CONNECT_REPLY)
    assert reply.status == 0
    lost = [r.time_ns for r in emu.trace.of_kind("fault")]
    syns = [(f, seg) for f, seg in emu.segments("tx") if _is_bare_syn(seg)]
    # The same buffer each time (irdma resends the identical sqbuf); only the third
    # copy crosses the TAP and the kernel answers it.
    assert len(syns) == 1 and syns[0][1] == drop.dropped[0] == drop.dropped[1]
    delivered = syns[0][0].time_ns - emu.host.wall_origin_ns
    # irdma_cm_timer_tick: first resend IRDMA_RETRY_TIMEOUT (1 s) after the send, then
    # HZ << 1 = 2 s later (irdma_cm_timer_tick: resends at 1, 3, 7 ... s). Real time, so allow for
    # a loaded machine on the late side only.
    assert 0.95 <= (lost[1] - lost[0]) / 1e9 <= 1.5
    assert 1.95 <= (delivered - lost[1]) / 1e9 <= 2.5


def test_kernel_resend_of_the_mpa_request_fails_check_seq_and_is_not_indicated_twice(
        lab: Lab) -> None:
    def first_pure_ack(seg: Segment) -> bool:
        return seg.flags == ACK and not seg.payload

    drop = DropMatching(TX, first_pure_ack)
    emu = make_host(lab, fault=drop)
    emu.host.listen(PORT, policy=Manual())
    client = lab.in_kernel(_kernel_initiator, EMU_V4, peer.PeerOptions(timeout=6))

    def requests_seen() -> int:
        return sum(1 for _f, seg in emu.segments("rx") if seg.payload[:16] == mpa.KEY_REQ)

    assert emu.host.run_until(lambda: requests_seen() >= 2, 5), "the kernel never resent"
    (request,) = emu.host.events(IwEvent.CONNECT_REQUEST)
    # irdma_check_seq: the resent segment starts before rcv_nxt, so it is dropped.
    assert emu.dropped("check_seq")
    emu.host.accept(request.conn, b"late but fine")
    assert emu.host.run_until(lambda: not client.is_alive() and _established(emu), 8)
    report = client.result()
    assert report.accepted and report.received is not None
    assert report.received.private_data == b"late but fine"
    assert len(emu.host.events(IwEvent.CONNECT_REQUEST)) == 1


def _offloaded_to_kernel_responder(lab: Lab) -> tuple[EmulatedHost, KernelThread]:
    """The emulated host connected to a kernel responder (which then waits 6 s), past
    CONNECT_REPLY with the RTR and its ACK settled."""
    emu = make_host(lab)
    listener = _listen_in_kernel(lab, KERNEL_V4)
    server = lab.in_kernel(_kernel_responder, listener, peer.PeerOptions(timeout=5), 6.0)
    emu.host.connect(packed(KERNEL_V4), PORT)
    assert emu.host.run_until(lambda: bool(emu.host.events(IwEvent.CONNECT_REPLY)), 5)
    emu.host.run_for(0.2)
    return emu, server


def test_address_removal_resets_the_kernel_socket(lab: Lab) -> None:
    emu, server = _offloaded_to_kernel_responder(lab)
    emu.host.remove_address(packed(EMU_V4))
    assert emu.host.run_until(lambda: not server.is_alive(), 5)
    report, ending = server.result()
    assert report.accepted
    assert ending == "reset"  # the kernel socket sees ECONNRESET
    assert [seg for _f, seg in emu.segments("tx") if seg.flags & RST]


def test_shutdown_closes_an_offloaded_connection_with_a_fin(lab: Lab) -> None:
    emu, server = _offloaded_to_kernel_responder(lab)
    emu.host.shutdown(grace_s=2.0)
    report, ending = server.result()
    assert report.accepted
    assert ending == "fin"  # graceful disconnect: the QP sends FIN, not RST
    assert emu.capture.closed
    assert not [seg for _f, seg in emu.segments("tx") if seg.flags & RST]



def test_mpa_request_lost_on_receive_is_taken_from_the_kernel_resend_once(lab: Lab) -> None:
    def mpa_request(seg: Segment) -> bool:
        return seg.payload[:16] == mpa.KEY_REQ

    drop = DropMatching(RX, mpa_request)
    emu = make_host(lab, fault=drop)
    emu.host.listen(PORT, policy=Accept(b"second time lucky"))
    client = lab.in_kernel(_kernel_initiator, EMU_V4, peer.PeerOptions(timeout=6))
    assert emu.host.run_until(lambda: not client.is_alive() and _established(emu), 8)
    report = client.result()
    assert len(drop.dropped) == 1
    # The kernel resent the same bytes (its RTO, at least 200 ms); the CM, still in
    # ESTABLISHED with rcv_nxt at the request's first byte, took the resend as new.
    resent = [seg for _f, seg in emu.segments("rx") if mpa_request(seg)]
    assert len(resent) == 2 and resent[0].payload == resent[1].payload
    assert resent[0].seq == resent[1].seq
    assert len(emu.host.events(IwEvent.CONNECT_REQUEST)) == 1
    assert report.accepted and report.received is not None
    assert report.received.private_data == b"second time lucky"


def test_reply_without_p2p_makes_the_emulated_initiator_reset(lab: Lab) -> None:
    emu = make_host(lab)
    listener = _listen_in_kernel(lab, KERNEL_V4)
    server = lab.in_kernel(_kernel_responder, listener, peer.PeerOptions(p2p=False, timeout=5))
    conn = emu.host.connect(packed(KERNEL_V4), PORT)
    assert emu.host.run_until(
        lambda: bool(emu.host.events(IwEvent.CONNECT_REPLY)) and not server.is_alive(), 8)
    report, _ending = server.result()
    # irdma_negotiate_mpa_v2_ird_ord: no A bit is -EOPNOTSUPP, so irdma_parse_mpa fails in
    # MPAREQ_SENT: active_open_err with a RST and CONNECT_REPLY(-ECONNRESET).
    (reply,) = emu.host.events(IwEvent.CONNECT_REPLY)
    assert (reply.conn, reply.status) == (conn, -ECONNRESET)
    assert report.sent is not None and report.sent.rtr is not None
    assert not report.sent.rtr.peer_to_peer
    assert report.close == "reset"
    assert [seg for _f, seg in emu.segments("tx") if seg.flags & RST]
