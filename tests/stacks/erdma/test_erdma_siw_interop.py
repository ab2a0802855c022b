"""erdma against siw, an RFC 5044/6581 stack: what each side's source does with the
other's frame. Neither connection reaches RDMA mode.

erdma initiator, siw responder: siw_recv_mpa_rr reads erdma's 20-byte header, takes
PD_Length bytes of private data and finds more bytes behind them (erdma's 8-byte
extension is not counted): "peer sent extra data", -EPROTO. siw releases the socket
with bytes unread (a RST, tcp_close) and sends no CONNECT_REQUEST; erdma's socket goes
to TCP_CLOSE: ERDMA_CM_WORK_PEER_CLOSE in AWAIT_MPAREP, CONNECT_REPLY -ECONNRESET, which
rdma_cm reports as REJECTED (cma_iw_handler).

siw initiator, erdma responder: erdma_recv_mpa_rr refuses revision 2 as soon as the
20-byte header is in (MPA_REVISION_EXT_1 only), before reading the RFC 6581 block;
release_cep's sock_release finds the block and the private data unread: a RST. siw:
SIW_CM_WORK_PEER_CLOSE in AWAIT_MPAREP, CONNECT_REPLY -ECONNRESET.
"""

from __future__ import annotations

import errno

import pytest

from mpa_emu.net.network import Network
from mpa_emu.net.policy import Accept
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.ulp.rdma_cm import RdmaCmEventType as Ev
from mpa_emu.wire.segment import FIN, RST

S = 1_000_000_000


def run(initiator: str, responder: str, pdata: bytes) -> Network:
    net = Network(seed=9)
    a = net.add_host("a", "192.0.2.1", stack=initiator)
    b = net.add_host("b", "192.0.2.2", stack=responder)
    b.listen(31000, policy=Accept(private_data=b"welcome"))
    a.connect(b, 31000, private_data=pdata)
    net.run_for(S)
    return net


def responder_flags(net: Network) -> int:
    out = 0
    for f in net.frames:
        if f.sender == "b" and f.segment is not None:
            out |= f.segment.flags
    return out


@pytest.mark.parametrize("pdata", [b"", b"hello"])
def test_erdma_initiator_siw_responder(pdata: bytes) -> None:
    net = run("erdma", "siw", pdata)
    a, b = net.hosts["a"], net.hosts["b"]
    assert b.upcalls == []  # siw_proc_mpareq never got a whole frame
    assert responder_flags(net) & RST
    assert not [f for f in net.frames if f.sender == "b" and f.segment.payload]
    assert [(u.event, u.status) for u in a.upcalls] == [
        (IwEvent.CONNECT_REPLY, -errno.ECONNRESET)]
    assert [(e.event, e.status) for e in a.cm_events] == [(Ev.REJECTED, -errno.ECONNRESET)]
    assert a.conns() == [] and b.conns() == []


@pytest.mark.parametrize(("siw_params", "rst"), [
    ({}, True),  # v2: the 4-byte block (and any private data) stays unread
    ({"mpa_version": 1}, True),  # v1 with 5 bytes of private data unread
])
def test_siw_initiator_erdma_responder(siw_params: dict[str, int], rst: bool) -> None:
    net = Network(seed=9)
    a = net.add_host("a", "192.0.2.1", stack="siw", params=siw_params)
    b = net.add_host("b", "192.0.2.2", stack="erdma")
    b.listen(31000, policy=Accept(private_data=b"welcome"))
    a.connect(b, 31000, private_data=b"hello")
    net.run_for(S)
    assert b.upcalls == []
    flags = responder_flags(net)
    assert bool(flags & RST) == rst and bool(flags & FIN) == (not rst)
    assert not [f for f in net.frames if f.sender == "b" and f.segment.payload]
    assert [(u.event, u.status) for u in a.upcalls] == [
        (IwEvent.CONNECT_REPLY, -errno.ECONNRESET)]
    assert a.conns() == [] and b.conns() == []


def test_siw_v1_request_without_private_data_is_closed_with_a_fin() -> None:
    net = Network(seed=9)
    a = net.add_host("a", "192.0.2.1", stack="siw", params={"mpa_version": 1})
    b = net.add_host("b", "192.0.2.2", stack="erdma")
    b.listen(31000)
    a.connect(b, 31000)
    net.run_for(S)
    # a 20-byte frame: erdma_recv_mpa_rr read it all before refusing revision 1, so
    # sock_release has nothing unread: a FIN, and siw's PEER_CLOSE all the same
    flags = responder_flags(net)
    assert flags & FIN and not flags & RST
    assert [(u.event, u.status) for u in a.upcalls] == [
        (IwEvent.CONNECT_REPLY, -errno.ECONNRESET)]
