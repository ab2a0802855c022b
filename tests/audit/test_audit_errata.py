"""Kernel behaviours that contradict a first reading of cm.c, one by one (those not pinned in the
other audit
modules), each driven through the public API against what cm.c does."""

from __future__ import annotations

from dataclasses import replace
from errno import ECONNRESET

from helpers.audit_peer import (
    IP_H,
    LPORT,
    MS,
    S_NS,
    SYN_OPTS_1460,
    XPORT,
    Passive,
    Peer,
    connect,
    handshake,
    listen,
    listener_destroyed_gen1,
    make_host,
    to_mpareq_sent,
    v2_request,
)
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.irdma.config import CmConfig
from mpa_emu.stacks.irdma.states import CmState

from mpa_emu.wire.segment import ACK, RST, SYN, Segment


def _kinds(p: Peer, kind: str) -> list[dict[str, object]]:
    assert p.core.trace is not None
    return [r.fields for r in p.core.trace.records if r.kind == kind]


def test_errata1_destroy_listen_before_the_ah_leaves_a_closed_node_and_a_stray_synack(
        ) -> None:
    # GEN_2: the node has no valid AH until the asynchronous AH/qhash completion, so
    # the listener's RST is never built: CLOSED with a leaked reference (irdma_form_ah_cm_frame);
    # the
    # completion then sends one SYN-ACK that is never resent (irdma_send_syn_cqp_callback).
    p = make_host(CmConfig(ah_latency_ns=5 * MS))
    listen(p)
    assert Passive(p, 1).syn() == []
    [conn] = p.core.conns()
    p.core.destroy_listen(1, now_ns=p.now)
    assert p.drain() == []
    view = p.core.node(conn)
    assert view is not None and view.state == CmState.CLOSED
    got = p.run_out()
    assert [(t // MS, s.flags) for t, s in got] == [(5, SYN | ACK)]
    assert p.core.node(conn) is not None
    lst = p.core.listener(1)
    assert lst is not None and lst.refcnt == 1  # held by the leaked node
    assert any(c == conn and st == CmState.CLOSED and why
               for c, st, why in p.core.leak_report())


def test_errata1_gen1_destroy_listen_resets_the_same_node() -> None:
    p, _ = listener_destroyed_gen1()
    [rst] = p.drain()
    assert (rst.flags, rst.ack) == (RST | ACK, 1001)
    p.run_out()
    assert p.core.conns() == [] and p.core.listener(1) is None


def test_errata2_failed_ah_keeps_syn_rcvd_without_timer_until_a_peer_rst() -> None:
    p = make_host(CmConfig(ah_create_fails=True))
    listen(p, backlog=0)
    assert Passive(p, 1).syn() == []
    [conn] = p.core.conns()
    assert p.run_out() == []
    view = p.core.node(conn)
    assert view is not None and view.state == CmState.SYN_RCVD and not view.retransmitting
    # the node holds the only backlog slot (backlog 0 admits one): the next SYN is dropped
    assert Passive(p, 1, sport=XPORT + 1, isn_x=50).syn() == []
    assert p.core.stats["backlog_drops"] == 1
    assert p.send(p.seg(flags=RST, seq=1001)) == []
    assert p.core.conns() == []
    assert p.core.listener(1).pend_accepts_cnt == 0  # type: ignore[union-attr]


def test_errata3_lost_v1_retry_is_never_resent_and_expires_at_316_003() -> None:
    p = make_host()
    a, req = to_mpareq_sent(p)
    end = a.isn_h + 1 + len(req.payload)
    a.to_core(flags=ACK, ack=end)                 # ack_rcvd = true
    p.now = 2 * S_NS
    [retry] = a.to_core(flags=RST, ack=0)         # v1 retry SYN at t = 2 s
    assert (retry.flags, retry.seq) == (SYN, end)
    got = p.run_out()
    [(t, rst)] = got
    # the retry's entry was scheduled at 2 s; irdma_cm_timer_tick expires it 316.003 s later; the
    # timer
    # was already pending for the request's entry (1 s), which only delays nothing here
    assert t == 2 * S_NS + 316_003 * MS
    assert (rst.flags, rst.seq, rst.ack) == (RST | ACK, end + 1, 5001)
    assert p.ups[-1].status == -ECONNRESET


def test_errata6_reject_after_the_syn_ack_freed_the_node_is_refused() -> None:
    p = make_host()
    pas = handshake(p, v2_request())
    conn = pas.conn()
    p.send(p.seg(flags=SYN | ACK, seq=1, ack=pas.isn_h + 1))
    assert any(f.get("conn") == conn for f in _kinds(p, "kernel_bug"))
    try:
        p.core.reject(conn, now_ns=p.now)
    except CmError as err:
        assert err.errno == 22
    else:
        raise AssertionError("reject on a freed node must be refused")


def test_errata7_zero_length_window_scale_option_hangs_the_passive_syn() -> None:
    p = make_host()
    listen(p)
    assert Passive(p, 1).syn(bytes.fromhex("020405b403000000")) == []
    assert _kinds(p, "kernel_bug")
    [(_, state, why)] = p.core.leak_report()
    assert state == CmState.LISTENING and why is not None and "irdma_process_options" in why


def test_errata8_unbuildable_mpa_request_leaves_syn_sent_without_a_timer() -> None:
    p = make_host(CmConfig(mpa_rev=3))
    a = connect(p)
    [ack] = a.synack()
    assert ack.flags == ACK
    assert p.run_out() == []
    view = p.core.node(a.conn)
    assert view is not None and view.state == CmState.SYN_SENT and not view.retransmitting
    assert p.ups == []


def test_errata12_ipv4_removal_selects_an_ipv6_node_with_that_first_word() -> None:
    # irdma_teardown_list_prep compares nfo->ipv4 ? 4 : 16 bytes: the removed address's
    # family, not the node's. The selected node has no QP yet: the NULL-QP oops record.
    p = make_host(ipv6=True)
    v6 = IP_H + bytes(11) + b"\x01"           # c0a8:0701::1 starts with 192.168.7.1
    p.core.add_address(v6)
    p.core.add_address(IP_H)
    p.core.add_address(bytes([10, 9, 9, 9]))
    p.core.create_listen(v6, LPORT, ipv6=True, now_ns=0)
    _to(p, v6, SYN, 1000)
    [conn] = p.core.conns()
    p.core.remove_address(bytes([10, 9, 9, 9]), now_ns=p.now)
    assert not any(f.get("conn") == conn for f in _kinds(p, "kernel_bug"))
    p.core.remove_address(IP_H, now_ns=p.now)
    assert any(f.get("conn") == conn for f in _kinds(p, "kernel_bug"))


def _to(p: Peer, dst: bytes, flags: int, seq: int) -> list[Segment]:
    return p.send(replace(p.seg(flags=flags, seq=seq, options=SYN_OPTS_1460), dst_ip=dst))


def test_errata13_dcb_vlan_mode_stores_vlan_0_so_untagged_segments_miss() -> None:
    p = make_host(CmConfig(dcb_vlan_mode=True))
    # a specific listener is stored with VLAN 0 too and never matches an untagged SYN
    # (irdma_find_listener compares vlan_id); the wildcard matches any VLAN
    listen(p)
    assert Passive(p, 1).syn() == []
    p.core.destroy_listen(1, now_ns=0)
    p.core.create_listen(None, LPORT, now_ns=0)
    pas = Passive(p, 2)
    [synack] = pas.syn()
    assert synack.vlan == 0  # VLAN 0 tag (priority tag) from the node's vlan_id 0
    assert pas.ack(v2_request()) == []  # looked up with 0xFFFF: no node, dropped
    assert p.ups == []
    # a retransmitted SYN misses too and creates a second node
    [synack2] = pas.syn()
    assert synack2.flags == SYN | ACK and len(p.core.conns()) == 2


def test_errata2_on_gen1_the_stray_synack_of_a_destroyed_listener_is_retransmitted(
        ) -> None:
    # GEN_1 needs no AH: the listener's RST goes out and the node becomes
    # LISTENER_DESTROYED (irdma_dec_refcnt_listen). The qhash completion then sends the
    # SYN-ACK (irdma_send_syn_cqp_callback), and irdma_cm_timer_tick resends it, since
    # only OFFLOADED and CLOSED entries are dropped; at expiry irdma_retrans_expired takes
    # the default branch: RST and an ABORTED event on a passive node (irdma_event_handler, ABORTED).
    p, conn = listener_destroyed_gen1()
    [rst] = p.drain()
    assert (rst.flags, rst.ack) == (RST | ACK, 1001)
    got = p.run_out()
    synacks = [t for t, s in got if s.flags == SYN | ACK]
    assert synacks[0] == 5 * MS and synacks[1] == 1005 * MS and len(synacks) == 33
    [(t_rst, rst2)] = [(t, s) for t, s in got if s.flags & RST]
    assert t_rst == 316_008 * MS and rst2.seq == rst.seq + 1
    assert p.ups == [] and p.core.conns() == []
    assert any(f.get("conn") == conn for f in _kinds(p, "kernel_bug"))
