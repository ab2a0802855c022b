"""The canonical wire flows (accept, reject, close; RFC 5044 section 7), byte for byte, between two
CM cores."""

from __future__ import annotations

import struct
from errno import ECONNREFUSED

from helpers.cm_harness import IP_A, IP_P, MS, PORT, S_NS, Pair, answer, make_pair
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.irdma.core import CmCore
from mpa_emu.stacks.irdma.states import CmState

from mpa_emu.wire.segment import ACK, FIN, SYN

SYN_OPTS_1460 = bytes.fromhex("020405b403030200")  # MSS 1460, WS 2, EOL (irdma_send_syn)


def mpa(key: bytes, flags: int, pd: bytes, ird_word: int, ord_word: int) -> bytes:
    """An MPA v2 frame written out field by field from RFC 5044 section 7.1 and RFC 6581 section
    5."""
    return key + bytes([flags, 2]) + struct.pack("!HHH", len(pd) + 4, ird_word,
                                                 ord_word) + pd


REQ = b"MPA ID Req Frame"
REP = b"MPA ID Rep Frame"


def connect(pair: Pair, pdata: bytes = b"hello") -> int:
    pair.p.create_listen(IP_P, PORT)
    conn = pair.a.connect(IP_A, IP_P, PORT, private_data=pdata, now_ns=0)
    pair.pump()
    return conn


def test_accept_flow_is_the_spec_ladder_byte_for_byte(pair: Pair) -> None:
    conn = connect(pair)
    [req] = pair.events("P")
    pair.p.accept(req.conn, private_data=b"ok", now_ns=0)
    pair.pump()
    f = pair.frames()
    syn, synack, ack3, mpareq, ack_req, reply, ack_rep, rtr = (s.seg for s in f[:8])
    ia, ip_ = syn.seq, synack.seq
    L = 24 + 5
    R = 24 + 2
    assert [s.src for s in f[:8]] == ["A", "P", "A", "A", "P", "P", "A", "A"]
    # A connect: SYN seq=Ia ack=0 win=65535 MSS=1460,WS=2,EOL
    assert (syn.flags, syn.ack, syn.window, syn.options, syn.payload) == (
        SYN, 0, 65535, SYN_OPTS_1460, b"")
    assert (syn.sport, syn.dport) == (conn and pair.a.node(conn).loc_port, PORT)  # type: ignore[union-attr]
    # P: SYN|ACK seq=Ip ack=Ia+1, same options (min MSS)
    assert (synack.flags, synack.ack, synack.window, synack.options) == (
        SYN | ACK, ia + 1, 65535, SYN_OPTS_1460)
    # A: ACK, then ACK + MPA request, both seq=Ia+1 ack=Ip+1, no options, no PSH
    assert (ack3.flags, ack3.seq, ack3.ack, ack3.options, ack3.payload) == (
        ACK, ia + 1, ip_ + 1, b"", b"")
    assert (mpareq.flags, mpareq.seq, mpareq.ack) == (ACK, ia + 1, ip_ + 1)
    assert mpareq.payload == mpa(REQ, 0x50, b"hello", 0x8000 | 16, 0xC000 | 16)
    # P: pure ACK of the request
    assert (ack_req.flags, ack_req.seq, ack_req.ack, ack_req.payload) == (
        ACK, ip_ + 1, ia + 1 + L, b"")
    # P (QP, LSMM): the reply, READ chosen, P2P, IRD 127 / ORD min(255, 16)
    assert (reply.seq, reply.ack) == (ip_ + 1, ia + 1 + L)
    assert reply.payload == mpa(REP, 0x50, b"ok", 0x8000 | 127, 0x4000 | 16)
    # A: ACK of the reply, then the RTR from its QP
    assert (ack_rep.flags, ack_rep.seq, ack_rep.ack) == (ACK, ia + 1 + L, ip_ + 1 + R)
    assert rtr.seq == ia + 1 + L and rtr.payload
    assert all(s.seg.window == 65535 for s in f[:5])
    assert all(s.tx.comment for s in f)


