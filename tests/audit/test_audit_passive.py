"""Audit of the passive side against cm.c (irdma_handle_syn_pkt, irdma_handle_ack_pkt,
irdma_handle_rcv_mpa, irdma_parse_mpa, irdma_negotiate_mpa_v2_ird_ord, irdma_cm_reject,
irdma_handle_fin_pkt, irdma_handle_rst_pkt). Expected bytes come from RFC 5044 section 7.1 and RFC
9293 section 3.1."""

from __future__ import annotations

import struct
from errno import ECONNRESET

import pytest
from helpers.audit_peer import (
    KEY_REP,
    LPORT,
    XPORT,
    Passive,
    Peer,
    handshake,
    listen,
    make_host,
    mpa_frame,
    reject_request,
    v1_request,
    v2_request,
)
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.irdma.config import CmConfig, Quirks
from mpa_emu.stacks.irdma.states import CmState

from mpa_emu.wire.segment import ACK, FIN, RST, SYN


def _opts(mss: int) -> bytes:
    return struct.pack("!BBH", 2, 4, mss) + bytes([3, 3, 2, 0])


def test_synack_then_ack_of_the_request_have_the_kernel_shape() -> None:
    p = make_host()
    listen(p)
    pas = Passive(p, 1)
    [synack] = pas.syn()
    assert (synack.flags, synack.ack, synack.window) == (SYN | ACK, 1001, 0xFFFF)
    assert synack.options == bytes.fromhex("020405b403030200")
    assert synack.payload == b""
    req = v2_request(b"hello")
    [ack] = pas.ack(req)
    assert (ack.flags, ack.seq, ack.ack, ack.payload) == (
        ACK, synack.seq + 1, 1001 + len(req), b"")
    [up] = p.ups
    assert (up.event, up.status) == (IwEvent.CONNECT_REQUEST, 0)
    # irdma_parse_mpa copies PD_Length (4 + 5) bytes from offset 24: +4 quirk
    assert up.private_data_len == 9 and up.private_data[:5] == b"hello"
    # ird = ird_size (127, peer ORD 16 keeps it); ord is not set for CONNECT_REQUEST
    assert (up.ird, up.ord) == (127, 0)
    view = p.core.node(up.conn)
    assert view is not None and view.state == CmState.MPAREQ_RCVD and view.ord_size == 16


@pytest.mark.parametrize(("options", "mss"), [
    (b"", 1460),                                   # no options: MTU - 40
    (bytes.fromhex("0101030307000000"), 536),      # options without MSS: IRDMA_CM_DEFAULT_MSS
    (_opts(1000), 1000),                           # min(own, peer)
    (_opts(536), 536),                             # the IPv4 floor itself is accepted
])
def test_synack_advertises_the_mss_irdma_process_options_leaves(options: bytes,
                                                                mss: int) -> None:
    p = make_host()
    listen(p)
    [synack] = Passive(p, 1).syn(options)
    assert synack.options[:4] == struct.pack("!BBH", 2, 4, mss)


def test_window_scale_option_sets_snd_wscale_and_scales_the_window() -> None:
    p = make_host()
    listen(p)
    Passive(p, 1).syn(bytes.fromhex("020405b4" "01030307"), window=1000)
    [conn] = p.core.conns()
    view = p.core.node(conn)
    assert view is not None and view.snd_wscale == 7 and view.snd_wnd == 1000 << 7


def test_ipv4_syn_with_mss_535_is_dropped_silently_on_gen2() -> None:
    # irdma_form_ah_cm_frame: no AH before irdma_cm_create_ah, so the RST of passive_open_err(true)
    # is never built, and the second passive_open_err(false) frees the node.
    p = make_host()
    listen(p)
    assert Passive(p, 1).syn(_opts(535)) == []
    assert p.core.conns() == []


@pytest.mark.parametrize(("mss", "ok"), [(1219, False), (1220, True)])
def test_ipv6_mss_floor_is_1220(mss: int, ok: bool) -> None:
    p = make_host(ipv6=True)
    listen(p)
    out = Passive(p, 1).syn(_opts(mss))
    if ok:
        [synack] = out
        assert synack.options[:4] == struct.pack("!BBH", 2, 4, 1220)
    else:
        assert out == [] and p.core.conns() == []


