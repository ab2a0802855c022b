"""cxgb4 to cxgb4: connect, accept, data-less RDMA mode and close, checked against
cm.c (send_connect, send_mpa_req, process_mpa_request, c4iw_accept_cr, send_mpa_reply,
process_mpa_reply, rdma_init/build_rtr_msg, c4iw_ep_disconnect, peer_close,
close_con_rpl) and the adapter's TCP options (send_connect/accept_cr opt0/opt2)."""

from __future__ import annotations

import errno

import pytest
from helpers.cxgb4_lab import (
    IP_A,
    IP_B,
    KEY_REP,
    KEY_REQ,
    PORT,
    cxgb4,
    make_net,
    mpa_frame,
    payloads,
    v2_words,
)
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.events import IwEvent

from mpa_emu.stacks import STACKS, parse_params
from mpa_emu.stacks.cxgb4.tcp import advertised_mss, best_aligned_mtu
from mpa_emu.stacks.tcp import options as opts
from mpa_emu.wire import ddp, mpa


def _pair(params_a: dict[str, object] | None = None, params_b: dict[str, object] | None = None):
    net = make_net()
    a = cxgb4(net, "a", IP_A, params_a)
    b = cxgb4(net, "b", IP_B, params_b)
    b.listen(PORT)
    return net, a, b


def test_registered_with_the_module_parameters_and_their_defaults() -> None:
    st = STACKS["cxgb4"]
    defaults = st.defaults()
    # cm.c module_param defaults
    assert defaults["peer2peer"] is True
    assert defaults["p2p_type"] == 1  # FW_RI_INIT_P2PTYPE_READ_REQ
    assert defaults["mpa_rev"] == 2
    assert defaults["markers_enabled"] is False
    assert defaults["crc_enabled"] is True
    assert defaults["ep_timeout_secs"] == 60
    assert defaults["c4iw_max_read_depth"] == 32
    assert defaults["enable_tcp_timestamps"] is False
    assert defaults["enable_tcp_sack"] is False
    assert defaults["enable_tcp_window_scaling"] is True
    assert defaults["rcv_win"] == 256 * 1024
    assert defaults["snd_win"] == 128 * 1024
    assert st.param("mpa_rev").where == "module parameter of iw_cxgb4"
    assert st.states[0] == "IDLE" and st.states[11] == "DEAD"  # enum c4iw_ep_state
    with pytest.raises(ValueError, match=r"^cxgb4: mpa_rev must be 0\.\.2, got 3$"):
        parse_params("cxgb4", {"mpa_rev": 3})


def test_best_aligned_mtu_picks_1488_for_1500_over_ipv4() -> None:
    # cxgb4_best_aligned_mtu with the base driver's table (1492 rewritten to 1488):
    # 1500 - 40 = 1460 is not a multiple of 8, 1488 - 40 = 1448 is, one entry below.
    assert best_aligned_mtu(1500, 40) == 1488
    assert advertised_mss(1500, ipv6=False, timestamps=False) == 1448
    assert advertised_mss(1500, ipv6=True, timestamps=False) == 1440  # 1500 - 60 aligned
    assert advertised_mss(9000, ipv6=False, timestamps=False) == 8960


def test_syn_carries_mss_and_window_scale_only() -> None:
    net, a, _b = _pair()
    a.connect(IP_B, PORT, ird=4, ord=8)
    net.run_for(1_000_000)
    syn = net.frames[0].segment
    synack = net.frames[1].segment
    assert syn is not None and synack is not None
    for seg in (syn, synack):
        parsed = opts.parse(seg.options)
        assert parsed.mss == 1448
        assert parsed.wscale == 3  # cxgb_compute_wscale(256 KB): 65535 << 3 >= 262144
        assert parsed.tsval is None  # enable_tcp_timestamps = 0
        assert not parsed.sack_perm  # enable_tcp_sack = 0
    # (prandom & ~7) - 1, + 4 with peer2peer: ISNs are 3 mod 8 (T5_ISS_F)
    assert syn.seq % 8 == 3 and synack.seq % 8 == 3


