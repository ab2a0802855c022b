"""erdma's connection manager against itself and against a raw TCP peer whose bytes the
test writes: the upcalls and their statuses, the timers, the refusals, the teardown, each
as erdma_cm.c decides it (the function is named at each expectation)."""

from __future__ import annotations

import errno

import pytest
from helpers.cxgb4_lab import (
    IP_RAW,
    PORT,
    RawPeer,
    make_net,
    mpa_frame,
    raw_close,
    raw_reset,
    raw_send,
)

from mpa_emu.net.host import Host
from mpa_emu.net.network import Network
from mpa_emu.net.policy import Accept, Manual, Reject
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.ulp.rdma_cm import RdmaCmEventType as Ev
from mpa_emu.wire import erdma_mpa
from mpa_emu.wire.mpa import KEY_REP, KEY_REQ
from mpa_emu.wire.segment import FIN, RST, SYN

S = 1_000_000_000
MS = 1_000_000


def upcalls(host: Host) -> list[tuple[IwEvent, int]]:
    return [(u.event, u.status) for u in host.upcalls]


def sent_flags(net: Network, sender: str, since: int = 0) -> int:
    out = 0
    for f in net.frames[since:]:
        if f.sender == sender and f.segment is not None:
            out |= f.segment.flags
    return out


def peer(host: Host) -> RawPeer:
    core = host.core
    assert isinstance(core, RawPeer)
    return core


def pair() -> tuple[Network, Host, Host]:
    net = Network(seed=4)
    return net, net.add_host("a", "192.0.2.1", stack="erdma"), \
        net.add_host("b", "192.0.2.2", stack="erdma")


# ---- erdma with erdma ---------------------------------------------------------------

def test_connect_and_accept_upcalls_carry_fixed_ird_ord() -> None:
    net, a, b = pair()
    b.listen(31000, policy=Accept(private_data=b"welcome"))
    conn = a.connect(b, 31000, private_data=b"hello", ird=4, ord=2)
    net.run_for(S)
    assert upcalls(a) == [(IwEvent.CONNECT_REPLY, 0)]
    assert upcalls(b) == [(IwEvent.CONNECT_REQUEST, 0), (IwEvent.ESTABLISHED, 0)]
    req, est = b.upcalls
    # erdma_cm_upcall: CONNECT_REQUEST reports dev->attrs.max_ird / max_ord (128, 128),
    # whatever the initiator asked (the frame carries no IRD/ORD); every other event has
    # them zeroed (memset).
    assert (req.ird, req.ord) == (128, 128)
    assert (req.private_data, req.private_data_len) == (b"hello", 5)
    assert (est.ird, est.ord) == (0, 0)
    rep = a.upcalls[0]
    assert (rep.ird, rep.ord) == (0, 0)
    assert (rep.private_data, rep.private_data_len) == (b"welcome", 7)
    # The QP keeps what erdma_connect was given (cep->ird, cep->ord).
    view = a.node(conn)
    assert (view.state.name, view.ird, view.ord) == ("RDMA_MODE", 4, 2)
    assert a.qp_state(conn).iwarp_state == "RTS"
    assert [e.event for e in a.cm_events] == [Ev.ESTABLISHED]


def test_reject_gives_econnreset_with_the_reject_private_data() -> None:
    net, a, b = pair()
    listener = b.listen(31000, policy=Reject(private_data=b"go away"))
    a.connect(b, 31000, private_data=b"hi")
    net.run()
    # erdma_proc_mpareply: MPA_RR_FLAG_REJECT -> CONNECT_REPLY -ECONNRESET, with the
    # reject's PD_Length and private data (erdma_cm_upcall).
    assert upcalls(a) == [(IwEvent.CONNECT_REPLY, -errno.ECONNRESET)]
    assert (a.upcalls[0].private_data, a.upcalls[0].private_data_len) == (b"go away", 7)
    assert [(e.event, e.status) for e in a.cm_events] == [(Ev.REJECTED, -errno.ECONNRESET)]
    assert upcalls(b) == [(IwEvent.CONNECT_REQUEST, 0)]
    assert a.conns() == [] and b.conns() == []
    assert b.listener(listener) is not None