def test_gen1_ipv6_bad_mss_gets_a_rst_with_hop_limit_128_and_the_double_put() -> None:
    p = make_host(CmConfig(gen=1), ipv6=True)
    listen(p)
    [rst] = Passive(p, 1).syn(_opts(1000))
    # seq = ISN (nothing sent yet), ack = rcv_nxt, which is set only after the options
    assert (rst.flags, rst.ack, rst.ttl) == (RST | ACK, 0, 128)
    assert p.core.conns() == []
    assert any(r.kind == "kernel_bug" for r in p.core.trace.records)  # type: ignore[union-attr]


def test_gen1_ipv4_id_counts_from_0x3b48_and_a_resend_keeps_its_id() -> None:
    p = make_host(CmConfig(gen=1))
    listen(p)
    pas = Passive(p, 1)
    [synack] = pas.syn()
    assert (synack.ip_id, synack.ttl, synack.df) == (0x3B48, 64, True)
    [(t, again)] = p.at(1_500_000_000)
    assert t == 1_000_000_000 and again == synack  # the same buffer, same ID and ack
    [ack] = pas.ack(v2_request())
    assert ack.ip_id == 0x3B49


def test_check_seq_window_is_inclusive_65535() -> None:
    p = make_host()
    listen(p)
    pas = Passive(p, 1)
    pas.syn()
    assert pas.ack() == []  # third ACK: ESTABLISHED, rcv_nxt = 1001
    req = v1_request()
    assert pas.ack(req, seq_off=65536) == []          # 1001 + 65536: outside, dropped
    [ack] = pas.ack(req, seq_off=65535)               # 1001 + 65535: inside
    assert ack.ack == 1001 + 65535 + len(req)         # rcv_nxt = seq + datasize


def test_duplicate_syn_is_ignored_in_syn_rcvd_and_mpareq_rcvd() -> None:
    p = make_host()
    listen(p)
    pas = Passive(p, 1)
    pas.syn()
    assert pas.syn() == []
    pas.ack(v2_request())
    assert pas.syn() == []
    assert p.core.node(pas.conn()).state == CmState.MPAREQ_RCVD  # type: ignore[union-attr]


def test_fin_in_mpareq_rcvd_is_ignored_and_not_acked() -> None:
    p = make_host()
    pas = handshake(p, v2_request())
    n = len(v2_request())
    assert pas.ack(extra=FIN, seq_off=n) == []
    assert p.core.node(pas.conn()).state == CmState.MPAREQ_RCVD  # type: ignore[union-attr]


def test_mpa_request_with_fin_moves_to_mpareq_rcvd_and_the_fin_is_not_acked() -> None:
    p = make_host()
    listen(p)
    pas = Passive(p, 1)
    pas.syn()
    req = v2_request()
    [ack] = pas.ack(req, extra=FIN)
    assert ack.ack == 1001 + len(req)  # the FIN is not counted
    assert p.core.node(pas.conn()).state == CmState.MPAREQ_RCVD  # type: ignore[union-attr]


def test_reject_v2_builds_reply_key_r_flag_and_fin() -> None:
    p = make_host()
    req = v2_request(b"req")
    pas = handshake(p, req)
    p.core.reject(pas.conn(), private_data=b"no", now_ns=p.now)
    [rej] = p.drain()
    assert (rej.flags, rej.seq, rej.ack) == (ACK | FIN, pas.isn_h + 1, 1001 + len(req))
    # 0x70 = C|R|S; PD_Length 4 + 2; P2P | IRD 127; READ | ORD min(255, peer IRD 16)
    assert rej.payload == KEY_REP + bytes([0x70, 2]) + struct.pack("!HHH", 6, 0x807F,
                                                                  0x4010) + b"no"
    assert p.core.node(pas.conn()).state == CmState.FIN_WAIT1  # type: ignore[union-attr]


def test_reject_v1_replies_with_rev_1_and_a_20_byte_header() -> None:
    p = make_host()
    pas = handshake(p, v1_request(b"x"))
    p.core.reject(pas.conn(), private_data=b"nope", now_ns=p.now)
    [rej] = p.drain()
    assert rej.payload == KEY_REP + bytes([0x60, 1]) + struct.pack("!H", 4) + b"nope"


def test_reject_pdata_256_wraps_to_an_empty_reject_as_the_u8() -> None:
    # irdma_reject(..., u8 pdata_len): 256 bytes arrive as length 0 and an ordinary
    # reject goes out (PD_Length = the 4-byte RTR block only)
    p = make_host()
    pas = handshake(p, v2_request())
    p.core.reject(pas.conn(), private_data=bytes(range(256)), now_ns=p.now)
    [rej] = p.drain()
    assert struct.unpack_from("!H", rej.payload, 18)[0] == 4
    assert len(rej.payload) == 24


