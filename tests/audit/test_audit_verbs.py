"""Audit of the local actions and upcall contents against cm.c: irdma_accept (reply built
by irdma_cm_build_mpa_frame, sent by the QP), irdma_cm_event_connected (CONNECT_REPLY),
irdma_send_cm_event fields, irdma_cm_close per state, irdma_make_cm_node TOS/priority."""

from __future__ import annotations

import struct

import pytest
from helpers.audit_peer import (
    KEY_REP,
    LPORT,
    Passive,
    connect,
    handshake,
    listen,
    make_host,
    to_mpareq_sent,
    v2_reply,
    v2_request,
)
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.irdma.config import CmConfig
from mpa_emu.stacks.irdma.states import CmState

from mpa_emu.wire.segment import ACK, RST, SYN


def test_gen1_accept_sends_the_reply_at_the_cm_sequence_numbers() -> None:
    p = make_host(CmConfig(gen=1))
    req = v2_request(b"hi", ird=8, ord_=4)
    pas = handshake(p, req)
    conn = pas.conn()
    p.core.accept(conn, private_data=b"welcome", now_ns=p.now)
    out = p.drain()
    [rep] = [s for s in out if s.payload]
    assert (rep.seq, rep.ack) == (pas.isn_h + 1, 1001 + len(req))
    # Rep key, C|S, rev 2, PD_Length 4 + 7, P2P | IRD 127, READ | ORD min(255, 8)
    assert rep.payload == KEY_REP + bytes([0x50, 2]) + struct.pack(
        "!HHH", 11, 0x807F, 0x4008) + b"welcome"
    est = [u for u in p.ups if u.event == IwEvent.ESTABLISHED]
    assert [(u.status, u.ird, u.ord) for u in est] == [(0, 127, 8)]
    assert p.core.listener(1).pend_accepts_cnt == 0  # type: ignore[union-attr]
    view = p.core.node(conn)
    assert view is not None and view.state == CmState.OFFLOADED and view.accelerated


def test_gen1_connect_reply_carries_the_negotiated_ird_ord_and_plus4_pdata() -> None:
    p = make_host(CmConfig(gen=1))
    a, req = to_mpareq_sent(p, ird=16, ord_=16)
    end = a.isn_h + 1 + len(req.payload)
    a.to_core(flags=ACK, ack=end, payload=v2_reply(b"ok", ird=8, ord_=4))
    replies = [u for u in p.ups if u.event == IwEvent.CONNECT_REPLY]
    assert [(u.status, u.ird, u.ord, u.private_data_len) for u in replies] == [
        (0, 16, 8, 6)]
    assert replies[0].private_data[:2] == b"ok"


@pytest.mark.parametrize(("setup", "frames"), [
    ("syn_sent", [RST | ACK]), ("mpareq_sent", [RST | ACK])])
def test_close_in_the_early_active_states_sends_a_rst_and_frees(setup: str,
                                                                 frames: list[int]) -> None:
    p = make_host()
    if setup == "syn_sent":
        a = connect(p)
        seq, ack = a.isn_h + 1, 0
    else:
        a, req = to_mpareq_sent(p)
        seq, ack = a.isn_h + 1 + len(req.payload), 5001
    p.core.close(a.conn, now_ns=p.now)
    out = p.drain()
    assert [(s.flags, s.seq, s.ack) for s in out] == [(frames[0], seq, ack)]
    assert p.core.node(a.conn) is None and p.ups == []


def test_close_in_mpareq_rcvd_resets_without_changing_state_then_frees() -> None:
    p = make_host()
    req = v2_request()
    pas = handshake(p, req)
    conn = pas.conn()
    p.core.close(conn, now_ns=p.now)
    [rst] = p.drain()
    assert (rst.flags, rst.seq, rst.ack) == (RST | ACK, pas.isn_h + 1, 1001 + len(req))
    assert p.core.node(conn) is None


def test_close_in_fin_wait1_is_einval_and_changes_nothing() -> None:
    p = make_host()
    pas = handshake(p, v2_request())
    conn = pas.conn()
    p.core.reject(conn, now_ns=p.now)
    p.drain()
    with pytest.raises(CmError):
        p.core.close(conn, now_ns=p.now)
    assert p.drain() == []
    assert p.core.node(conn).state == CmState.FIN_WAIT1  # type: ignore[union-attr]


def test_reject_on_an_active_node_is_a_no_op() -> None:
    p = make_host()
    a, _ = to_mpareq_sent(p)
    p.core.reject(a.conn, private_data=b"x", now_ns=p.now)
    assert p.drain() == []
    assert p.core.node(a.conn).state == CmState.MPAREQ_SENT  # type: ignore[union-attr]


def test_passive_node_takes_max_tos_and_its_priority_from_rt_tos2priority() -> None:
    # irdma_make_cm_node with a listener, non-DSCP: tos = max(listener, incoming),
    # user_pri = rt_tos2priority(tos) (0x10 -> 6), overriding the SYN's PCP 3
    p = make_host(vlan=5)
    p.core.create_listen(p.ip_h, LPORT, tos=0x08, now_ns=0)
    [synack] = Passive(p, 1).syn(vlan=5, pcp=3, tos=0x10)
    assert (synack.vlan, synack.pcp, synack.tos) == (5, 6, 0x10)


def test_active_node_priority_from_the_connect_tos() -> None:
    p = make_host(vlan=7)
    p.core.connect(p.ip_h, p.ip_x, LPORT, tos=0x18, now_ns=0)
    [syn] = p.drain()
    # rt_tos2priority(0x18): IPTOS_TOS 0x18 >> 1 = 12 -> 4
    assert (syn.flags, syn.vlan, syn.pcp, syn.tos) == (SYN, 7, 4, 0x18)


def test_two_peer_rsts_in_mpareq_rcvd_let_a_reject_send_its_frame() -> None:
    # passive_state is atomic_inc'ed per RST: 2 RSTs make the reject's add_return 3,
    # which is not IRDMA_SEND_RESET_EVENT (2), so irdma_send_mpa_reject runs
    p = make_host()
    req = v2_request()
    pas = handshake(p, req)
    conn = pas.conn()
    p.send(p.seg(flags=RST, seq=1001 + len(req)))
    p.send(p.seg(flags=RST, seq=1001 + len(req)))
    p.core.reject(conn, now_ns=p.now)
    [rej] = p.drain()
    assert rej.payload[16] == 0x70
    assert p.core.node(conn).state == CmState.FIN_WAIT1  # type: ignore[union-attr]


def test_connect_request_upcall_names_the_addresses_of_the_node() -> None:
    p = make_host()
    listen(p)
    handshake(p, v2_request(), listener=1)
    [up] = p.ups
    assert (up.local_ip, up.local_port, up.remote_ip, up.remote_port) == (
        p.ip_h, LPORT, p.ip_x, 40000)
