"""Listeners, backlog, wildcard children, VLAN and family matching, destroy_listen,
SYN without listener, the neighbour table, loopback and the hardware generations
(irdma_create_listen, irdma_find_listener, irdma_destroy_listen, irdma_form_ah_cm_frame)."""

from __future__ import annotations

import errno

import pytest
from helpers.cm_harness import (
    IP6_A,
    IP6_P,
    IP_A,
    IP_P,
    MAC_A,
    MAC_P,
    PORT,
    S_NS,
    make_pair,
    to_host,
)
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.contract.trace import Trace
from mpa_emu.stacks.irdma.config import CmConfig, Quirks
from mpa_emu.stacks.irdma.core import CmCore
from mpa_emu.stacks.irdma.states import CmState, ListenerState

from mpa_emu.wire.segment import ACK, RST, SYN

PEER = bytes.fromhex("02000000ee01")


def host(cfg: CmConfig | None = None, vlan: int | None = None) -> CmCore:
    core = CmCore("P", MAC_P, cfg or CmConfig(), seed=8, trace=Trace())
    core.add_address(IP_P, vlan=vlan)
    core.add_address(IP6_P)
    core.set_neighbour(IP_A, PEER)
    core.set_neighbour(IP6_A, PEER)
    return core


def syn(core: CmCore, sport: int = 5000, *, dst: bytes = IP_P, src: bytes = IP_A,
        vlan: int | None = None, port: int = PORT, t: int = 0) -> list[int]:
    core.receive(to_host(MAC_P, src, dst, sport, port, flags=SYN, seq=1000 + sport,
                         vlan=vlan), t)
    return [tx.segment.flags for tx in core.frames_to_send()]


def test_duplicate_listen_is_refused_with_enomem() -> None:
    core = host()
    core.create_listen(IP_P, PORT)
    with pytest.raises(CmError) as info:
        core.create_listen(IP_P, PORT)
    assert info.value.errno == errno.ENOMEM
    core.create_listen(None, PORT + 1)
    with pytest.raises(CmError):  # the wildcard matches any address
        core.create_listen(IP_P, PORT + 1)


def test_backlog_drop_is_strictly_greater() -> None:
    core = host()
    core.create_listen(IP_P, PORT, backlog=1)
    assert syn(core, 5001) == [SYN | ACK]
    assert syn(core, 5002) == [SYN | ACK]  # pend 1 > 1 is false: backlog + 1 pending
    assert syn(core, 5003) == []
    assert core.stats["backlog_drops"] == 1
    assert len(core.conns()) == 2


def test_reused_listener_resets_the_backlog_count_and_it_can_go_negative() -> None:
    core = host()
    lid = core.create_listen(IP_P, PORT, backlog=0)
    syn(core, 5001)
    core.destroy_listen(lid, now_ns=0)  # SYN_RCVD child: RST, LISTENER_DESTROYED, freed
    core.frames_to_send()
    assert core.listener(lid) is None
    lid = core.create_listen(IP_P, PORT, backlog=0)
    syn(core, 5002)
    conn = core.conns()[-1]
    core.receive(to_host(MAC_P, IP_A, IP_P, 5002, PORT, flags=ACK, seq=6003,
                         ack=core.node(conn).loc_seq_num), 0)  # type: ignore[union-attr]
    # an MPA request holds the node for the application through the destroy
    from helpers.mpa_bytes import frame
    core.receive(to_host(MAC_P, IP_A, IP_P, 5002, PORT, flags=ACK, seq=6003,
                         ack=core.node(conn).loc_seq_num, payload=frame()), 0)  # type: ignore[union-attr]
    core.destroy_listen(lid, now_ns=0)
    core.frames_to_send()
    assert core.listener(lid).state is ListenerState.PASSIVE  # type: ignore[union-attr]
    again = core.create_listen(IP_P, PORT, backlog=0)
    assert again == lid and core.listener(lid).pend_accepts_cnt == 0  # type: ignore[union-attr]
    core.reject(conn, now_ns=0)  # old child still counted: it may go below zero later
    core.receive(to_host(MAC_P, IP_A, IP_P, 5002, PORT, flags=RST, seq=0), 0)
    assert core.listener(lid).pend_accepts_cnt == -1  # type: ignore[union-attr]