def test_graceful_and_abortive_close() -> None:
    for graceful in (True, False):
        net, a, b = pair()
        b.listen(31000, policy=Accept())
        conn = a.connect(b, 31000)
        net.run_for(S)
        before = len(net.frames)
        a.disconnect(conn, graceful=graceful)
        net.run()
        # erdma_modify_qp_state_iwarp (RTS -> CLOSING or ERROR) -> erdma_qp_cm_drop:
        # CLOSE 0, the socket released (a FIN). The peer's socket sees TCP_CLOSE_WAIT:
        # ERDMA_CM_WORK_PEER_CLOSE in RDMA_MODE gives DISCONNECT then CLOSE.
        assert upcalls(a)[-1] == (IwEvent.CLOSE, 0)
        assert upcalls(b)[-2:] == [(IwEvent.DISCONNECT, 0), (IwEvent.CLOSE, 0)]
        assert sent_flags(net, "a", before) & FIN and not sent_flags(net, "a", before) & RST
        assert a.conns() == [] and b.conns() == []


def test_abort_sends_rst_parameter() -> None:
    net = Network(seed=4)
    a = net.add_host("a", "192.0.2.1", stack="erdma", params={"abort_sends_rst": True})
    b = net.add_host("b", "192.0.2.2", stack="erdma")
    b.listen(31000, policy=Accept())
    conn = a.connect(b, 31000)
    net.run_for(S)
    before = len(net.frames)
    a.disconnect(conn, graceful=False)
    net.run()
    assert sent_flags(net, "a", before) & RST
    assert upcalls(a)[-1] == (IwEvent.CLOSE, 0)
    # a RST: TCP_CLOSE on the peer's socket, the same PEER_CLOSE work
    assert upcalls(b)[-2:] == [(IwEvent.DISCONNECT, 0), (IwEvent.CLOSE, 0)]


def test_verb_errors() -> None:
    _net, a, b = pair()
    # erdma_connect: pd_len > MPA_MAX_PRIVDATA, ird/ord over the device's: -EINVAL
    with pytest.raises(CmError) as exc:
        a.core.connect(a.address(), b.address(), 31000, private_data=b"x" * 257, now_ns=0)
    assert exc.value.errno == errno.EINVAL
    with pytest.raises(CmError) as exc:
        a.core.connect(a.address(), b.address(), 31000, ird=129, now_ns=0)
    assert exc.value.errno == errno.EINVAL
    # erdma_create_listen: AF_INET only
    with pytest.raises(CmError) as exc:
        b.core.create_listen(None, 31000, ipv6=True)
    assert exc.value.errno == errno.EAFNOSUPPORT
    assert a.conns() == []


def test_accept_over_the_device_limits_closes_without_an_upcall() -> None:
    net, a, b = pair()
    b.listen(31000, policy=Manual())
    a.connect(b, 31000)
    net.run_for(S)
    (req,) = b.events(IwEvent.CONNECT_REQUEST)
    # erdma_accept: params->ord > max_ord -> -EINVAL, the error path releases the socket
    with pytest.raises(CmError) as exc:
        b.core.accept(req.conn, ord=129, now_ns=net.now_ns)
    assert exc.value.errno == errno.EINVAL
    net.run()
    assert upcalls(b) == [(IwEvent.CONNECT_REQUEST, 0)]
    # the initiator hears the FIN while awaiting the reply: PEER_CLOSE -> -ECONNRESET
    assert upcalls(a) == [(IwEvent.CONNECT_REPLY, -errno.ECONNRESET)]


# ---- erdma initiator and a raw peer -------------------------------------------------

def to_raw(*, seed: int = 7) -> tuple[Network, Host, Host, int]:
    net = make_net(seed)
    a = net.add_host("a", "192.0.2.1", stack="erdma")
    raw = net.add_host("raw", IP_RAW)
    raw.listen(PORT)
    conn = a.connect(IP_RAW, PORT, private_data=b"hello")
    net.run_for(10 * MS)
    return net, a, raw, conn


def raw_sock(raw: Host) -> int:
    (sock,) = peer(raw).socks("accepted")
    return sock


