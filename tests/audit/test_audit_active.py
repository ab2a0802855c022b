"""Audit of the active side against cm.c (irdma_connect, irdma_record_ird_ord,
irdma_send_syn, irdma_handle_synack_pkt, irdma_check_syn, irdma_handle_ack_pkt in
SYN_SENT/MPAREQ_SENT, irdma_handle_rcv_mpa, irdma_negotiate_mpa_v2_ird_ord as initiator,
irdma_handle_rst_pkt v2 -> v1, irdma_handle_fin_pkt in MPAREQ_SENT and MPAREJ_RCVD)."""

from __future__ import annotations

import struct
from errno import ECONNREFUSED, ECONNRESET

import pytest
from helpers.audit_peer import (
    KEY_REP,
    KEY_REQ,
    S_NS,
    SYN_OPTS_1460,
    connect,
    make_host,
    mpa_frame,
    to_mpareq_sent,
    v2_reply,
)
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.irdma.config import CmConfig
from mpa_emu.stacks.irdma.states import CmState

from mpa_emu.wire.segment import ACK, FIN, RST, SYN


def test_syn_then_ack_and_v2_request_have_the_kernel_shape() -> None:
    p = make_host()
    a = connect(p, b"abc", ird=7, ord_=9)
    syn = a.syn_seg
    assert (syn.ack, syn.window, syn.options, syn.payload) == (
        0, 0xFFFF, bytes.fromhex("020405b403030200"), b"")
    ack, req = a.synack()
    assert (ack.flags, ack.seq, ack.ack, ack.payload) == (ACK, a.isn_h + 1, 5001, b"")
    assert (req.flags, req.seq, req.ack) == (ACK, a.isn_h + 1, 5001)
    # C|S, rev 2, PD_Length 4 + 3, P2P | IRD 7, WRITE | READ | ORD 9
    assert req.payload == KEY_REQ + bytes([0x50, 2]) + struct.pack(
        "!HHH", 7, 0x8007, 0xC009) + b"abc"
    assert p.core.node(a.conn).state == CmState.MPAREQ_SENT  # type: ignore[union-attr]


@pytest.mark.parametrize(("ird", "ord_", "words"), [
    (16, 0, (0x8010, 0xC001)),       # irdma_record_ird_ord: ord 0 -> 1 with READ
    (500, 999, (0x807F, 0xC0FF)),    # clamped to max_hw_ird 127 / max_hw_ord 255
])
def test_record_ird_ord_in_the_request(ird: int, ord_: int, words: tuple[int, int]) -> None:
    p = make_host()
    _, req = to_mpareq_sent(p, ird=ird, ord_=ord_)
    assert struct.unpack_from("!HH", req.payload, 20) == words


def test_synack_with_options_but_no_mss_sets_536_and_window_scale() -> None:
    p = make_host()
    a = connect(p)
    a.synack(options=bytes.fromhex("01030305"))
    view = p.core.node(a.conn)
    assert view is not None and (view.mss, view.snd_wscale) == (536, 5)
    assert view.snd_wnd == 65535 << 5


def test_payload_on_ack_in_syn_sent_stops_the_syn_retransmission() -> None:
    p = make_host()
    a = connect(p)
    # rcv_nxt is 0 in SYN_SENT: seq 100 is inside [0, 65535]; ack = ISN + 1
    assert a.to_core(flags=ACK, seq_off=100 - 5000, ack=a.isn_h + 1, payload=b"x" * 30) == []
    view = p.core.node(a.conn)
    assert view is not None and view.state == CmState.SYN_SENT and not view.retransmitting
    assert p.at(200 * S_NS) == []
    assert p.core.node(a.conn) is not None and p.ups == []


def test_syn_in_syn_sent_resets_with_ack_0_and_aborts() -> None:
    p = make_host()
    a = connect(p)
    s = a.syn_seg
    [rst] = p.send(p.seg(flags=SYN, seq=77, sport=s.dport, dport=s.sport))
    assert (rst.flags, rst.seq, rst.ack) == (RST | ACK, a.isn_h + 1, 0)
    [up] = p.ups
    assert (up.event, up.status) == (IwEvent.CONNECT_REPLY, -ECONNRESET)
    assert p.core.node(a.conn) is None


def test_synack_with_a_wrong_ack_resets_and_aborts() -> None:
    p = make_host()
    a = connect(p)
    [rst] = a.synack(ack_off=1)
    assert (rst.flags, rst.seq, rst.ack) == (RST | ACK, a.isn_h + 1, 0)
    assert p.ups[0].status == -ECONNRESET


def test_duplicate_synack_in_mpareq_sent_is_ignored() -> None:
    p = make_host()
    a, _ = to_mpareq_sent(p)
    assert a.synack() == []
    assert p.core.node(a.conn).state == CmState.MPAREQ_SENT  # type: ignore[union-attr]