def test_wildcard_listener_has_one_child_per_local_address_of_its_family() -> None:
    core = host()
    core.add_address(bytes([10, 0, 1, 2]), vlan=7)
    lid = core.create_listen(None, PORT)
    view = core.listener(lid)
    assert view is not None and view.wildcard
    assert sorted(c[0] for c in view.children) == sorted([IP_P, bytes([10, 0, 1, 2])])
    assert syn(core, 5001) == [SYN | ACK]
    assert syn(core, 5002, dst=bytes([10, 0, 1, 2]), vlan=7) == [SYN | ACK]
    assert syn(core, 5003, dst=IP6_P, src=IP6_A) == []  # IPv6 kept apart


def test_address_added_later_gets_a_wildcard_child() -> None:
    core = host()
    lid = core.create_listen(None, PORT)
    core.add_address(bytes([10, 0, 2, 2]))
    assert any(c[0] == bytes([10, 0, 2, 2]) for c in core.listener(lid).children)  # type: ignore[union-attr]
    assert syn(core, 5001, dst=bytes([10, 0, 2, 2])) == [SYN | ACK]


def test_ipv6_listener_does_not_take_ipv4_syns() -> None:
    core = host()
    core.create_listen(None, PORT, ipv6=True)
    assert syn(core, 5001) == []
    assert syn(core, 5002, dst=IP6_P, src=IP6_A) == [SYN | ACK]


def test_specific_listener_matches_its_vlan_only() -> None:
    core = host(vlan=10)
    core.create_listen(IP_P, PORT)
    assert core.listener(1).vlan_id == 10  # type: ignore[union-attr]
    assert syn(core, 5001, vlan=None) == []
    assert syn(core, 5002, vlan=11) == []
    assert syn(core, 5003, vlan=10) == [SYN | ACK]
    [synack_conn] = core.conns()
    assert core.node(synack_conn).vlan_id == 10  # type: ignore[union-attr]


def test_syn_without_listener_is_silent_unless_the_host_stack_resets() -> None:
    assert syn(host(), 5001) == []
    core = host(CmConfig(host_stack_rst=True))
    core.receive(to_host(MAC_P, IP_A, IP_P, 5001, PORT, flags=SYN, seq=41), 0)
    [rst] = core.frames_to_send()
    assert (rst.segment.flags, rst.segment.seq, rst.segment.ack) == (RST | ACK, 0, 42)
    assert core.conns() == []


def test_segment_for_no_node_that_is_not_a_syn_is_dropped_with_a_reason() -> None:
    core = host()
    core.create_listen(IP_P, PORT)
    core.receive(to_host(MAC_P, IP_A, IP_P, 5001, PORT, flags=ACK, seq=1, ack=2), 0)
    assert core.frames_to_send() == [] and core.conns() == []
    [rec] = list(core.trace.of_kind("segment_dropped"))  # type: ignore[union-attr]
    assert rec.fields["reason"] == "no node for this 4-tuple and not a SYN"


def test_syn_with_fin_or_rst_creates_no_node() -> None:
    core = host()
    core.create_listen(IP_P, PORT)
    core.receive(to_host(MAC_P, IP_A, IP_P, 5001, PORT, flags=SYN | 0x01, seq=1), 0)
    assert core.frames_to_send() == [] and core.conns() == []


def test_destroy_listen_resets_pending_nodes_and_keeps_requests_for_the_application(
        ) -> None:
    pair = make_pair()
    lid = pair.p.create_listen(IP_P, PORT)
    c1 = pair.a.connect(IP_A, IP_P, PORT, now_ns=0)
    pair.pump()
    [req] = pair.events("P")
    pair.p.destroy_listen(lid, now_ns=0)
    pair.pump()
    assert pair.p.node(req.conn).state is CmState.LISTENER_DESTROYED  # type: ignore[union-attr]
    # A's node got the RST in MPAREQ_SENT: v2 -> v1 retry on the same 4-tuple,
    # which now meets no listener and is dropped.
    assert pair.a.node(c1).state is CmState.SYN_SENT  # type: ignore[union-attr]
    assert pair.a.node(c1).mpa_frame_rev == 1  # type: ignore[union-attr]
    with pytest.raises(CmError):
        pair.p.destroy_listen(lid, now_ns=0)