def test_timestamps_and_sack_follow_their_module_parameters() -> None:
    net, a, _b = _pair({"enable_tcp_timestamps": 1, "enable_tcp_sack": 1},
                       {"enable_tcp_timestamps": 1, "enable_tcp_sack": 1})
    a.connect(IP_B, PORT)
    net.run_for(1_000_000)
    syn = net.frames[0].segment
    assert syn is not None
    parsed = opts.parse(syn.options)
    assert parsed.tsval is not None and parsed.sack_perm


def test_connect_accept_gives_the_kernel_frames_and_upcalls() -> None:
    net, a, b = _pair()
    conn = a.connect(IP_B, PORT, private_data=b"hello", ird=4, ord=8)
    net.run_for(1_000_000)
    # send_mpa_req: C (crc_enabled), S (v2); IRD word ep->ird | A, ORD word ep->ord | D
    request = mpa_frame(KEY_REQ, mpa.FLAG_CRC | mpa.FLAG_ENHANCED, 2,
                        v2_words(4, 8, d=True) + b"hello")
    assert payloads(net, "a")[0] == request
    req_up, est = b.upcalls
    assert req_up.event == IwEvent.CONNECT_REQUEST and req_up.status == 0
    assert (req_up.private_data, req_up.private_data_len) == (b"hello", 5)
    assert (req_up.ird, req_up.ord) == (4, 8)  # connect_request_upcall: ep->ird, ep->ord
    # Accept echoes the request (conn ord = 4, conn ird = 8): send_mpa_reply's block
    # carries ep->ird 8, ep->ord 4 with A and the local p2p_type (read: D).
    reply = mpa_frame(KEY_REP, mpa.FLAG_CRC | mpa.FLAG_ENHANCED, 2, v2_words(8, 4, d=True))
    assert payloads(net, "b")[0] == reply
    assert est.event == IwEvent.ESTABLISHED and (est.ird, est.ord) == (4, 8)
    (rep_up,) = a.upcalls
    assert rep_up.event == IwEvent.CONNECT_REPLY and rep_up.status == 0
    assert rep_up.conn == conn
    # connect_reply_upcall: event.ird = ep->ord (8), event.ord = ep->ird (4)
    assert (rep_up.ird, rep_up.ord) == (8, 4)
    # build_rtr_msg, p2p_type READ_REQ: zero-length Read, sink/source STag 1, TO 1
    rtr = payloads(net, "a")[1]
    fpdu = mpa.unframe_fpdu(rtr)
    assert fpdu.crc_ok
    seg = ddp.parse_segment(fpdu.ulpdu)
    assert seg.opcode == ddp.Opcode.READ_REQUEST and seg.read_request is not None
    rr = seg.read_request
    assert (rr.sink_stag, rr.sink_to, rr.size, rr.src_stag, rr.src_to) == (1, 1, 0, 1, 1)
    assert a.qp_state(conn).iwarp_state == "RTS" and a.node(conn).state == "FPDU_MODE"


def test_graceful_close_ends_with_close_status_0_on_both_sides() -> None:
    net, a, b = _pair()
    conn = a.connect(IP_B, PORT, ird=4, ord=4)
    net.run_for(1_000_000)
    a.disconnect(conn)
    net.run_for(1_000_000)
    assert [u.event for u in a.upcalls] == [IwEvent.CONNECT_REPLY, IwEvent.CLOSE]
    assert a.upcalls[-1].status == 0  # close_con_rpl / peer_close in MORIBUND
    assert [(u.event, u.status) for u in b.upcalls[-2:]] == [(IwEvent.DISCONNECT, 0),
                                                             (IwEvent.CLOSE, 0)]
    fins = [f for f in net.frames if f.segment and f.segment.flags & 0x01]
    assert [f.sender for f in fins] == ["a", "b"]
    assert not [f for f in net.frames if f.segment and f.segment.flags & 0x04]  # no RST
    assert a.conns() == [] and b.conns() == []