def test_accept_flow_upcalls_carry_kernel_lengths_and_ird_ord(pair: Pair) -> None:
    conn = connect(pair)
    [req] = pair.events("P")
    assert req.event is IwEvent.CONNECT_REQUEST and req.status == 0
    # +4 quirk: PD_Length counts the RTR block and 4 bytes past the frame are reported
    assert (req.private_data, req.private_data_len) == (b"hello\0\0\0\0", 9)
    assert (req.ird, req.ord) == (127, 0)  # ird = node ird_size, ord not set
    assert (req.local_ip, req.local_port, req.remote_ip) == (IP_P, PORT, IP_A)
    pair.p.accept(req.conn, private_data=b"ok", now_ns=0)
    pair.pump()
    [rep] = pair.events("A")
    assert (rep.event, rep.conn, rep.status) == (IwEvent.CONNECT_REPLY, conn, 0)
    assert (rep.private_data_len, rep.ird, rep.ord) == (6, 16, 16)
    est = pair.events("P")[1]
    assert (est.event, est.status, est.ird, est.ord) == (IwEvent.ESTABLISHED, 0, 127, 16)
    assert pair.a.node(conn).state is CmState.OFFLOADED  # type: ignore[union-attr]
    assert pair.p.node(req.conn).state is CmState.OFFLOADED  # type: ignore[union-attr]


def test_frame_comments_name_function_and_transition(pair: Pair) -> None:
    connect(pair)
    comments = [s.tx.comment for s in pair.frames()]
    assert comments[0] == "irdma_send_syn: UNKNOWN -> SYN_SENT"
    assert comments[1].startswith("irdma_send_syn: SYN_RCVD")
    assert comments[2] == "irdma_send_ack: SYN_SENT -> MPAREQ_SENT"
    assert comments[3] == "irdma_send_mpa_request: SYN_SENT -> MPAREQ_SENT"
    assert comments[4] == "irdma_send_ack: ESTABLISHED -> MPAREQ_RCVD"


def test_reject_flow_is_the_spec_ladder_byte_for_byte(pair: Pair) -> None:
    conn = connect(pair)
    [req] = pair.events("P")
    pdata = b"go away"
    pair.p.reject(req.conn, private_data=pdata, now_ns=0)
    pair.pump()
    f = pair.frames()
    ia, ip_ = f[0].seg.seq, f[1].seg.seq
    L, R2 = 24 + 5, 24 + len(pdata)
    rej, a_ack, a_fin, p_ack = (s.seg for s in f[5:9])
    assert [s.src for s in f[5:9]] == ["P", "A", "A", "P"]
    # P: ACK|FIN + reply with R, seq=Ip+1
    assert (rej.flags, rej.seq, rej.ack) == (ACK | FIN, ip_ + 1, ia + 1 + L)
    assert rej.payload == mpa(REP, 0x70, pdata, 0x8000 | 127, 0x4000 | 16)
    assert f[5].tx.comment == "irdma_send_mpa_reject: MPAREQ_RCVD -> FIN_WAIT1"
    # A: ACK of the reply bytes (FIN not counted), then its own FIN
    assert (a_ack.flags, a_ack.seq, a_ack.ack) == (ACK, ia + 1 + L, ip_ + 1 + R2)
    assert (a_fin.flags, a_fin.seq, a_fin.ack) == (ACK | FIN, ia + 1 + L, ip_ + 2 + R2)
    # P: the first ACK failed check_seq; the FIN|ACK leads to TIME_WAIT and this ACK
    assert (p_ack.flags, p_ack.seq, p_ack.ack) == (ACK, ip_ + 2 + R2, ia + 2 + L)
    drops = [r for r in pair.p.trace.of_kind("segment_dropped")]  # type: ignore[union-attr]
    assert any("irdma_check_seq" in r.fields["reason"] for r in drops)
    [up] = pair.events("A")
    assert (up.event, up.status) == (IwEvent.CONNECT_REPLY, -ECONNREFUSED)
    assert (up.private_data, up.private_data_len) == (pdata + bytes(4), len(pdata) + 4)
    assert pair.a.node(conn) is None  # LAST_ACK -> CLOSED -> freed
    assert pair.p.node(req.conn).state is CmState.TIME_WAIT  # type: ignore[union-attr]