def test_connect_to_unresolved_neighbour_fails_at_once_and_changes_nothing() -> None:
    core = CmCore("A", MAC_A, CmConfig(), seed=1)
    core.add_address(IP_A)
    core.set_neighbour(IP_P, None)
    with pytest.raises(CmError) as info:
        core.connect(IP_A, IP_P, PORT, now_ns=0)
    assert info.value.errno == errno.ENOMEM
    assert core.conns() == [] and core.frames_to_send() == [] and core.get_timer() is None
    core.set_neighbour(IP_P, MAC_P)
    core.connect(IP_A, IP_P, PORT, now_ns=0)
    fresh = CmCore("A", MAC_A, CmConfig(), seed=1)
    fresh.add_address(IP_A)
    fresh.set_neighbour(IP_P, MAC_P)
    fresh.connect(IP_A, IP_P, PORT, now_ns=0)
    assert core.frames_to_send()[0].segment == fresh.frames_to_send()[0].segment


def test_passive_syn_from_unresolved_neighbour_is_dropped_until_resolved() -> None:
    core = host()
    core.set_neighbour(IP_A, None)
    core.create_listen(IP_P, PORT)
    assert syn(core, 5001) == []
    core.set_neighbour(IP_A, PEER)
    assert syn(core, 5001, t=S_NS) == [SYN | ACK]  # the client's SYN resend succeeds


def test_loopback_runs_the_whole_exchange_off_the_wire() -> None:
    core = CmCore("L", MAC_A, CmConfig(), seed=2, trace=Trace())
    core.add_address(IP_A)
    core.create_listen(IP_A, PORT)
    conn = core.connect(IP_A, IP_A, PORT, private_data=b"lo", now_ns=0)
    req = core.next_event()
    assert req is not None and req.event is IwEvent.CONNECT_REQUEST
    core.accept(req.conn, now_ns=0)
    frames = core.frames_to_send()
    assert frames and all(tx.loopback for tx in frames)
    events = [core.next_event() for _ in range(2)]
    assert {(e.event, e.status) for e in events if e} == {(IwEvent.CONNECT_REPLY, 0),
                                                         (IwEvent.ESTABLISHED, 0)}
    assert core.node(conn).do_lpb and core.node(req.conn).do_lpb  # type: ignore[union-attr]
    assert all(tx.segment.dst_mac == MAC_A for tx in frames)


def test_gen1_frames_carry_the_ip_id_counter_and_ipv6_hop_limit_128() -> None:
    core = host(CmConfig(gen=1))
    core.create_listen(IP_P, PORT)
    core.create_listen(IP6_P, PORT)
    core.receive(to_host(MAC_P, IP_A, IP_P, 5001, PORT, flags=SYN, seq=1), 0)
    [v4] = core.frames_to_send()
    assert (v4.segment.ip_id, v4.segment.ttl, v4.segment.df) == (0x3B48, 64, True)
    core.receive(to_host(MAC_P, IP6_A, IP6_P, 5001, PORT, flags=SYN, seq=1), 0)
    [v6] = core.frames_to_send()
    assert v6.segment.ttl == 128
    g2 = host()
    g2.create_listen(IP6_P, PORT)
    g2.receive(to_host(MAC_P, IP6_A, IP6_P, 5001, PORT, flags=SYN, seq=1), 0)
    [g2v6] = g2.frames_to_send()
    assert (g2v6.segment.ttl, g2v6.segment.ip_id) == (64, 0)


def test_gen2_sends_nothing_before_the_address_handle_gen1_always_sends() -> None:
    for gen, expect_rst in ((2, False), (1, True)):
        core = host(CmConfig(gen=gen, ah_latency_ns=S_NS))
        lid = core.create_listen(IP_P, PORT)
        assert syn(core, 5001) == []  # SYN-ACK waits for the AH/qhash completion
        conn = core.conns()[0]
        core.destroy_listen(lid, now_ns=0)
        rst = [tx.segment.flags for tx in core.frames_to_send()]
        assert rst == ([RST | ACK] if expect_rst else [])
        if gen == 2:
            # no RST, no put: CLOSED with a leaked reference, named as such
            assert core.node(conn).state is CmState.CLOSED  # type: ignore[union-attr]
            leaks = list(core.trace.of_kind("kernel_leak"))  # type: ignore[union-attr]
            assert leaks and "leaked reference" in leaks[-1].fields["reason"]
        # the qhash completion still sends one stray SYN-ACK (irdma_send_syn_cqp_callback, hw.c)
        core.handle_timer(S_NS)
        assert [tx.segment.flags for tx in core.frames_to_send()] == [SYN | ACK]