def test_reject_pdata_255_is_sent_whole() -> None:
    p = make_host()
    pas = handshake(p, v2_request())
    p.core.reject(pas.conn(), private_data=bytes(range(255)), now_ns=p.now)
    [rej] = p.drain()
    assert struct.unpack_from("!H", rej.payload, 18)[0] == 259
    assert len(rej.payload) == 24 + 255


def _fin_wait1() -> tuple[Peer, int, int, int]:
    """A passive node that rejected a v2 request: (host, conn, the peer's next seq, the
    seq after our FIN)."""
    p = make_host()
    req = v2_request()
    conn = handshake(p, req).conn()
    _, fin_end = reject_request(p, conn)
    return p, conn, 1001 + len(req), fin_end


def test_fin_only_segment_acking_our_fin_moves_fin_wait1_to_closing() -> None:
    p, conn, seq, fin_end = _fin_wait1()
    # FIN without ACK whose ack field is wrong: irdma_check_seq drops it
    assert p.send(p.seg(flags=FIN, seq=seq, ack=fin_end - 1)) == []
    [ack] = p.send(p.seg(flags=FIN, seq=seq, ack=fin_end))
    assert (ack.flags, ack.seq, ack.ack) == (ACK, fin_end, seq + 1)
    view = p.core.node(conn)
    assert view is not None and view.state == CmState.CLOSING and not view.retransmitting
    assert p.send(p.seg(flags=ACK, seq=seq + 1, ack=fin_end)) == []
    assert p.core.node(conn) is None


def test_time_wait_close_entry_slips_to_the_pending_core_timer() -> None:
    # irdma_schedule_cm_timer: the SYN-ACK armed the one core timer for t = 1 s; cleanup never
    # disarms
    # it, so the 100 ms TIME_WAIT entry scheduled at t = 0 waits for that expiry.
    p, conn, seq, fin_end = _fin_wait1()
    # the peer's ACK of the reply bytes only (FIN not counted) fails check_seq
    assert p.send(p.seg(flags=ACK, seq=seq, ack=fin_end - 1)) == []
    assert p.core.node(conn).state == CmState.FIN_WAIT1  # type: ignore[union-attr]
    [ack] = p.send(p.seg(flags=ACK | FIN, seq=seq, ack=fin_end))
    assert (ack.flags, ack.seq, ack.ack) == (ACK, fin_end, seq + 1)
    assert p.core.node(conn).state == CmState.TIME_WAIT  # type: ignore[union-attr]
    assert p.core.get_timer() == 1_000_000_000
    p.at(999_000_000)
    assert p.core.node(conn) is not None
    p.at(1_000_000_000)
    assert p.core.node(conn) is None and p.core.get_timer() is None


def test_time_wait_frees_after_100ms_when_the_core_timer_is_idle() -> None:
    p, conn, seq, fin_end = _fin_wait1()
    p.send(p.seg(flags=ACK, seq=seq, ack=fin_end))  # FIN_WAIT2: no entry left
    p.at(2_500_000_000)  # the ticks armed earlier fire empty; the timer goes idle
    assert p.core.get_timer() is None
    p.send(p.seg(flags=ACK | FIN, seq=seq, ack=fin_end))
    assert p.core.get_timer() == 2_600_000_000
    p.at(2_599_000_000)
    assert p.core.node(conn) is not None
    p.at(2_600_000_000)
    assert p.core.node(conn) is None


def test_fin_wait2_without_the_peer_fin_has_no_timer_and_lingers() -> None:
    # irdma_handle_ack_pkt: FIN_WAIT2 has no timer
    p, conn, seq, fin_end = _fin_wait1()
    p.send(p.seg(flags=ACK, seq=seq, ack=fin_end))
    assert p.run_out() == [] and p.core.get_timer() is None
    [(c, state, reason)] = p.core.leak_report()
    assert (c, state) == (conn, CmState.FIN_WAIT2) and reason is not None


