"""Whatever a peer sends, erdma's core reacts as erdma_cm.c does and never raises: seeded
random byte streams (whole and cut frames of both dialects, noise) against an erdma
initiator and an erdma responder. The initiator gets exactly one CONNECT_REPLY; the
responder either says nothing or CONNECT_REQUEST then ESTABLISHED; every endpoint left
is in RDMA_MODE or CLOSED."""

from __future__ import annotations

import random

import pytest
from helpers.cxgb4_lab import IP_RAW, PORT, make_net, mpa_frame, raw_send

from mpa_emu.net.policy import Accept
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.wire import erdma_mpa
from mpa_emu.wire.mpa import KEY_REP, KEY_REQ

S = 1_000_000_000


def piece(rng: random.Random, key: bytes) -> bytes:
    choice = rng.randrange(5)
    pd = bytes(rng.randrange(256) for _ in range(rng.randrange(12)))
    if choice == 0:
        return erdma_mpa.build(request=key == KEY_REQ, flags=rng.choice((0, 0x20, 0x40)),
                               cookie=rng.getrandbits(32), cc=rng.randrange(16),
                               private_data=pd)
    if choice == 1:
        return mpa_frame(key, rng.choice((0, 0x10, 0x50)), rng.choice((1, 2)), pd)
    if choice == 2:
        return mpa_frame(key, 0, 129, bytes(8) + pd, pd_length=rng.randrange(300))
    if choice == 3:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40)))
    return erdma_mpa.build(request=key == KEY_REQ, cookie=1, cc=0)[:rng.randrange(1, 28)]


@pytest.mark.parametrize("seed", range(12))
def test_initiator_takes_any_bytes(seed: int) -> None:
    rng = random.Random(seed)
    net = make_net(seed)
    a = net.add_host("a", "192.0.2.1", stack="erdma")
    raw = net.add_host("raw", IP_RAW)
    raw.listen(PORT)
    a.connect(IP_RAW, PORT, private_data=b"x")
    net.run_for(S // 100)
    (sock,) = raw.core.socks("accepted")
    for _ in range(rng.randrange(1, 4)):
        raw_send(net, raw, sock, piece(rng, KEY_REP))
        net.run_for(S // 1000)
    net.run(until_ns=40 * S)
    assert [u.event for u in a.upcalls][:1] == [IwEvent.CONNECT_REPLY]
    assert sum(1 for u in a.upcalls if u.event == IwEvent.CONNECT_REPLY) == 1
    for conn in a.conns():
        assert a.node(conn).state.name in ("RDMA_MODE", "CLOSED")


@pytest.mark.parametrize("seed", range(12))
def test_responder_takes_any_bytes(seed: int) -> None:
    rng = random.Random(100 + seed)
    net = make_net(seed)
    b = net.add_host("b", "192.0.2.2", stack="erdma")
    raw = net.add_host("raw", IP_RAW)
    b.listen(PORT, policy=Accept(private_data=b"ok"))
    sock = raw.connect(b, PORT)
    net.run_for(S // 100)
    for _ in range(rng.randrange(1, 4)):
        raw_send(net, raw, sock, piece(rng, KEY_REQ))
        net.run_for(S // 1000)
    net.run(until_ns=40 * S)
    events = [u.event for u in b.upcalls]
    assert events == [] or events[:2] == [IwEvent.CONNECT_REQUEST, IwEvent.ESTABLISHED]
    for conn in b.conns():
        assert b.node(conn).state.name in ("RDMA_MODE", "CLOSED")