def test_syn_ack_waits_for_the_ah_latency() -> None:
    core = host(CmConfig(ah_latency_ns=250_000))
    core.create_listen(IP_P, PORT)
    assert syn(core, 5001) == []
    assert core.get_timer() == 250_000
    core.handle_timer(250_000)
    [synack] = core.frames_to_send()
    assert synack.segment.flags == SYN | ACK and synack.segment.ack == 6002


BAD_MSS_LEN = bytes.fromhex("0203")  # MSS option with length 3
WS_LEN_0 = bytes.fromhex("0300")  # window scale with length 0


def test_bad_syn_options_gen1_reset_and_double_put_gen2_silent() -> None:
    for gen in (1, 2):
        core = host(CmConfig(gen=gen))
        core.create_listen(IP_P, PORT)
        core.receive(to_host(MAC_P, IP_A, IP_P, 5001, PORT, flags=SYN, seq=1,
                             options=BAD_MSS_LEN), 0)
        flags = [tx.segment.flags for tx in core.frames_to_send()]
        bugs = [r.fields["reason"] for r in core.trace.of_kind("kernel_bug")]  # type: ignore[union-attr]
        assert core.conns() == []
        if gen == 1:
            assert flags == [RST | ACK]
            assert bugs and "refcount underflow" in bugs[0]  # the double put
        else:
            assert flags == [] and bugs == []  # irdma_form_ah_cm_frame: no AH, no RST


def test_zero_length_option_would_hang_the_kernel_and_is_recorded() -> None:
    core = host()
    core.create_listen(IP_P, PORT)
    core.receive(to_host(MAC_P, IP_A, IP_P, 5001, PORT, flags=SYN, seq=1,
                         options=bytes.fromhex("020405b4") + WS_LEN_0), 0)
    assert core.frames_to_send() == []
    [bug] = list(core.trace.of_kind("kernel_bug"))  # type: ignore[union-attr]
    assert "infinite loop" in bug.fields["reason"]
    [(_conn, state, why)] = core.leak_report()
    assert state is CmState.LISTENING and why is not None and "stuck" in why
    fixed = host(CmConfig(quirks=Quirks(zero_len_option_loop=False)))
    fixed.create_listen(IP_P, PORT)
    fixed.receive(to_host(MAC_P, IP_A, IP_P, 5001, PORT, flags=SYN, seq=1,
                          options=WS_LEN_0), 0)
    assert fixed.conns() == [] and fixed.frames_to_send() == []


def test_syn_options_lower_the_mss_and_set_the_send_scale() -> None:
    core = host()
    core.create_listen(IP_P, PORT)
    core.receive(to_host(MAC_P, IP_A, IP_P, 5001, PORT, flags=SYN, seq=1, window=1000,
                         options=bytes.fromhex("0204040001030307")), 0)
    [synack] = core.frames_to_send()
    assert synack.segment.options == bytes.fromhex("0204040003030200")  # min(1460, 1024)
    view = core.node(core.conns()[0])
    assert view is not None and (view.mss, view.snd_wscale, view.snd_wnd) == (1024, 7,
                                                                             1000 << 7)


def test_syn_with_options_but_no_mss_falls_back_to_536() -> None:
    core = host()
    core.create_listen(IP_P, PORT)
    core.receive(to_host(MAC_P, IP_A, IP_P, 5001, PORT, flags=SYN, seq=1,
                         options=bytes.fromhex("01030302")), 0)
    [synack] = core.frames_to_send()
    assert synack.segment.options[:4] == bytes.fromhex("02040218")


def test_failed_ah_leaves_syn_rcvd_without_syn_ack_holding_a_backlog_slot() -> None:
    core = host(CmConfig(ah_create_fails=True))
    lid = core.create_listen(IP_P, PORT, backlog=0)
    assert syn(core, 5001) == []
    [conn] = core.conns()
    assert core.node(conn).state is CmState.SYN_RCVD  # type: ignore[union-attr]
    assert core.listener(lid).pend_accepts_cnt == 1  # type: ignore[union-attr]
    core.handle_timer(100 * S_NS)
    assert core.frames_to_send() == [] and core.get_timer() is None
    [(_, state, why)] = core.leak_report()
    assert state is CmState.SYN_RCVD and "the AH failed" in (why or "")
    core.receive(to_host(MAC_P, IP_A, IP_P, 5001, PORT, flags=RST, seq=0), 100 * S_NS)
    assert core.conns() == [] and core.listener(lid).pend_accepts_cnt == 0  # type: ignore[union-attr]