def test_time_wait_frees_after_the_close_timer_which_waits_for_a_pending_tick(
        pair: Pair) -> None:
    connect(pair)
    [req] = pair.events("P")
    pair.p.reject(req.conn, now_ns=0)
    pair.pump()
    # The reject armed the core timer for +1 s; the TIME_WAIT close entry (HZ/10) finds
    # it pending and is handled at that tick (irdma_schedule_cm_timer arms only an idle timer), not
    # at 100 ms.
    assert pair.p.get_timer() == 1 * S_NS
    pair.at(999 * MS)
    assert pair.p.node(req.conn) is not None
    pair.at(1 * S_NS)
    assert pair.p.node(req.conn) is None
    assert pair.p.conns() == [] and pair.a.conns() == []
    assert pair.p.listener(1) is not None  # the listener survives its children


def test_time_wait_lasts_100_ms_when_the_core_timer_is_idle(pair: Pair) -> None:
    connect(pair)
    [req] = pair.events("P")
    pair.drop = lambda sent: sent.src == "A"  # A's answers are replaced by hand below
    pair.p.reject(req.conn, now_ns=0)
    pair.pump()
    rej = pair.frames("P")[-1].seg
    fin_seq = pair.frames("A")[-1].seg.seq + 0  # A's last delivered frame: MPA request
    a_next = fin_seq + len(pair.frames("A")[-1].seg.payload)
    after_fin = rej.seq + len(rej.payload) + 1
    # the peer acknowledges the reject and its FIN: FIN_WAIT2, no timer (irdma_handle_ack_pkt)
    ack = answer(rej, flags=ACK, seq=a_next, ack=after_fin)
    pair.p.receive(ack, 0)
    assert pair.p.node(req.conn).state is CmState.FIN_WAIT2  # type: ignore[union-attr]
    pair.at(1500 * MS)  # the stale tick at 1 s finds nothing and leaves the timer idle
    assert pair.p.get_timer() is None
    fin = answer(rej, flags=ACK | FIN, seq=a_next, ack=after_fin)
    pair.p.receive(fin, 1500 * MS)
    assert pair.p.node(req.conn).state is CmState.TIME_WAIT  # type: ignore[union-attr]
    assert pair.p.get_timer() == 1600 * MS  # HZ/10
    pair.at(1599 * MS)
    assert pair.p.node(req.conn) is not None
    pair.at(1600 * MS)
    assert pair.p.node(req.conn) is None


def test_passive_close_of_a_rejected_initiator_ends_in_closed(pair: Pair) -> None:
    conn = connect(pair)
    [req] = pair.events("P")
    pair.p.reject(req.conn, now_ns=0)
    pair.pump()
    states = [(r.fields["old"], r.fields["new"]) for r in
              pair.a.trace.of_kind("state_changed") if r.fields["conn"] == conn]  # type: ignore[union-attr]
    assert states[-3:] == [("MPAREQ_SENT", "MPAREJ_RCVD"), ("MPAREJ_RCVD", "LAST_ACK"),
                           ("LAST_ACK", "CLOSED")]


def test_ipv6_flow_advertises_mss_1440() -> None:
    pair = make_pair(ipv6=True)
    from helpers.cm_harness import IP6_A, IP6_P
    pair.p.create_listen(IP6_P, PORT)
    pair.a.connect(IP6_A, IP6_P, PORT, now_ns=0)
    pair.pump()
    syn, synack = pair.frames()[0].seg, pair.frames()[1].seg
    assert syn.options == bytes.fromhex("020405a003030200")
    assert synack.options == bytes.fromhex("020405a003030200")
    assert pair.events("P")[0].event is IwEvent.CONNECT_REQUEST


def test_same_seed_gives_identical_frames() -> None:
    def run() -> list[tuple[str, bytes, int, int, int, bytes]]:
        pair = make_pair(seed_a=7, seed_p=9)
        connect(pair)
        req = pair.events("P")[0]
        pair.p.reject(req.conn, private_data=b"x", now_ns=0)
        pair.pump()
        pair.run_out()
        return [(s.tx.comment, s.seg.src_ip, s.seg.seq, s.seg.ack, s.seg.flags,
                 s.seg.payload) for s in pair.log]
    first = run()
    assert first == run()
    assert isinstance(CmCore, type)
