"""Retransmission schedule, expiry and the single shared core timer in virtual time
(irdma_schedule_cm_timer, irdma_cm_timer_tick)."""

from __future__ import annotations

from errno import ECONNRESET

from helpers.cm_harness import IP_A, IP_P, MAC_A, MAC_P, MS, PORT, S_NS, answer
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.contract.trace import Trace
from mpa_emu.stacks.irdma.config import CmConfig, Quirks
from mpa_emu.stacks.irdma.core import CmCore
from mpa_emu.stacks.irdma.timing import backoff_gap, c_int_shift, retransmit_schedule

from mpa_emu.wire.segment import ACK, RST, SYN


def test_int_shift_is_taken_mod_32_and_wraps_to_a_negative_int() -> None:
    assert c_int_shift(1000, 21) == 1000 << 21
    assert c_int_shift(1000, 22) < 0  # 4_194_304_000 does not fit an int
    assert c_int_shift(1000, 29) == 0
    assert c_int_shift(1000, 32) == 1000  # count mod 32


def test_backoff_gaps_as_compiled_with_hz_1000() -> None:
    assert [backoff_gap(1000, n) for n in (1, 2, 3, 4, 5)] == [2000, 4000, 8000, 12000,
                                                                12000]
    assert backoff_gap(1000, 22) == 12000  # negative int -> huge unsigned -> capped
    assert [backoff_gap(1000, n) for n in (29, 30, 31)] == [0, 0, 0]
    assert backoff_gap(1000, 32) == 1000


def test_schedule_retrans_32_hz_1000_expires_near_316_003_s() -> None:
    resends, expiry = retransmit_schedule(1000, 32)
    expected = [1000, 3000, 7000, 15000] + [27000 + 12000 * k for k in range(25)] + [
        315001, 315002, 315003]
    assert resends == expected
    assert expiry == 316003


def test_schedule_retrans_32_hz_250_expires_near_340_s() -> None:
    resends, expiry = retransmit_schedule(250, 32)
    assert len(resends) == 32
    assert resends[-2] == 339 * 250 and resends[-1] == 339 * 250 + 1
    assert expiry == 340 * 250 + 1


def test_schedule_retrans_8_expires_at_75_s() -> None:
    resends, expiry = retransmit_schedule(1000, 8)
    assert resends == [s * 1000 for s in (1, 3, 7, 15, 27, 39, 51, 63)]
    assert expiry == 75000


def test_clean_cap_switch_gives_363_s() -> None:
    resends, expiry = retransmit_schedule(1000, 32, int_shift=False)
    assert resends[-1] == 351000 and expiry == 363000


def lone_host(cfg: CmConfig) -> CmCore:
    core = CmCore("A", MAC_A, cfg, seed=3, trace=Trace())
    core.add_address(IP_A)
    core.set_neighbour(IP_P, MAC_P)
    return core


def run_alone(core: CmCore, until_ns: int) -> list[tuple[int, str, int]]:
    """Fire the timers of a host whose peer never answers; (time, comment, flags)."""
    out = [(0, tx.comment, tx.segment.flags) for tx in core.frames_to_send()]
    while (t := core.get_timer()) is not None and t <= until_ns:
        core.handle_timer(t)
        out += [(t, tx.comment, tx.segment.flags) for tx in core.frames_to_send()]
    return out


def syn_times(cfg: CmConfig) -> tuple[list[int], list[tuple[int, str, int]], CmCore, int]:
    core = lone_host(cfg)
    conn = core.connect(IP_A, IP_P, PORT, now_ns=0)
    log = run_alone(core, 2000 * S_NS)
    times = [t for t, _, f in log if f == SYN]
    return times, log, core, conn


def test_unanswered_syn_follows_the_compiled_schedule_and_aborts_with_reset() -> None:
    times, log, core, conn = syn_times(CmConfig())
    resends, expiry = retransmit_schedule(1000, 32)
    assert times == [0] + [r * MS for r in resends]
    assert all(log[i][1].startswith(f"irdma_cm_timer_tick: retransmit #{i} of "
                                    "irdma_send_syn") for i in range(1, 33))
    t_rst, comment, flags = log[-1]
    assert (t_rst, flags) == (expiry * MS, RST | ACK)
    assert "irdma_retrans_expired SYN_SENT -> CLOSED" in comment
    up = core.next_event()
    assert up is not None and (up.event, up.status) == (IwEvent.CONNECT_REPLY, -ECONNRESET)
    assert up.time_ns == 316_003 * MS
    assert core.node(conn) is None and core.get_timer() is None


