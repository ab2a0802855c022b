"""The contract every registered stack keeps, run over every stack in ``STACKS``: a new
stack gets these tests by registering.

Six lives of a connection between two hosts of one stack (or one host and a raw TCP
peer that never speaks MPA): connect and accept, reject with private data, a peer RST
while the MPA reply is awaited, the MPA timeout, graceful and abortive close. Each checks
the upcalls (iw_cm's provider interface), the rdma_cm events the application sees
(mpa_emu.ulp) and the views. Where stacks legitimately differ the expectation is the
stack's own fact in the registry (``statuses``, ``lifecycle``), each fact citing the
kernel function that decides it; what every stack shares is cited here.
"""

from __future__ import annotations

import errno
from typing import Any

import pytest
from helpers.cxgb4_lab import IP_A, IP_B, IP_RAW, PORT, RawPeer, make_net, raw_reset

from mpa_emu.net.host import Host
from mpa_emu.net.network import Network
from mpa_emu.net.policy import Accept, Reject
from mpa_emu.stacks import STACKS
from mpa_emu.stacks.contract.events import IwEvent, Upcall
from mpa_emu.ulp.rdma_cm import RdmaCmEvent
from mpa_emu.ulp.rdma_cm import RdmaCmEventType as Ev
from mpa_emu.wire import mpa
from mpa_emu.wire.segment import FIN, RST, SYN

S = 1_000_000_000
NAMES = list(STACKS)
REQ_PD = b"contract request"
REP_PD = b"contract reply"
REJ_PD = b"contract: go away"

# cma_iw_handler (drivers/infiniband/core/cma.c): IW_CM_EVENT_CONNECT_REPLY with status
# 0 -> ESTABLISHED, -ECONNRESET / -ECONNREFUSED -> REJECTED, -ETIMEDOUT -> UNREACHABLE,
# any other status (qed_iwarp_mpa_complete's -EBUSY) -> CONNECT_ERROR;
# IW_CM_EVENT_CLOSE -> DISCONNECTED; IW_CM_EVENT_DISCONNECT is not passed up.
CMA_REPLY = {0: Ev.ESTABLISHED, -errno.ECONNRESET: Ev.REJECTED,
             -errno.ECONNREFUSED: Ev.REJECTED, -errno.ETIMEDOUT: Ev.UNREACHABLE,
             -errno.EBUSY: Ev.CONNECT_ERROR}


def upcalls(host: Host) -> list[tuple[IwEvent, int]]:
    return [(u.event, u.status) for u in host.upcalls]


def cm_events(host: Host) -> list[tuple[Ev, int]]:
    return [(e.event, e.status) for e in host.cm_events]


def assert_pdata(name: str, record: Upcall | RdmaCmEvent, sent: bytes) -> None:
    """An upcall or rdma_cm event of ``name`` reports the application's private data
    ``sent``: it starts the bytes, and the length counts the stack's extra bytes."""
    assert record.private_data[:len(sent)] == sent
    assert record.private_data_len == len(sent) + STACKS[name].lifecycle.upcall_pdata_extra


def state_name(view: Any) -> str:
    """A node view's state by its kernel name (an enum member's name, or the name)."""
    state = view.state
    return str(getattr(state, "name", state))


def wire_flags(net: Network, sender: str) -> int:
    out = 0
    for f in net.frames:
        if f.sender == sender and f.segment is not None:
            out |= f.segment.flags
    return out


def connected(name: str) -> tuple[Network, Host, Host, int, int]:
    """Two hosts of ``name``, connected: a's connection and b's."""
    net = make_net()
    a = net.add_host("a", IP_A, stack=name)
    b = net.add_host("b", IP_B, stack=name)
    b.listen(PORT, policy=Accept(private_data=REP_PD))
    conn = a.connect(b, PORT, private_data=REQ_PD, ird=4, ord=4)
    net.run_for(S)
    (request,) = b.events(IwEvent.CONNECT_REQUEST)
    return net, a, b, conn, request.conn