def test_reject_with_piggy_backed_fin_acks_the_reply_then_sends_fin() -> None:
    p = make_host()
    a, req = to_mpareq_sent(p, b"abc")
    end = a.isn_h + 1 + len(req.payload)
    rej = v2_reply(b"go away", reject=True)
    ack, fin = a.to_core(flags=ACK | FIN, ack=end, payload=rej)
    assert (ack.flags, ack.seq, ack.ack) == (ACK, end, 5001 + len(rej))
    assert (fin.flags, fin.seq, fin.ack) == (ACK | FIN, end, 5001 + len(rej) + 1)
    [up] = p.ups
    assert (up.event, up.status) == (IwEvent.CONNECT_REPLY, -ECONNREFUSED)
    assert up.private_data_len == 4 + 7 and up.private_data[:7] == b"go away"
    assert p.core.node(a.conn).state == CmState.LAST_ACK  # type: ignore[union-attr]
    assert a.to_core(flags=ACK, seq_off=1 + len(rej) + 1, ack=end + 1) == []
    assert p.core.node(a.conn) is None


def test_reject_without_fin_leaves_mpareJ_rcvd_until_close() -> None:
    p = make_host()
    a, req = to_mpareq_sent(p)
    end = a.isn_h + 1 + len(req.payload)
    [ack] = a.to_core(flags=ACK, ack=end, payload=v2_reply(reject=True))
    assert ack.flags == ACK
    assert p.run_out() == []
    assert p.core.node(a.conn).state == CmState.MPAREJ_RCVD  # type: ignore[union-attr]
    p.core.close(a.conn, now_ns=p.now)
    assert p.drain() == [] and p.core.node(a.conn) is None


def test_good_reply_offloads_and_acks_the_reply_bytes_not_a_fin() -> None:
    p = make_host(CmConfig(gen=1))
    a, req = to_mpareq_sent(p)
    end = a.isn_h + 1 + len(req.payload)
    rep = v2_reply(b"ok")
    out = a.to_core(flags=ACK | FIN, ack=end, payload=rep)
    assert (out[0].flags, out[0].ack) == (ACK, 5001 + len(rep))
    assert not any(s.flags & FIN for s in out)
    assert p.core.node(a.conn).state == CmState.OFFLOADED  # type: ignore[union-attr]


@pytest.mark.parametrize(("reply", "why"), [
    (v2_reply(ird=16, ord_=17), "own IRD 16 < peer ORD 17: -EINVAL"),
    (v2_reply(ird=0, ord_=1, read=True), "peer IRD 0 with READ: -EOPNOTSUPP"),
    (v2_reply(p2p=False), "no P2P"),
    (v2_reply(read=False, write=False), "no RTR bit"),
    (mpa_frame(key=KEY_REQ, rev=2, flags=0x50, rtr=(0x8010, 0x4010)), "request key"),
    (v2_reply() + bytes(544 - 24 + 1), "segment over 544 bytes"),
])
def test_bad_reply_resets_and_reports_econnreset(reply: bytes, why: str) -> None:
    p = make_host()
    a, req = to_mpareq_sent(p, b"mine", ird=16)
    end = a.isn_h + 1 + len(req.payload)
    out = a.to_core(flags=ACK, ack=end, payload=reply)
    [rst] = out
    assert (rst.flags, rst.seq, rst.ack) == (RST | ACK, end, 5001 + len(reply)), why
    [up] = p.ups
    assert (up.event, up.status) == (IwEvent.CONNECT_REPLY, -ECONNRESET)
    # the upcall carries pdata_buf as it is: the node's own request data
    assert up.private_data == b"mine"


def test_peer_0x3fff_skips_the_initiator_limits() -> None:
    p = make_host()
    a, req = to_mpareq_sent(p, ird=1)
    end = a.isn_h + 1 + len(req.payload)
    a.to_core(flags=ACK, ack=end, payload=v2_reply(ird=0x3FFF, ord_=100))
    assert p.core.node(a.conn).state == CmState.OFFLOADED  # type: ignore[union-attr]


def test_v1_reply_to_a_v2_request_is_accepted_and_the_node_drops_to_rev_1() -> None:
    p = make_host()
    a, req = to_mpareq_sent(p)
    end = a.isn_h + 1 + len(req.payload)
    a.to_core(flags=ACK, ack=end, payload=mpa_frame(key=KEY_REP, rev=1, flags=0x40))
    view = p.core.node(a.conn)
    assert view is not None and (view.state, view.mpa_frame_rev) == (CmState.OFFLOADED, 1)


def test_fin_in_mpareq_sent_aborts_with_a_rst() -> None:
    p = make_host()
    a, req = to_mpareq_sent(p)
    end = a.isn_h + 1 + len(req.payload)
    [rst] = a.to_core(flags=ACK | FIN, ack=end)
    assert (rst.flags, rst.seq, rst.ack) == (RST | ACK, end, 5002)  # rcv_nxt++ first
    assert p.ups[0].status == -ECONNRESET and p.core.node(a.conn) is None