@pytest.mark.parametrize("verb", ["accept", "reject"])
def test_after_a_peer_rst_in_mpareq_rcvd_accept_resets_and_reject_frees_silently(
        verb: str) -> None:
    p = make_host()
    req = v2_request()
    pas = handshake(p, req)
    conn = pas.conn()
    assert p.send(p.seg(flags=RST, seq=1001 + len(req))) == []
    view = p.core.node(conn)
    assert view is not None and view.passive_state == 1
    if verb == "accept":
        with pytest.raises(CmError) as err:  # irdma_accept's return value
            p.core.accept(conn, now_ns=p.now)
        assert err.value.errno == ECONNRESET
        p.drain()
        assert p.ups[-1].event == IwEvent.CONNECT_REQUEST  # no ESTABLISHED upcall
    else:
        p.core.reject(conn, now_ns=p.now)
    assert p.drain() == [] and p.core.node(conn) is None
    assert [s for s in p.sent if s.flags & (RST | FIN)] == []


def test_syn_ack_in_mpareq_rcvd_resets_and_frees_the_node_the_application_holds() -> None:
    p = make_host()
    req = v2_request()
    pas = handshake(p, req)
    conn = pas.conn()
    [rst] = p.send(p.seg(flags=SYN | ACK, seq=7, ack=pas.isn_h + 1))
    assert (rst.flags, rst.seq, rst.ack) == (RST | ACK, pas.isn_h + 1, 1001 + len(req))
    assert p.core.node(conn) is None
    with pytest.raises(CmError):
        p.core.accept(conn, now_ns=p.now)


@pytest.mark.parametrize(("state_setup", "freed"), [
    ("syn_rcvd", True), ("established", True), ("fin_wait1", True), ("fin_wait2", True),
    ("time_wait", True), ("closing", False), ("last_ack", True)])
def test_rst_in_each_passive_state(state_setup: str, freed: bool) -> None:
    p = make_host()
    listen(p)
    pas = Passive(p, 1)
    pas.syn()
    req = v2_request()
    seq = 1001 + len(req)
    [conn] = p.core.conns()
    if state_setup == "established":
        pas.ack()
    elif state_setup == "last_ack":
        pas.ack()
        pas.ack(extra=FIN)
    elif state_setup != "syn_rcvd":
        pas.ack(req)
        _, fin_end = reject_request(p, conn)
        if state_setup == "fin_wait2":
            p.send(p.seg(flags=ACK, seq=seq, ack=fin_end))
        elif state_setup == "time_wait":
            p.send(p.seg(flags=ACK | FIN, seq=seq, ack=fin_end))
        elif state_setup == "closing":
            p.send(p.seg(flags=FIN, seq=seq, ack=fin_end))
    before = p.core.node(conn)
    assert before is not None and before.state.name.lower() == state_setup
    assert p.send(p.seg(flags=RST, seq=12345)) == []
    assert (p.core.node(conn) is None) == freed
    assert [u.event for u in p.ups if u.status] == []


@pytest.mark.parametrize(("trailing", "ok"), [(514, True), (515, False)])
def test_mpa_request_with_trailing_bytes_up_to_544(trailing: int, ok: bool) -> None:
    p = make_host()
    listen(p)
    pas = Passive(p, 1)
    pas.syn()
    payload = v1_request(bytes(10)) + b"\xee" * trailing  # 30 + trailing bytes
    out = pas.ack(payload)
    if ok:
        assert [s.flags for s in out] == [ACK]
        assert p.ups[-1].private_data_len == 10
    else:
        [rst] = out
        assert (rst.flags, rst.ack) == (RST | ACK, 1001 + len(payload))
        assert p.ups == [] and p.core.conns() == []


@pytest.mark.parametrize(("request_bytes", "reported"), [
    (v1_request(bytes(512)), 0),               # PD_Length 512: accepted, u8 -> 0
    (v2_request(bytes(508)), 0),               # 508 + 4 = 512: accepted, u8 -> 0
    (v2_request(bytes(251)), 255),             # 251 + 4 = 255
    (v2_request(bytes(252)), 0),               # 252 + 4 = 256 -> 0 (a u8 in the upcall)
])
def test_pd_length_limits_and_the_u8_upcall_length(request_bytes: bytes,
                                                   reported: int) -> None:
    p = make_host()
    handshake(p, request_bytes)
    [up] = p.ups
    assert up.event == IwEvent.CONNECT_REQUEST and up.private_data_len == reported


@pytest.mark.parametrize("request_bytes", [v1_request(bytes(513)), v2_request(bytes(509))])
def test_pd_length_513_is_refused_with_a_rst(request_bytes: bytes) -> None:
    p = make_host()
    listen(p)
    pas = Passive(p, 1)
    pas.syn()
    [rst] = pas.ack(request_bytes)
    assert rst.flags == RST | ACK and p.ups == []


