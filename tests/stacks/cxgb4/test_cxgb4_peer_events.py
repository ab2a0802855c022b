"""The peer's FIN (peer_close) and RST (peer_abort) in the endpoint states where they
differ, IPv6, and reproducibility."""

from __future__ import annotations

import errno
import io

import pytest
from helpers.cxgb4_lab import (
    IP_A,
    IP_B,
    IP_RAW,
    KEY_REP,
    KEY_REQ,
    PORT,
    RawPeer,
    cxgb4,
    flags_of,
    make_net,
    mpa_frame,
    raw_close,
    raw_reset,
    raw_send,
    v2_words,
)
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.events import IwEvent

from mpa_emu.net.policy import Manual
from mpa_emu.stacks.tcp import options as opts
from mpa_emu.wire import mpa

MS = 1_000_000
C_S = mpa.FLAG_CRC | mpa.FLAG_ENHANCED


def _active():
    net = make_net()
    a = cxgb4(net, "a", IP_A)
    raw = net.add_host("raw", IP_B)
    raw.listen(PORT)
    conn = a.connect(IP_B, PORT, ird=4, ord=4)
    net.run_for(MS)
    core = raw.core
    assert isinstance(core, RawPeer)
    return net, a, raw, core.socks("accepted")[0], conn


def _passive():
    net = make_net()
    b = cxgb4(net, "b", IP_B)
    raw = net.add_host("raw", IP_RAW)
    b.listen(PORT, policy=Manual())
    sock = raw.connect(IP_B, PORT)
    net.run_for(MS)
    return net, b, raw, sock


def test_peer_fin_in_mpa_req_sent_is_connect_reply_econnreset_and_a_fin() -> None:
    net, a, raw, sock, _conn = _active()
    raw_close(net, raw, sock)
    net.run_for(MS)
    assert [(u.event, u.status) for u in a.upcalls] == \
        [(IwEvent.CONNECT_REPLY, -errno.ECONNRESET)]
    assert "FA" in flags_of(net, "a")
    assert a.conns() == []  # MORIBUND, then our FIN acknowledged: DEAD


def test_peer_fin_in_mpa_req_wait_is_answered_with_a_fin_and_no_upcall() -> None:
    net, b, raw, sock = _passive()
    raw_close(net, raw, sock)
    net.run_for(MS)
    assert b.upcalls == [] and "FA" in flags_of(net, "b")
    assert b.conns() == []


def test_peer_fin_while_the_ulp_holds_the_request() -> None:
    net, b, raw, sock = _passive()
    raw_send(net, raw, sock, mpa_frame(KEY_REQ, C_S, 2, v2_words(4, 4)))
    net.run_for(MS)
    (req,) = b.upcalls
    raw_close(net, raw, sock)
    net.run_for(MS)
    assert "FA" in flags_of(net, "b") and len(b.upcalls) == 1  # no upcall for it
    with pytest.raises(CmError) as exc:  # c4iw_accept_cr: not MPA_REQ_RCVD
        b.accept(req.conn)
    assert exc.value.errno == errno.ECONNRESET


def test_peer_rst_while_the_ulp_holds_the_request_is_silent() -> None:
    net, b, raw, sock = _passive()
    raw_send(net, raw, sock, mpa_frame(KEY_REQ, C_S, 2, v2_words(4, 4)))
    net.run_for(MS)
    (req,) = b.upcalls
    raw_reset(net, raw, sock)
    net.run_for(MS)
    assert len(b.upcalls) == 1 and b.node(req.conn).state == "DEAD"
    with pytest.raises(CmError) as exc:
        b.reject(req.conn)
    assert exc.value.errno == errno.ECONNRESET
    assert b.conns() == []


def test_peer_rst_in_fpdu_mode_is_close_econnreset_without_a_rst_back() -> None:
    net, a, raw, sock, conn = _active()
    raw_send(net, raw, sock, mpa_frame(KEY_REP, C_S, 2, v2_words(4, 4)))
    net.run_for(MS)
    raw_reset(net, raw, sock)
    net.run_for(MS)
    assert [(u.event, u.status) for u in a.upcalls] == \
        [(IwEvent.CONNECT_REPLY, 0), (IwEvent.CLOSE, -errno.ECONNRESET)]
    assert not any("R" in f for f in flags_of(net, "a"))
    assert a.node(conn) is None


def test_peer_fin_in_fpdu_mode_is_disconnect_then_close_0() -> None:
    net, a, raw, sock, _conn = _active()
    raw_send(net, raw, sock, mpa_frame(KEY_REP, C_S, 2, v2_words(4, 4)))
    net.run_for(MS)
    raw_close(net, raw, sock)
    net.run_for(MS)
    assert [(u.event, u.status) for u in a.upcalls] == \
        [(IwEvent.CONNECT_REPLY, 0), (IwEvent.DISCONNECT, 0), (IwEvent.CLOSE, 0)]


def test_ipv6_connect_advertises_mss_1440() -> None:
    net = make_net()
    a = cxgb4(net, "a", "2001:db8::1")
    b = cxgb4(net, "b", "2001:db8::2")
    b.listen(PORT, ipv6=True)
    a.connect("2001:db8::2", PORT, ird=4, ord=4)
    net.run_for(MS)
    syn = net.frames[0].segment
    assert syn is not None and opts.parse(syn.options).mss == 1440  # 1500 - 60, aligned
    assert a.upcalls[0].status == 0


def _capture(seed: int) -> bytes:
    net = make_net(seed)
    a = cxgb4(net, "a", IP_A)
    b = cxgb4(net, "b", IP_B)
    b.listen(PORT)
    conn = a.connect(IP_B, PORT, private_data=b"x", ird=4, ord=4)
    net.run_for(MS)
    a.disconnect(conn)
    net.run_for(MS)
    out = io.BytesIO()
    net.write_pcapng(out)
    return out.getvalue()


def test_same_seed_same_bytes() -> None:
    assert _capture(3) == _capture(3)
    assert _capture(3) != _capture(4)  # ISNs and ports come from the seed