def test_initiator_times_out_after_mparep_timeout() -> None:
    net, a, _raw, conn = to_raw()
    (sent,) = [f for f in net.frames if f.sender == "a" and f.segment.payload]
    # erdma_cm_queue_work: in AWAIT_MPAREP the delay is MPAREP_TIMEOUT (HZ * 10)
    assert a.node(conn).mpa_timer_ns == sent.time_ns + 10 * S
    net.run(until_ns=sent.time_ns + 10 * S - MS)
    assert a.upcalls == []
    net.run(until_ns=sent.time_ns + 10 * S + MS)
    # ERDMA_CM_WORK_MPATIMEOUT in AWAIT_MPAREP: pd_len hidden, CONNECT_REPLY -ETIMEDOUT
    assert upcalls(a) == [(IwEvent.CONNECT_REPLY, -errno.ETIMEDOUT)]
    assert a.upcalls[0].private_data_len == 0
    assert [e.event for e in a.cm_events] == [Ev.UNREACHABLE]


def test_peer_rst_while_awaiting_the_reply() -> None:
    net, a, raw, _conn = to_raw()
    raw_reset(net, raw, raw_sock(raw))
    net.run_for(S)
    # ERDMA_CM_WORK_PEER_CLOSE in AWAIT_MPAREP: "MPA reply not received, but connection
    # drop" -> CONNECT_REPLY -ECONNRESET; no second attempt at another revision
    assert upcalls(a) == [(IwEvent.CONNECT_REPLY, -errno.ECONNRESET)]
    assert sum(1 for f in net.frames if f.sender == "a" and f.segment.flags & SYN) == 1


def test_connect_refused_is_an_upcall_not_a_verb_error() -> None:
    net = make_net()
    a = net.add_host("a", "192.0.2.1", stack="erdma")
    net.add_host("raw", IP_RAW)  # no listener: the SYN gets a RST
    a.connect(IP_RAW, PORT)
    net.run_for(S)
    # kernel_bindconnect is non-blocking (-EINPROGRESS); the RST moves the socket to
    # TCP_CLOSE: ERDMA_CM_WORK_PEER_CLOSE in CONNECTING -> CONNECT_REPLY -ECONNRESET
    assert upcalls(a) == [(IwEvent.CONNECT_REPLY, -errno.ECONNRESET)]
    assert a.conns() == []


def test_connect_timeout_after_ten_seconds() -> None:
    net = make_net()
    a = net.add_host("a", "192.0.2.1", stack="erdma")
    raw = net.add_host("raw", IP_RAW)
    raw.listen(PORT)
    net.drop("SYN-ACK", count=20)  # no SYN-ACK arrives
    a.connect(IP_RAW, PORT)
    net.run(until_ns=10 * S - MS)
    assert a.upcalls == []
    net.run(until_ns=10 * S + MS)
    # ERDMA_CM_WORK_CONNECTTIMEOUT (CONNECT_TIMEOUT, HZ * 10) in CONNECTING
    assert upcalls(a) == [(IwEvent.CONNECT_REPLY, -errno.ETIMEDOUT)]


@pytest.mark.parametrize(("flags", "rev", "status"), [
    (0x00, 1, -errno.EINVAL),  # an RFC 5044 reply: erdma_recv_mpa_rr -EPROTO -> out_err
    (0x20, 2, -errno.EINVAL),  # an RFC 6581 reject is no reject to erdma: revision first
    (0x40, 129, -errno.ECONNREFUSED),  # C: "does not support marker and crc"
    (0x80, 129, -errno.ECONNREFUSED),  # M
    (0x20, 129, -errno.ECONNRESET),  # erdma's own reject
    (0x00, 129, 0),
])
def test_what_the_initiator_makes_of_a_reply(flags: int, rev: int, status: int) -> None:
    net, a, raw, conn = to_raw()
    body = bytes(8) + b"pd" if rev == 129 else b"pd"
    raw_send(net, raw, raw_sock(raw), mpa_frame(KEY_REP, flags, rev, body, pd_length=2))
    net.run_for(S)
    assert upcalls(a) == [(IwEvent.CONNECT_REPLY, status)]
    if status:
        assert a.conns() == []
    else:
        assert a.node(conn).state.name == "RDMA_MODE"


