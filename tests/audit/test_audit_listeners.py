"""Audit of listeners against cm.c: irdma_find_listener (newest first, wildcard matches
any address and VLAN), irdma_make_listen_node (-ENOMEM on an active match, reuse of one
being destroyed), irdma_dec_refcnt_listen (RST the pending nodes, keep MPAREQ_RCVD)."""

from __future__ import annotations

from errno import EINVAL

import pytest
from helpers.audit_peer import (
    LPORT,
    XPORT,
    Passive,
    Peer,
    handshake,
    listen,
    make_host,
    reject_request,
    v2_request,
)
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.irdma.states import CmState, ListenerState

from mpa_emu.wire.segment import ACK, FIN, RST

ENOMEM = 12


def test_newest_listener_wins_a_wildcard_created_after_a_specific_one() -> None:
    p = make_host()
    specific = listen(p)
    wildcard = p.core.create_listen(None, LPORT, now_ns=0)
    handshake(p, v2_request(), listener=specific)
    assert p.ups[0].listener == wildcard


def test_a_specific_listener_after_a_wildcard_one_is_refused_with_enomem() -> None:
    p = make_host()
    p.core.create_listen(None, LPORT, now_ns=0)
    with pytest.raises(CmError) as err:
        listen(p)
    assert err.value.errno == ENOMEM


def _nodes_in_states(p: Peer) -> dict[str, int]:
    """Four passive nodes of listener 1: SYN_RCVD, ESTABLISHED, MPAREQ_RCVD, FIN_WAIT1."""
    conns: dict[str, int] = {}
    for i, name in enumerate(("syn_rcvd", "established", "mpareq_rcvd", "fin_wait1")):
        pas = Passive(p, 1, sport=XPORT + i, isn_x=10_000 * (i + 1))
        pas.syn()
        conns[name] = p.core.conns()[-1]
        if name == "established":
            pas.ack()
        elif name in ("mpareq_rcvd", "fin_wait1"):
            pas.ack(v2_request())
        if name == "fin_wait1":
            p.core.reject(conns[name], now_ns=p.now)
    p.drain()
    return conns


def test_destroy_listen_resets_the_early_nodes_and_keeps_the_indicated_one() -> None:
    p = make_host()
    listen(p)
    conns = _nodes_in_states(p)
    views = {k: p.core.node(c) for k, c in conns.items()}
    p.core.destroy_listen(1, now_ns=p.now)
    rsts = p.drain()
    assert all(s.flags == RST | ACK for s in rsts)
    by_port = {s.dport: s for s in rsts}
    assert sorted(by_port) == [XPORT, XPORT + 1, XPORT + 2]  # not the FIN_WAIT1 node
    for name, port in (("syn_rcvd", XPORT), ("established", XPORT + 1),
                       ("mpareq_rcvd", XPORT + 2)):
        v = views[name]
        assert v is not None
        assert (by_port[port].seq, by_port[port].ack) == (v.loc_seq_num, v.rcv_nxt)
    assert p.core.node(conns["syn_rcvd"]) is None
    assert p.core.node(conns["established"]) is None
    kept = p.core.node(conns["mpareq_rcvd"])
    assert kept is not None and kept.state == CmState.LISTENER_DESTROYED
    fw1 = p.core.node(conns["fin_wait1"])
    assert fw1 is not None and fw1.state == CmState.FIN_WAIT1 and fw1.retransmitting
    lst = p.core.listener(1)
    assert lst is not None and lst.state == ListenerState.PASSIVE


@pytest.mark.parametrize("verb", ["accept", "reject"])
def test_after_destroy_listen_accept_fails_einval_and_reject_frees_silently(
        verb: str) -> None:
    p = make_host()
    listen(p)
    pas = handshake(p, v2_request(), listener=1)
    conn = pas.conn()
    p.core.destroy_listen(1, now_ns=p.now)
    [rst] = p.drain()
    assert rst.flags == RST | ACK
    if verb == "accept":
        with pytest.raises(CmError) as err:  # irdma_accept's return value
            p.core.accept(conn, now_ns=p.now)
        assert err.value.errno == EINVAL
        p.drain()
        assert p.ups[-1].event == IwEvent.CONNECT_REQUEST  # no ESTABLISHED upcall
    else:
        p.core.reject(conn, private_data=b"x", now_ns=p.now)
    assert p.drain() == [] and p.core.node(conn) is None
    assert p.core.listener(1) is None  # its last child gone, the listener is freed


def test_syn_to_a_listener_being_destroyed_is_dropped_silently() -> None:
    p = make_host()
    listen(p)
    handshake(p, v2_request(), listener=1)
    p.core.destroy_listen(1, now_ns=p.now)
    p.drain()
    assert Passive(p, 1, sport=XPORT + 9).syn() == []


