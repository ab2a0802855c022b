"""Audit of the timers against cm.c: irdma_schedule_cm_timer (arms the one core timer only
when idle), irdma_cm_timer_tick (C int back-off, ack_rcvd, expiry), irdma_retrans_expired
(irdma_schedule_cm_timer, irdma_cm_timer_tick, irdma_retrans_expired)."""

from __future__ import annotations

from errno import ECONNRESET

import pytest
from helpers.audit_peer import (
    LPORT,
    MS,
    S_NS,
    Passive,
    connect,
    handshake,
    listen,
    make_host,
    reject_request,
    to_mpareq_sent,
    v2_request,
)
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.irdma.config import CmConfig, Quirks
from mpa_emu.stacks.irdma.states import CmState

from mpa_emu.wire.segment import ACK, FIN, RST, SYN

# HZ=1000, RETRANS=32 (irdma_cm_timer_tick: the C int HZ << n): 1, 3, 7, 15, 27, every 12 s to 315,
# three one jiffy apart
RESENDS_32_HZ1000 = ([1000, 3000, 7000, 15000] + [27000 + 12000 * k for k in range(25)]
                     + [315001, 315002, 315003])


def test_syn_schedule_with_retrans_32_at_hz_1000_as_compiled() -> None:
    p = make_host()
    a = connect(p)
    got = p.run_out()
    syns = [t // MS for t, s in got if s.flags == SYN]
    assert syns == RESENDS_32_HZ1000
    assert all(s == a.syn_seg for t, s in got if s.flags == SYN)  # the same buffer
    [(t_rst, rst)] = [(t, s) for t, s in got if s.flags & RST]
    assert t_rst == 316_003 * MS
    assert (rst.flags, rst.seq, rst.ack) == (RST | ACK, a.isn_h + 1, 0)
    [up] = p.ups
    assert (up.event, up.status, up.time_ns) == (IwEvent.CONNECT_REPLY, -ECONNRESET,
                                                 316_003 * MS)


def test_clean_cap_switch_gives_the_12_s_schedule() -> None:
    p = make_host(CmConfig(quirks=Quirks(backoff_int_shift=False)))
    connect(p)
    got = p.run_out()
    syns = [t // S_NS for t, s in got if s.flags == SYN]
    assert syns == [1, 3, 7, 15] + [27 + 12 * k for k in range(28)]
    assert [t // S_NS for t, s in got if s.flags & RST] == [27 + 12 * 28]  # 363 s


def test_hz_250_expires_at_340_004() -> None:
    p = make_host(CmConfig(hz=250))
    connect(p)
    got = p.run_out()
    syns = [t // MS for t, s in got if s.flags == SYN]
    assert syns[:5] == [1000, 3000, 7000, 15000, 27000]
    assert syns[-2:] == [339_000, 339_004]
    assert [t // MS for t, s in got if s.flags & RST] == [340_004]


def test_retrans_8_schedule_and_mpa_request_not_resent_after_ack_rcvd() -> None:
    p = make_host(CmConfig(retrans=8))
    a, req = to_mpareq_sent(p)
    end = a.isn_h + 1 + len(req.payload)
    assert a.to_core(flags=ACK, ack=end) == []  # pure ACK: ack_rcvd
    got = p.run_out()
    # no resend at all; the countdown still runs to 1+2+4+8+12*4 = 75 s
    [(t, rst)] = got
    assert t == 75 * S_NS and (rst.flags, rst.seq, rst.ack) == (RST | ACK, end, 5001)
    assert p.ups[-1].status == -ECONNRESET


def test_mpa_request_resent_identically_until_acked() -> None:
    p = make_host(CmConfig(retrans=8))
    _, req = to_mpareq_sent(p)
    got = p.at(8 * S_NS)
    assert [(t // S_NS, s) for t, s in got] == [(1, req), (3, req), (7, req)]


def test_syn_rcvd_expiry_frees_silently() -> None:
    # irdma_retrans_expired: SYN_RCVD -> rem_ref, no RST, no upcall
    p = make_host(CmConfig(retrans=8))
    listen(p)
    pas = Passive(p, 1)
    [synack] = pas.syn()
    got = p.run_out()
    assert [t // S_NS for t, s in got] == [1, 3, 7, 15, 27, 39, 51, 63]
    assert all(s == synack for _, s in got)
    assert p.core.conns() == [] and p.ups == []
    assert p.core.listener(1).pend_accepts_cnt == 0  # type: ignore[union-attr]


def test_fin_wait1_expiry_sends_a_rst_and_frees() -> None:
    p = make_host(CmConfig(retrans=8))
    req = v2_request()
    conn = handshake(p, req).conn()
    rej, _ = reject_request(p, conn)
    got = p.run_out()
    assert [t // S_NS for t, s in got if s == rej] == [1, 3, 7, 15, 27, 39, 51, 63]
    [(t, rst)] = [(t, s) for t, s in got if s.flags & RST]
    assert t == 75 * S_NS
    assert (rst.seq, rst.ack) == (rej.seq + len(rej.payload) + 1, 1001 + len(req))
    assert p.core.node(conn) is None


def test_last_ack_expiry_sends_a_rst_and_frees() -> None:
    p = make_host(CmConfig(retrans=8))
    listen(p)
    pas = Passive(p, 1)
    pas.syn()
    pas.ack()
    [fin] = pas.ack(extra=FIN)
    assert fin.flags == ACK | FIN
    got = p.run_out()
    assert [t // S_NS for t, s in got if s.flags & RST] == [75]
    assert p.core.conns() == [] and p.ups == []


def test_a_new_entry_slips_to_the_pending_expiry_of_another_node() -> None:
    # irdma_schedule_cm_timer: node 1 is between its 5th resend (27 s) and the next (39 s); node 2's
    # first SYN at 28 s would be due at 29 s but the core timer is pending until 39 s.
    p = make_host()
    connect(p)
    p.at(28 * S_NS)
    p.core.connect(p.ip_h, p.ip_x, LPORT + 1, now_ns=p.now)
    [syn2] = p.drain()
    got = p.at(40 * S_NS)
    # (within one tick the kernel walks its node hash: the order is not defined)
    assert sorted((t // S_NS, s.dport) for t, s in got) == [(39, LPORT), (39, LPORT + 1)]
    assert syn2.dport == LPORT + 1
    # the back-off restarts from the late tick: node 2's second resend is 39 + 2 s
    assert [(t // S_NS, s.dport) for t, s in p.at(42 * S_NS)] == [(41, LPORT + 1)]


def test_expired_syn_sent_is_closed_before_the_reset_and_aborted() -> None:
    # irdma_retrans_expired sets CLOSED first; the RST then the ABORTED upcall
    p = make_host(CmConfig(retrans=1))
    a = connect(p)
    got = p.run_out()
    assert [(t // S_NS, s.flags) for t, s in got] == [(1, SYN), (3, RST | ACK)]
    assert p.core.node(a.conn) is None
    assert p.ups[0].status == -ECONNRESET


@pytest.mark.parametrize("gen", [1, 2])
def test_closing_node_has_no_timer_and_lingers(gen: int) -> None:
    p = make_host(CmConfig(gen=gen))
    req = v2_request()
    conn = handshake(p, req).conn()
    _, fin_end = reject_request(p, conn)
    p.send(p.seg(flags=FIN, seq=1001 + len(req), ack=fin_end))
    assert p.run_out() == []
    view = p.core.node(conn)
    assert view is not None and view.state == CmState.CLOSING