def test_a_reply_split_over_segments_is_reassembled() -> None:
    net, a, raw, conn = to_raw()
    frame = erdma_mpa.build(request=False, cookie=7, cc=0, private_data=b"welcome")
    sock = raw_sock(raw)
    for cut in (0, 10, 24, 31):  # inside the header, the extension, the private data
        raw_send(net, raw, sock, frame[cut:{0: 10, 10: 24, 24: 31, 31: len(frame)}[cut]])
        net.run_for(MS)
    # erdma_recv_mpa_rr keeps bytes_rcvd across calls
    assert upcalls(a) == [(IwEvent.CONNECT_REPLY, 0)]
    assert a.upcalls[0].private_data == b"welcome"
    assert a.node(conn).peer_cookie == 7


def test_four_bytes_past_the_reply_are_a_protocol_error() -> None:
    net, a, raw, _conn = to_raw()
    frame = erdma_mpa.build(request=False, cookie=7, cc=0) + b"FPDU"
    raw_send(net, raw, raw_sock(raw), frame)
    net.run_for(S)
    # erdma_recv_mpa_rr: the 4-byte "peer protocol violation" read succeeds -> -EPROTO
    assert upcalls(a) == [(IwEvent.CONNECT_REPLY, -errno.EINVAL)]


def test_one_to_three_bytes_past_the_reply_stall_it() -> None:
    net, a, raw, _conn = to_raw()
    frame = erdma_mpa.build(request=False, cookie=7, cc=0) + b"xy"
    raw_send(net, raw, raw_sock(raw), frame)
    net.run_for(S)
    # the 4-byte read comes back short: __recv_mpa_hdr -EAGAIN with rcvd 2, which
    # erdma_recv_mpa_rr returns as is; the two bytes are gone and the reply waits
    assert a.upcalls == []
    assert net.trace is not None
    assert any(r.kind == "kernel_quirk" and r.fn == "erdma_recv_mpa_rr"
               for r in net.trace.records)
    net.run(until_ns=20 * S)
    assert upcalls(a) == [(IwEvent.CONNECT_REPLY, -errno.ETIMEDOUT)]


# ---- erdma responder and a raw peer -------------------------------------------------

def from_raw(*, seed: int = 7) -> tuple[Network, Host, Host, int]:
    net = make_net(seed)
    b = net.add_host("b", "192.0.2.2", stack="erdma")
    raw = net.add_host("raw", IP_RAW)
    b.listen(PORT, policy=Manual())
    sock = raw.connect(b, PORT)
    net.run_for(10 * MS)
    return net, b, raw, sock


def test_responder_waits_mpareq_timeout_for_the_request() -> None:
    net, b, _raw, _sock = from_raw()
    (conn,) = b.conns()
    accepted = max(f.time_ns for f in net.frames if f.sender == "raw")  # the last ACK
    deadline = b.node(conn).mpa_timer_ns
    # erdma_accept_newconn queues MPATIMEOUT in AWAIT_MPAREQ: MPAREQ_TIMEOUT (HZ * 20)
    assert 20 * S < deadline - accepted < 20 * S + MS  # after the ACK's wire delay
    before = len(net.frames)
    net.run(until_ns=deadline - MS)
    assert b.conns() == [conn]
    net.run(until_ns=deadline + MS)
    # ERDMA_CM_WORK_MPATIMEOUT in AWAIT_MPAREQ: released, a FIN, no upcall
    assert b.conns() == [] and b.upcalls == []
    assert sent_flags(net, "b", before) & FIN