def test_abortive_disconnect_sends_rst_and_both_sides_see_close_econnreset() -> None:
    net, a, b = _pair()
    conn = a.connect(IP_B, PORT, ird=4, ord=4)
    net.run_for(1_000_000)
    a.disconnect(conn, graceful=False)
    net.run_for(1_000_000)
    assert (a.upcalls[-1].event, a.upcalls[-1].status) == (IwEvent.CLOSE, -errno.ECONNRESET)
    assert (b.upcalls[-1].event, b.upcalls[-1].status) == (IwEvent.CLOSE, -errno.ECONNRESET)
    assert a.conns() == [] and b.conns() == []


def test_connect_refuses_ird_ord_over_cur_max_read_depth() -> None:
    net, a, _b = _pair({"c4iw_max_read_depth": 8})
    with pytest.raises(CmError) as exc:
        a.connect(IP_B, PORT, ird=9, ord=4)
    assert exc.value.errno == errno.EINVAL
    assert net.frames == []


def test_connect_private_data_is_at_most_255_bytes() -> None:
    net, a, _b = _pair()
    with pytest.raises(CmError) as exc:
        a.connect(IP_B, PORT, private_data=bytes(256))
    assert exc.value.errno == errno.EINVAL
    assert net.frames == []


def test_ord_0_becomes_1_with_peer2peer() -> None:
    net, a, _b = _pair()
    a.connect(IP_B, PORT, ird=2, ord=0)
    net.run_for(1_000_000)
    block = payloads(net, "a")[0][20:24]
    assert block == v2_words(2, 1, d=True)  # c4iw_connect: peer2peer && ord == 0 -> 1


def test_rst_to_the_syn_is_connect_reply_econnreset() -> None:
    net = make_net()
    a = cxgb4(net, "a", IP_A)
    cxgb4(net, "b", IP_B)  # no listener: its TCP answers the SYN with a RST
    a.connect(IP_B, PORT)
    net.run_for(1_000_000)
    # act_open_rpl: CPL_ERR_CONN_RESET -> status2errno -> -ECONNRESET
    ((event, status),) = [(u.event, u.status) for u in a.upcalls]
    assert (event, status) == (IwEvent.CONNECT_REPLY, -errno.ECONNRESET)
    assert a.conns() == []


def test_crc_is_used_when_either_side_asks() -> None:
    # (mpa->flags & MPA_CRC) | crc_enabled: a crc_enabled=0 responder still uses the CRC
    # the request asks for, and says so in its reply
    net, a, _b = _pair(None, {"crc_enabled": 0})
    a.connect(IP_B, PORT, ird=4, ord=4)
    net.run_for(1_000_000)
    assert payloads(net, "b")[0][16] == mpa.FLAG_CRC | mpa.FLAG_ENHANCED
    net, a, _b = _pair({"crc_enabled": 0}, {"crc_enabled": 0})
    a.connect(IP_B, PORT, ird=4, ord=4)
    net.run_for(1_000_000)
    request, rtr = payloads(net, "a")
    assert request[16] == mpa.FLAG_ENHANCED and payloads(net, "b")[0][16] == mpa.FLAG_ENHANCED
    assert rtr[-4:] == bytes(4)  # no CRC negotiated: the CRC field is zero


def test_markers_follow_each_side_s_markers_enabled() -> None:
    # send_mpa_req: M from markers_enabled; send_mpa_reply: M from the responder's own
    # recv_marker_enabled (its markers_enabled), whatever the request said
    net, a, _b = _pair({"markers_enabled": 1}, None)
    a.connect(IP_B, PORT, ird=4, ord=4)
    net.run_for(1_000_000)
    assert payloads(net, "a")[0][16] & mpa.FLAG_MARKERS
    assert not payloads(net, "b")[0][16] & mpa.FLAG_MARKERS