def test_reused_listener_resets_the_backlog_count_and_it_goes_negative() -> None:
    # irdma_make_listen_node resets pend_accepts_cnt: children of the old incarnation still
    # decrement pend_accepts_cnt
    p = make_host()
    listen(p, backlog=0)
    pas = handshake(p, v2_request(), listener=1)
    p.core.destroy_listen(1, now_ns=p.now)
    p.drain()
    assert p.core.create_listen(p.ip_h, LPORT, backlog=0, now_ns=p.now) == 1  # reused
    p.core.reject(pas.conn(), now_ns=p.now)
    lst = p.core.listener(1)
    assert lst is not None and lst.pend_accepts_cnt == -1
    got = [Passive(p, 1, sport=XPORT + 10 + i, isn_x=777 * i).syn() for i in range(3)]
    assert [len(g) for g in got] == [1, 1, 0]  # backlog 0 admits two, then drops


def test_fin_wait1_node_of_a_destroyed_listener_still_finishes_its_close() -> None:
    p = make_host()
    listen(p)
    req = v2_request()
    pas = handshake(p, req, listener=1)
    conn = pas.conn()
    _, fin_end = reject_request(p, conn)
    p.core.destroy_listen(1, now_ns=p.now)
    assert p.drain() == []
    [ack] = p.send(p.seg(flags=ACK | FIN, seq=1001 + len(req), ack=fin_end))
    assert ack.flags == ACK
    p.run_out()
    assert p.core.node(conn) is None and p.core.listener(1) is None


@pytest.mark.parametrize("target", ["fin_wait2", "time_wait", "closing", "last_ack"])
def test_destroy_listen_leaves_nodes_at_or_after_fin_wait1_alone(target: str) -> None:
    p = make_host()
    listen(p)
    req = v2_request()
    pas = handshake(p, req, listener=1)
    conn = pas.conn()
    seq = 1001 + len(req)
    if target == "last_ack":
        # a second connection, closed by the peer before its MPA request
        pas2 = Passive(p, 1, sport=XPORT + 5, isn_x=3000)
        pas2.syn()
        pas2.ack()
        pas2.ack(extra=FIN)
        conn = p.core.conns()[-1]
    else:
        _, fin_end = reject_request(p, conn)
        flags = {"fin_wait2": ACK, "time_wait": ACK | FIN, "closing": FIN}[target]
        p.send(p.seg(flags=flags, seq=seq, ack=fin_end))
    p.drain()
    view = p.core.node(conn)
    assert view is not None and view.state.name.lower() == target
    p.core.destroy_listen(1, now_ns=p.now)
    out = [s for s in p.drain() if s.dport == view.rem_port]
    assert out == []
    after = p.core.node(conn)
    assert after is not None and after.state == view.state


def test_gen2_destroy_listen_while_accept_waits_for_the_rtr_cannot_send_its_rst() -> None:
    # irdma_accept freed the AH (cm_free_ah) and the node is not accelerated until the
    # RTS AE: irdma_dec_refcnt_listen selects it (OFFLOADED < FIN_WAIT1), the RST cannot
    # be built, the node goes CLOSED and keeps the temporary reference (irdma_dec_refcnt_listen).
    p = make_host()
    listen(p)
    pas = handshake(p, v2_request(), listener=1)
    conn = pas.conn()
    p.core.accept(conn, now_ns=p.now)
    p.drain()
    view = p.core.node(conn)
    assert view is not None and view.state == CmState.OFFLOADED and not view.accelerated
    p.core.destroy_listen(1, now_ns=p.now)
    assert [s for s in p.drain() if s.flags & RST] == []
    after = p.core.node(conn)
    assert after is not None and after.state == CmState.CLOSED
    assert any(c == conn for c, _, why in p.core.leak_report() if why)


def test_a_rejected_connection_holds_its_backlog_slot_until_freed() -> None:
    # accept_pend is cleared only by a successful accept; irdma_destroy_connection
    # decrements pend_accepts_cnt when the rejected node is finally freed
    p = make_host()
    listen(p, backlog=0)
    req = v2_request()
    pas = handshake(p, req, listener=1)
    conn = pas.conn()
    _, fin_end = reject_request(p, conn)
    assert Passive(p, 1, sport=XPORT + 1, isn_x=77).syn() == []  # FIN_WAIT1: held
    p.send(p.seg(flags=ACK | FIN, seq=1001 + len(req), ack=fin_end))
    p.run_out()
    assert p.core.node(conn) is None
    [synack] = Passive(p, 1, sport=XPORT + 2, isn_x=88).syn()
    assert synack.ack == 89