def test_without_the_quirks_a_252_byte_v2_payload_is_reported_as_252() -> None:
    p = make_host(CmConfig(quirks=Quirks(v2_pdata_plus4=False, pdata_len_u8=False)))
    handshake(p, v2_request(bytes(range(252))))
    assert p.ups[0].private_data == bytes(range(252))


def test_peer_ord_0_with_read_lowers_the_responder_ird_to_1() -> None:
    p = make_host()
    pas = handshake(p, v2_request(ird=9, ord_=0))
    assert p.ups[0].ird == 1
    p.core.reject(pas.conn(), now_ns=p.now)
    [rej] = p.drain()
    assert struct.unpack_from("!HH", rej.payload, 20) == (0x8001, 0x4009)


def test_peer_0x3fff_makes_the_reply_carry_0x3fff() -> None:
    p = make_host()
    pas = handshake(p, v2_request(ird=0x3FFF, ord_=5))
    assert p.ups[0].ird == 127  # limits skipped
    p.core.reject(pas.conn(), now_ns=p.now)
    [rej] = p.drain()
    assert struct.unpack_from("!HH", rej.payload, 20) == (0xBFFF, 0x7FFF)


def test_write_only_request_makes_the_reply_name_write() -> None:
    p = make_host()
    pas = handshake(p, v2_request(read=False, write=True))
    p.core.reject(pas.conn(), now_ns=p.now)
    [rej] = p.drain()
    assert struct.unpack_from("!H", rej.payload, 22)[0] == 0x8000 | 16


@pytest.mark.parametrize("request_bytes", [
    v2_request(p2p=False), v2_request(read=False, write=False),
    mpa_frame(key=KEY_REP, rev=2, flags=0x50, rtr=(0x8010, 0xC010)),  # reply key
    mpa_frame(key=b"MPA ID Req Frame", rev=3, flags=0x40)])
def test_a_bad_request_gets_a_rst_and_no_upcall(request_bytes: bytes) -> None:
    p = make_host()
    listen(p)
    pas = Passive(p, 1)
    pas.syn()
    [rst] = pas.ack(request_bytes)
    assert rst.flags == RST | ACK and p.ups == [] and p.core.conns() == []


def test_backlog_allows_backlog_plus_one_pending_handshakes() -> None:
    p = make_host()
    listen(p, backlog=1)
    got = [Passive(p, 1, sport=XPORT + i, isn_x=100 * i).syn() for i in range(3)]
    assert [len(g) for g in got] == [1, 1, 0]
    assert p.core.stats["backlog_drops"] == 1


def test_syn_carrying_fin_creates_no_node() -> None:
    p = make_host()
    listen(p)
    assert p.send(p.seg(flags=SYN | FIN, seq=1, dport=LPORT)) == []
    assert p.core.conns() == []


@pytest.mark.parametrize("options", [bytes.fromhex("02030500"), _opts(500)])
def test_bad_options_on_the_third_ack_reset_and_suppress_the_fin(options: bytes) -> None:
    # irdma_handle_ack_pkt SYN_RCVD: irdma_handle_tcp_options(passive) fails ->
    # irdma_passive_open_err(true) (the AH is valid by now: a RST), and the error return
    # keeps irdma_process_pkt from running irdma_handle_fin_pkt
    p = make_host()
    listen(p)
    pas = Passive(p, 1)
    pas.syn()
    [rst] = pas.ack(v2_request(), extra=FIN, options=options)
    assert (rst.flags, rst.seq, rst.ack) == (RST | ACK, pas.isn_h + 1, 1001)
    assert p.ups == [] and p.core.conns() == []


def test_second_fin_in_time_wait_frees_without_an_ack() -> None:
    p, conn, seq, fin_end = _fin_wait1()
    p.send(p.seg(flags=ACK | FIN, seq=seq, ack=fin_end))
    assert p.core.node(conn).state == CmState.TIME_WAIT  # type: ignore[union-attr]
    # the retransmitted FIN|ACK: check_seq needs seq in [rcv_nxt, ...]; rcv_nxt moved
    # past the FIN, so the resend at the old seq is dropped; at rcv_nxt it frees
    assert p.send(p.seg(flags=ACK | FIN, seq=seq, ack=fin_end)) == []
    assert p.core.node(conn) is not None
    assert p.send(p.seg(flags=ACK | FIN, seq=seq + 1, ack=fin_end)) == []
    assert p.core.node(conn) is None