def test_rst_in_mpareq_sent_retries_with_a_v1_syn_then_a_v1_request() -> None:
    p = make_host()
    a, req = to_mpareq_sent(p, b"abc")
    end = a.isn_h + 1 + len(req.payload)
    [syn] = a.to_core(flags=RST, ack=0)
    assert (syn.flags, syn.seq, syn.ack, syn.sport) == (SYN, end, 0, a.syn_seg.sport)
    assert syn.options == bytes.fromhex("020405b403030200")
    s = a.syn_seg
    ack1, req1 = p.send(p.seg(flags=SYN | ACK, seq=9000, ack=end + 1,
                             options=SYN_OPTS_1460, sport=s.dport, dport=s.sport))
    assert ack1.flags == ACK
    assert req1.payload == KEY_REQ + bytes([0x40, 1]) + struct.pack("!H", 3) + b"abc"
    # a v2 reply is now refused (rev 2 > mpa_frame_rev 1)
    [rst] = p.send(p.seg(flags=ACK, seq=9001, ack=end + 1 + len(req1.payload),
                         payload=v2_reply(), sport=s.dport, dport=s.sport))
    assert rst.flags == RST | ACK and p.ups[0].status == -ECONNRESET


def test_rst_after_the_v1_retry_aborts_without_a_rst() -> None:
    p = make_host()
    a = connect(p)
    [syn1] = a.to_core(flags=RST | ACK, seq_off=-5000, ack=a.isn_h + 1)
    assert syn1.flags == SYN
    assert a.to_core(flags=RST | ACK, seq_off=-5000, ack=a.isn_h + 2) == []
    [up] = p.ups
    assert (up.event, up.status) == (IwEvent.CONNECT_REPLY, -ECONNRESET)
    assert p.core.node(a.conn) is None


def test_rst_in_mpareJ_rcvd_does_nothing_and_the_node_lingers() -> None:
    p = make_host()
    a, req = to_mpareq_sent(p)
    end = a.isn_h + 1 + len(req.payload)
    rej = v2_reply(reject=True)
    a.to_core(flags=ACK, ack=end, payload=rej)
    assert a.to_core(flags=RST, seq_off=1 + len(rej), ack=0) == []
    assert p.core.node(a.conn).state == CmState.MPAREJ_RCVD  # type: ignore[union-attr]


def test_rst_in_last_ack_frees_the_active_node() -> None:
    p = make_host()
    a, req = to_mpareq_sent(p)
    end = a.isn_h + 1 + len(req.payload)
    rej = v2_reply(reject=True)
    a.to_core(flags=ACK | FIN, ack=end, payload=rej)
    assert p.core.node(a.conn).state == CmState.LAST_ACK  # type: ignore[union-attr]
    assert a.to_core(flags=RST, seq_off=2 + len(rej), ack=0) == []
    assert p.core.node(a.conn) is None


def test_a_v2_reject_is_negotiated_too_and_the_refused_upcall_carries_the_result() -> None:
    # irdma_parse_mpa runs irdma_negotiate_mpa_v2_ird_ord for every rev 2 frame,
    # rejects included: ord_size = min(16, peer IRD 2)
    p = make_host()
    a, req = to_mpareq_sent(p, ird=16, ord_=16)
    end = a.isn_h + 1 + len(req.payload)
    a.to_core(flags=ACK, ack=end, payload=v2_reply(b"no", ird=2, ord_=1, reject=True))
    [up] = p.ups
    assert (up.status, up.ird, up.ord) == (-ECONNREFUSED, 16, 2)


def test_a_v2_reject_without_p2p_is_reported_as_a_reset_not_a_refusal() -> None:
    p = make_host()
    a, req = to_mpareq_sent(p)
    end = a.isn_h + 1 + len(req.payload)
    [rst] = a.to_core(flags=ACK, ack=end, payload=v2_reply(reject=True, p2p=False))
    assert rst.flags == RST | ACK
    assert p.ups[0].status == -ECONNRESET


def test_synack_with_mss_below_536_resets_and_aborts() -> None:
    p = make_host()
    a = connect(p)
    [rst] = a.synack(options=bytes.fromhex("020401f4"))
    # irdma_handle_tcp_options(active) -> irdma_active_open_err(true); rcv_nxt unset
    assert (rst.flags, rst.seq, rst.ack) == (RST | ACK, a.isn_h + 1, 0)
    assert p.ups[0].status == -ECONNRESET and p.core.node(a.conn) is None


@pytest.mark.parametrize(("gen", "hops"), [(1, 128), (2, 64)])
def test_ipv6_syn_advertises_mtu_minus_60_and_the_generation_hop_limit(gen: int,
                                                                       hops: int) -> None:
    p = make_host(CmConfig(gen=gen), ipv6=True)
    syn = connect(p).syn_seg
    assert syn.options[:4] == struct.pack("!BBH", 2, 4, 1440) and syn.ttl == hops