def test_hz_250_and_retrans_8_and_clean_cap_change_the_real_schedule() -> None:
    t250, log250, _, _ = syn_times(CmConfig(hz=250))
    assert log250[-1][0] == 340_004 * MS and len(t250) == 33
    t8, log8, _, _ = syn_times(CmConfig(retrans=8))
    assert t8 == [s * S_NS for s in (0, 1, 3, 7, 15, 27, 39, 51, 63)]
    assert log8[-1][0] == 75 * S_NS
    tclean, logclean, _, _ = syn_times(CmConfig(quirks=Quirks(backoff_int_shift=False)))
    assert tclean[-1] == 351 * S_NS and logclean[-1][0] == 363 * S_NS


def test_retransmission_resends_identical_bytes_including_the_old_ack() -> None:
    core = lone_host(CmConfig(retrans=8))
    core.connect(IP_A, IP_P, PORT, now_ns=0)
    [syn] = core.frames_to_send()
    isn = syn.segment.seq
    # the peer answers; A's MPA request is then never acknowledged
    core.receive(answer(syn.segment, flags=SYN | ACK, seq=5000, ack=isn + 1), 0)
    _, req = core.frames_to_send()
    # a later segment with data moves rcv_nxt, but a resend keeps its original ack
    core.handle_timer(S_NS)
    [again] = core.frames_to_send()
    assert again.segment == req.segment
    assert again.comment == ("irdma_cm_timer_tick: retransmit #1 of "
                             "irdma_send_mpa_request: SYN_SENT -> MPAREQ_SENT")


def test_acked_mpa_request_stops_resends_but_the_countdown_aborts_at_expiry() -> None:
    core = lone_host(CmConfig(retrans=8))
    conn = core.connect(IP_A, IP_P, PORT, now_ns=0)
    [syn] = core.frames_to_send()
    isn = syn.segment.seq
    core.receive(answer(syn.segment, flags=SYN | ACK, seq=5000, ack=isn + 1), 0)
    _, req = core.frames_to_send()
    end = isn + 1 + len(req.segment.payload)
    core.receive(answer(syn.segment, flags=ACK, seq=5001, ack=end), 10 * MS)
    assert core.node(conn).ack_rcvd  # type: ignore[union-attr]
    log = run_alone(core, 200 * S_NS)
    assert [f for _, _, f in log] == [RST | ACK]  # no resend, only the final RST
    assert log[0][0] == 75 * S_NS
    up = core.next_event()
    assert up is not None and up.status == -ECONNRESET


def test_a_new_entry_waits_for_the_pending_tick_of_another_node() -> None:
    core = lone_host(CmConfig())
    core.connect(IP_A, IP_P, PORT, now_ns=0)
    run_alone(core, 16 * S_NS)  # resends at 1, 3, 7, 15; next tick armed for 27 s
    assert core.get_timer() == 27 * S_NS
    c2 = core.connect(IP_A, IP_P, PORT + 1, now_ns=16 * S_NS)
    core.frames_to_send()
    assert core.get_timer() == 27 * S_NS  # not 17 s: the timer is pending (irdma_schedule_cm_timer)
    log = run_alone(core, 34 * S_NS)
    second = [t for t, c, _ in log if c.endswith("SYN_SENT") and "#" in c
              and t >= 27 * S_NS]
    node2 = core.node(c2)
    assert node2 is not None
    # conn 2: first resend at 27 s (slipped 10 s), then +2 s, +4 s as usual
    mine = [t for t, c, f in log if f == SYN]
    assert 27 * S_NS in mine and 29 * S_NS in mine and 33 * S_NS in mine
    assert 17 * S_NS not in mine
    assert second


def test_idle_core_has_no_deadline_and_costs_nothing() -> None:
    core = lone_host(CmConfig())
    assert core.get_timer() is None
    core.handle_timer(10 * S_NS)
    assert core.frames_to_send() == [] and core.next_event() is None


def test_cleaned_entries_leave_the_heap_and_live_ones_come_due_in_order() -> None:
    """The core timer drops cleaned-up entries early (so their frames go), yet hands out
    the live ones exactly as a heap keeping everything would: by due jiffy, then in the
    order they were queued."""
    from mpa_emu.stacks.irdma.node import CmNode
    from mpa_emu.stacks.irdma.timers import COMPACT_MIN, CoreTimer

    timer = CoreTimer(hz=1000)
    expected: list[tuple[int, int, CmNode]] = []
    count = 3 * COMPACT_MIN
    for i in range(count):
        node = CmNode(i + 1, (b"\xc0\x00\x02\x01", 10000 + i, b"\xc0\x00\x02\x02", PORT,
                              0xFFFF))
        # dues 100..(100 + 36): many entries share a jiffy
        entry = timer.arm_close(node, (i * 7919) % 37)
        if i % 3:
            entry.live = False  # cleaned up, as irdma_cleanup_retrans_entry does
        else:
            expected.append((entry.due, i, node))
    assert len(timer._heap) < count  # the dead ones did not all wait for their jiffy
    expected.sort(key=lambda item: (item[0], item[1]))
    got = [(e.due, e.node) for j in range(200) for e in timer.due(j)]
    assert got == [(due, node) for due, _, node in expected]