def to_raw(name: str) -> tuple[Network, Host, Host, int]:
    """A host of ``name`` that connected to a raw peer; the peer took the request."""
    net = make_net()
    a = net.add_host("a", IP_A, stack=name)
    raw = net.add_host("raw", IP_RAW)
    raw.listen(PORT)
    conn = a.connect(IP_RAW, PORT, private_data=REQ_PD, ird=4, ord=4)
    net.run_for(S // 10)
    return net, a, raw, conn


def raw_peer(host: Host) -> RawPeer:
    core = host.core
    assert isinstance(core, RawPeer)
    return core


@pytest.mark.parametrize("name", NAMES)
def test_connect_and_accept(name: str) -> None:
    net, a, b, conn, passive = connected(name)
    life = STACKS[name].lifecycle
    # The initiator learns of the reply from one CONNECT_REPLY(0) (irdma_cm_event_connected,
    # siw_proc_mpareply, process_mpa_reply -> connect_reply_upcall), with the private data
    # the responder accepted with.
    assert upcalls(a) == [(IwEvent.CONNECT_REPLY, 0)]
    assert_pdata(name, a.upcalls[0], REP_PD)
    # The responder: CONNECT_REQUEST with the request's private data, then ESTABLISHED
    # (irdma_accept's end, siw_accept, c4iw_accept_cr -> established_upcall).
    assert upcalls(b) == [(IwEvent.CONNECT_REQUEST, 0), (IwEvent.ESTABLISHED, 0)]
    assert_pdata(name, b.upcalls[0], REQ_PD)
    assert cm_events(a) == [(Ev.ESTABLISHED, 0)]
    assert cm_events(b) == [(Ev.CONNECT_REQUEST, 0), (Ev.ESTABLISHED, 0)]
    assert_pdata(name, a.cm_events[0], REP_PD)
    assert_pdata(name, b.cm_events[0], REQ_PD)
    # Both nodes are past MPA, in the state the stack names so.
    assert state_name(a.node(conn)) == life.connected_state
    assert state_name(b.node(passive)) == life.connected_state
    assert a.conns() == [conn] and b.conns() == [passive]
    # Both QPs in RTS over an established TCP connection (irdma_accept and
    # irdma_cm_event_connected, siw_qp_modify, c4iw_modify_qp with
    # C4IW_QP_STATE_RTS).
    for host, c in ((a, conn), (b, passive)):
        qp = host.qp_state(c)
        assert (qp.iwarp_state, qp.tcp_state) == ("RTS", "ESTABLISHED"), host.name
    assert not (wire_flags(net, "a") | wire_flags(net, "b")) & RST


@pytest.mark.parametrize("name", NAMES)
def test_reject_with_private_data(name: str) -> None:
    net = make_net()
    a = net.add_host("a", IP_A, stack=name)
    b = net.add_host("b", IP_B, stack=name)
    listener = b.listen(PORT, policy=Reject(private_data=REJ_PD))
    a.connect(b, PORT, private_data=REQ_PD, ird=4, ord=4)
    net.run()
    status = STACKS[name].statuses.reject
    # The initiator's one CONNECT_REPLY carries the reject's private data (the reject
    # frame's, RFC 5044 section 7.1.2) and the stack's reject status.
    assert upcalls(a) == [(IwEvent.CONNECT_REPLY, status)]
    assert_pdata(name, a.upcalls[0], REJ_PD)
    assert cm_events(a) == [(CMA_REPLY[status], status)]
    assert_pdata(name, a.cm_events[0], REJ_PD)
    # The responder saw the request and nothing after its reject.
    assert upcalls(b) == [(IwEvent.CONNECT_REQUEST, 0)]
    assert cm_events(b) == [(Ev.CONNECT_REQUEST, 0)]
    # One reject frame on the wire, from the responder.
    rejects = [f for f in net.frames if f.segment is not None
               and mpa.looks_like_mpa(f.segment.payload)
               and f.segment.payload[mpa.KEY_SIZE] & mpa.FLAG_REJECT]
    assert [f.sender for f in rejects] == ["b"]
    assert a.conns() == [] and b.conns() == []
    # A reject ends one connection, not the listener (irdma_reject, siw_reject and
    # c4iw_reject_cr touch only the request's node).
    assert b.listener(listener) is not None


@pytest.mark.parametrize("name", NAMES)
def test_peer_rst_while_the_reply_is_awaited(name: str) -> None:
    net, a, raw, _conn = to_raw(name)
    life = STACKS[name].lifecycle
    peer = raw_peer(raw)
    requests: list[bytes] = []
    for _ in range(3):  # reset every connection that brought an MPA request
        for sock in peer.socks("accepted"):
            data = peer.received.get(sock, b"")
            if data[:mpa.KEY_SIZE] == mpa.KEY_REQ and data not in requests:
                requests.append(data)
                raw_reset(net, raw, sock)
        net.run_for(S)
        if a.upcalls:
            break
    status = STACKS[name].statuses.reset
    assert upcalls(a) == [(IwEvent.CONNECT_REPLY, status)]
    assert cm_events(a) == [(CMA_REPLY[status], status)]
    # The first request has the stack's own revision (its framing fact: MPA v2, or
    # erdma's MPA_REVISION_EXT_1); a stack that retries after the RST sends a second
    # request, at revision 1, on a new connection.
    first = STACKS[name].peer_framing(STACKS[name].defaults()).rev
    revisions = [r[mpa.KEY_SIZE + 1] for r in requests]
    assert revisions == ([first, 1] if life.rst_retries_v1 else [first])
    syns = [f for f in net.frames if f.sender == "a" and f.segment.flags & SYN]
    assert len(syns) == (2 if life.rst_retries_v1 else 1)
    net.run()
    assert a.conns() == []


@pytest.mark.parametrize("name", NAMES)
def test_mpa_timeout(name: str) -> None:
    net, a, _raw, conn = to_raw(name)
    life = STACKS[name].lifecycle
    (sent,) = [f for f in net.frames
               if f.sender == "a" and f.segment.payload[:mpa.KEY_SIZE] == mpa.KEY_REQ][:1]
    # Nothing before the stack's deadline...
    net.run(until_ns=sent.time_ns + life.reply_timeout_s * S - S // 2)
    assert a.upcalls == []
    assert state_name(a.node(conn)) != life.connected_state
    # ...and the stack's timeout status at it.
    net.run(until_ns=sent.time_ns + life.reply_timeout_s * S + S // 2)
    status = STACKS[name].statuses.timeout
    assert upcalls(a) == [(IwEvent.CONNECT_REPLY, status)]
    assert cm_events(a) == [(CMA_REPLY[status], status)]
    net.run()
    assert a.conns() == []


@pytest.mark.parametrize("name", NAMES)
def test_graceful_close(name: str) -> None:
    net, a, b, conn, _passive = connected(name)
    a.disconnect(conn, graceful=True)
    net.run()
    # The closing side ends with CLOSE(0); the peer hears the FIN as DISCONNECT, then
    # CLOSE(0) (irdma: FIN_RECEIVED AE then close complete; siw: SIW_CM_WORK_PEER_CLOSE;
    # cxgb4: peer_close -> peer_close_upcall, close_complete_upcall).
    assert upcalls(a)[-1] == (IwEvent.CLOSE, 0)
    assert upcalls(b)[-2:] == [(IwEvent.DISCONNECT, 0), (IwEvent.CLOSE, 0)]
    # rdma_cm: one DISCONNECTED each, after ESTABLISHED.
    assert cm_events(a) == [(Ev.ESTABLISHED, 0), (Ev.DISCONNECTED, 0)]
    assert cm_events(b) == [(Ev.CONNECT_REQUEST, 0), (Ev.ESTABLISHED, 0),
                            (Ev.DISCONNECTED, 0)]
    # FIN both ways, no RST.
    assert wire_flags(net, "a") & FIN and wire_flags(net, "b") & FIN
    assert not (wire_flags(net, "a") | wire_flags(net, "b")) & RST
    assert a.conns() == [] and b.conns() == []


@pytest.mark.parametrize("name", NAMES)
def test_abortive_close(name: str) -> None:
    net, a, b, conn, _passive = connected(name)
    life = STACKS[name].lifecycle
    frames_before = len(net.frames)
    a.disconnect(conn, graceful=False)
    net.run()
    # Each side's last upcall is CLOSE; rdma_cm gives one DISCONNECTED each.
    assert upcalls(a)[-1][0] == IwEvent.CLOSE and upcalls(b)[-1][0] == IwEvent.CLOSE
    assert [e for e, _ in cm_events(a)] == [Ev.ESTABLISHED, Ev.DISCONNECTED]
    assert [e for e, _ in cm_events(b)] == [Ev.CONNECT_REQUEST, Ev.ESTABLISHED,
                                            Ev.DISCONNECTED]
    # The closer's first segment after the verb: a RST, or a FIN for a stack whose
    # abort releases the socket (the stack's fact).
    (first,) = [f for f in net.frames[frames_before:] if f.sender == "a"][:1]
    assert bool(first.segment.flags & RST) == life.abort_sends_rst
    assert bool(first.segment.flags & FIN) == (not life.abort_sends_rst)
    assert a.conns() == [] and b.conns() == []
