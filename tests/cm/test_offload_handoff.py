"""The hand-off to the offloaded QP (irdma_accept, irdma_cm_build_mpa_frame, irdma_init_tcp_ctx, the
CONNECTED event)."""

from __future__ import annotations

from errno import ECONNRESET

from helpers.cm_harness import IP_A, IP_P, MAC_A, MAC_P, PORT, S_NS, syn_rcvd, to_host
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.irdma.config import CmConfig
from mpa_emu.stacks.irdma.core import CmCore
from mpa_emu.stacks.irdma.states import CmState

from mpa_emu.wire import mpa
from mpa_emu.wire.segment import ACK

REQ = mpa.MpaFrame(request=True, rev=2, flags=0x50,
                   rtr=mpa.RtrBlock(ird=8, ord=4, write0=True, read0=True),
                   private_data=b"hi").to_bytes()


def requested(cfg: CmConfig | None = None) -> tuple[CmCore, int]:
    """A passive core whose hand-made peer sent SYN, ACK and an MPA request."""
    core, synack = syn_rcvd(cfg, seed=3)
    isn = synack.seq
    core.receive(to_host(MAC_P, IP_A, IP_P, 5000, PORT, flags=ACK, seq=101, ack=isn + 1,
                         payload=REQ, src_mac=MAC_A), 0)
    core.frames_to_send()
    req = core.next_event()
    assert req is not None and req.event is IwEvent.CONNECT_REQUEST
    return core, req.conn


def test_accept_hands_the_qp_exactly_the_node_numbers() -> None:
    core, conn = requested()
    before = core.node(conn)
    assert before is not None
    core.accept(conn, private_data=b"ok", now_ns=0)
    [reply] = core.frames_to_send()
    view = core.node(conn)
    assert view is not None and view.state is CmState.OFFLOADED and not view.ah_valid
    init = core.qp(conn).init
    assert (init.snd_nxt, init.rcv_nxt) == (before.loc_seq_num, before.rcv_nxt)
    assert (init.ird, init.ord, init.rtr_op, init.mpa_rev) == (127, 8, "read", 2)
    assert (init.active, init.mss, init.snd_wscale, init.rcv_wscale) == (False, 1460, 0, 2)
    assert reply.segment.seq == before.loc_seq_num and reply.segment.ack == 101 + len(REQ)
    assert reply.segment.payload == mpa.MpaFrame(
        request=False, rev=2, flags=0x50, rtr=mpa.RtrBlock(ird=127, ord=8, read0=True),
        private_data=b"ok").to_bytes()


def test_no_rtr_within_12_s_fails_the_accept_with_econnreset() -> None:
    core, conn = requested()
    core.accept(conn, now_ns=0)
    core.frames_to_send()
    assert core.next_event() is None  # ESTABLISHED waits for the RTS AE
    deadline = 12 * S_NS
    while (t := core.get_timer()) is not None and t < deadline:
        core.handle_timer(t)
        core.frames_to_send()
    assert core.node(conn) is not None and core.next_event() is None
    core.handle_timer(deadline)
    up = core.next_event()
    assert up is not None and (up.event, up.status) == (IwEvent.ESTABLISHED, -ECONNRESET)
    assert up.time_ns == deadline
    assert core.node(conn) is None


def test_gen1_accept_reports_established_without_waiting_for_rts() -> None:
    core, conn = requested(CmConfig(gen=1))
    core.accept(conn, now_ns=0)
    up = core.next_event()
    assert up is not None and (up.event, up.status, up.ird, up.ord) == (
        IwEvent.ESTABLISHED, 0, 127, 8)
    assert core.listener(1).pend_accepts_cnt == 0  # type: ignore[union-attr]


def test_close_of_an_offloaded_node_frees_it_without_a_cm_packet() -> None:
    core, conn = requested(CmConfig(gen=1))
    core.accept(conn, now_ns=0)
    core.frames_to_send()
    core.close(conn, now_ns=0)
    assert core.node(conn) is None and core.frames_to_send() == []


def test_listener_destroyed_before_rts_cannot_reset_without_ah_and_leaks() -> None:
    core, conn = requested()
    core.accept(conn, now_ns=0)
    core.frames_to_send()
    core.destroy_listen(1, now_ns=0)
    assert core.frames_to_send() == []  # the AH was freed by accept (GEN_2)
    view = core.node(conn)
    assert view is not None and view.state is CmState.CLOSED
    reasons = [why for c, _, why in core.leak_report() if c == conn]
    assert reasons and "leaked reference" in (reasons[0] or "")


def test_established_connection_leaves_no_deadline_behind() -> None:
    from helpers.cm_harness import make_pair
    pair = make_pair()
    pair.p.create_listen(IP_P, PORT)
    pair.a.connect(IP_A, IP_P, PORT, now_ns=0)
    pair.pump()
    pair.p.accept(pair.events("P")[0].conn, now_ns=0)
    pair.pump()
    assert [u.event for u in pair.events("P")] == [IwEvent.CONNECT_REQUEST,
                                                   IwEvent.ESTABLISHED]
    # only the kernel's stale core-timer tick (armed by the SYN-ACK entry) remains
    assert pair.p.get_timer() == S_NS
    pair.at(S_NS)
    assert pair.p.get_timer() is None and pair.a.get_timer() is None