@pytest.mark.parametrize(("frame", "rst"), [
    (mpa_frame(KEY_REQ, 0x00, 1, b""), False),  # RFC 5044, no private data: nothing unread
    (mpa_frame(KEY_REQ, 0x10, 2, bytes(4) + b"hello"), True),  # RFC 6581: 9 bytes unread
    (mpa_frame(KEY_REQ, 0x00, 129, b"\0" * 8, pd_length=300), True),  # over 256
    (mpa_frame(KEY_REP, 0x00, 129, b"\0" * 8, pd_length=0), False),  # reply key
])
def test_requests_erdma_refuses_silently(frame: bytes, rst: bool) -> None:
    net, b, raw, sock = from_raw()
    before = len(net.frames)
    raw_send(net, raw, sock, frame)
    net.run_for(S)
    # erdma_recv_mpa_rr (revision, PD_Length) or erdma_proc_mpareq (key): -EPROTO, no
    # frame back, release_cep; sock_release sends a RST when bytes stay unread
    assert b.upcalls == [] and b.conns() == []
    assert not [p for p in (f.segment.payload for f in net.frames[before:]
                            if f.sender == "b") if p]
    flags = sent_flags(net, "b", before)
    assert bool(flags & RST) == rst and bool(flags & FIN) == (not rst)


@pytest.mark.parametrize("bit", [0x40, 0x80])
def test_a_request_with_crc_or_markers_gets_the_reject_frame(bit: int) -> None:
    net, b, raw, sock = from_raw()
    request = erdma_mpa.build(request=True, flags=bit, cookie=0xC0FFEE, cc=3,
                              private_data=b"hi")
    raw_send(net, raw, sock, request)
    net.run_for(S)
    # erdma_proc_mpareq reject_conn: M and C cleared, R set, pdata freed, the request's
    # extension echoed, PD_Length 0; -EOPNOTSUPP, no upcall
    got = peer(raw).received[sock]
    assert got == KEY_REP + bytes((0x20, 129, 0, 0)) + (0xC0FFEE).to_bytes(4, "big") \
        + (3).to_bytes(4, "big")
    assert b.upcalls == [] and b.conns() == []


def test_accept_and_reject_need_a_delivered_request() -> None:
    net, b, _raw, _sock = from_raw()
    (conn,) = b.conns()
    with pytest.raises(CmError) as exc:
        b.core.accept(conn, now_ns=net.now_ns)
    assert exc.value.errno == errno.EINVAL
    assert b.node(conn).state.name == "AWAIT_MPAREQ"


def test_peer_fin_before_the_request_releases_the_endpoint() -> None:
    net, b, raw, sock = from_raw()
    raw_close(net, raw, sock)
    net.run_for(S)
    # ERDMA_CM_WORK_PEER_CLOSE in AWAIT_MPAREQ: "Socket close before MPA request
    # received." -> released, no upcall
    assert b.conns() == [] and b.upcalls == []


def test_the_reply_echoes_the_request_flags_byte() -> None:
    net, b, raw, sock = from_raw()
    request = erdma_mpa.build(request=True, flags=0x01, cookie=5, cc=0, private_data=b"r")
    raw_send(net, raw, sock, request)
    net.run_for(MS)
    (req,) = b.events(IwEvent.CONNECT_REQUEST)
    b.accept(req.conn, b"ok")
    net.run_for(MS)
    # erdma_proc_mpareq turns the request's own header into the reply (only the key is
    # rewritten), so a reserved bit comes back; erdma_accept rewrites the extension
    reply = peer(raw).received[sock]
    assert reply[:20] == KEY_REP + bytes((0x01, 129, 0, 2))
    assert erdma_mpa.parse(reply).private_data == b"ok"
    assert erdma_mpa.parse(reply).cookie != 5


def test_peer_close_after_the_request_leaves_the_verbs_nothing() -> None:
    net, b, raw, sock = from_raw()
    raw_send(net, raw, sock, erdma_mpa.build(request=True, cookie=5, cc=0))
    net.run_for(MS)
    (req,) = b.events(IwEvent.CONNECT_REQUEST)
    raw_close(net, raw, sock)
    net.run_for(MS)
    # ERDMA_CM_WORK_PEER_CLOSE in RECVD_MPAREQ: no cm_id yet, release_cep closes the
    # endpoint; iw_cm still holds it, and erdma_accept finds it out of RECVD_MPAREQ
    assert b.node(req.conn).state.name == "CLOSED"
    with pytest.raises(CmError) as exc:
        b.core.accept(req.conn, now_ns=net.now_ns)
    assert exc.value.errno == errno.ECONNRESET
    assert b.conns() == [] and upcalls(b) == [(IwEvent.CONNECT_REQUEST, 0)]
