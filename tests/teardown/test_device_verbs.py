"""The teardown verbs and the read-only views on the public API (Host).

irdma_cm_teardown_connections (cm.c) moves each selected node's QP to ERR; irdma_modify_qp
(verbs.c) resets a live TCP connection on a link that is up. Under rf->reset the same
function calls irdma_cm_disconn for each QP, and irdma_cm_disconn_true decides CLOSE
(``iwdev->rf->reset``); irdma_handle_cqp_op issues no CQP command during a reset, so
nothing reaches the wire. irdma_if_notify deletes a listener's TCP_SYN qhash entry on
address removal (irdma_manage_qhash DELETE) and adds it back on ifup."""

from __future__ import annotations

import pytest
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.events import IwEvent

from mpa_emu.net import Accept, Host, Network
from mpa_emu.wire.segment import RST

MS = 1_000_000


def _pair(n: int = 2) -> tuple[Network, Host, Host, list[int]]:
    net = Network(6, latency_ns=1 * MS)
    alice = net.add_host("alice", "192.0.2.1")
    bob = net.add_host("bob", ["192.0.2.2", "192.0.2.3"])
    bob.listen(4791, policy=Accept())
    conns = [alice.connect("192.0.2.2", 4791), alice.connect("192.0.2.3", 4791)][:n]
    net.run(until_ns=50 * MS)
    return net, alice, bob, conns


def test_teardown_of_one_address_resets_only_its_connection() -> None:
    net, alice, bob, conns = _pair()
    t0 = net.now_ns
    selected = bob.teardown("192.0.2.2")
    net.run(until_ns=t0 + 2000 * MS)  # the close entry waits on the shared timer
    assert len(selected) == 1
    rsts = [f for f in net.frames if f.time_ns >= t0 and f.segment is not None
            and f.segment.flags & RST]
    assert [f.sender for f in rsts] == ["bob"]
    assert rsts[0].segment.sport == 4791 and rsts[0].segment.src_ip == bytes([192, 0, 2, 2])
    assert [u.event for u in bob.events() if u.time_ns >= t0] == [IwEvent.CLOSE]
    assert alice.node(conns[1]) is not None


def test_teardown_with_disconnect_all_resets_every_connection() -> None:
    net, _alice, bob, _ = _pair()
    t0 = net.now_ns
    assert len(bob.teardown(disconnect_all=True)) == 2
    net.run(until_ns=t0 + 2000 * MS)  # the close entry waits on the shared timer
    rsts = [f for f in net.frames if f.time_ns >= t0 and f.segment is not None
            and f.segment.flags & RST]
    assert [f.sender for f in rsts] == ["bob", "bob"]
    assert bob.conns() == []


def test_teardown_needs_an_address_or_all() -> None:
    _net, _alice, bob, _ = _pair(1)
    with pytest.raises(CmError):
        bob.teardown()


def test_device_reset_closes_everything_without_a_frame() -> None:
    net, alice, bob, conns = _pair()
    t0 = net.now_ns
    assert len(bob.device_reset()) == 2
    net.run(until_ns=t0 + 2000 * MS)
    assert [f for f in net.frames if f.time_ns >= t0 and f.sender == "bob"] == []
    closes = [u for u in bob.events(IwEvent.CLOSE) if u.time_ns >= t0]
    assert [(u.status, u.time_ns) for u in closes] == [(0, t0), (0, t0)]
    assert bob.conns() == []
    # the peer is not told: its connections stay offloaded
    assert all(alice.node(c) is not None for c in conns)


def test_listener_view_tells_whether_the_syn_qhash_is_installed() -> None:
    net = Network(6)
    bob = net.add_host("bob", "192.0.2.2")
    lid = bob.listen(4791, "192.0.2.2")
    assert bob.listener(lid).syn_qhash_installed
    bob.remove_address("192.0.2.2")
    assert not bob.listener(lid).syn_qhash_installed
    bob.add_address("192.0.2.2")
    assert bob.listener(lid).syn_qhash_installed


def test_qp_view_follows_a_disconnect() -> None:
    _net, alice, _bob, conns = _pair(1)
    view = alice.qp_state(conns[0])
    assert (view.iwarp_state, view.tcp_state) == ("RTS", "ESTABLISHED")
    alice.disconnect(conns[0], graceful=True)
    view = alice.qp_state(conns[0])
    # irdma_modify_qp(SQD): iwarp_state CLOSING, the NIC sent its FIN
    assert view.iwarp_state == "CLOSING" and view.tcp_state == "FIN_WAIT_1"
