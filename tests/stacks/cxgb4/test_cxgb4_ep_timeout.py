"""The endpoint timer: ep_timeout_secs (60) from start_ep_timer to process_timeout, and
what process_timeout does in each state."""

from __future__ import annotations

import errno

import pytest
from helpers.cxgb4_lab import (
    IP_A,
    IP_B,
    IP_RAW,
    KEY_REP,
    PORT,
    RawPeer,
    S,
    cxgb4,
    kernel_log,
    make_net,
    mpa_frame,
    raw_send,
    v2_words,
)

from mpa_emu.net.policy import Manual
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.wire import mpa
from mpa_emu.wire.segment import FIN, RST

LATENCY = 10_000  # the network's default one-way latency


def _first(net, sender: str, flag: int):
    return next(f for f in net.frames if f.sender == sender and f.segment
                and f.segment.flags & flag)


@pytest.mark.parametrize("secs", [60, 5])
def test_no_mpa_request_aborts_ep_timeout_secs_after_pass_establish(secs: int) -> None:
    net = make_net()
    b = cxgb4(net, "b", IP_B, {"ep_timeout_secs": secs})
    raw = net.add_host("raw", IP_RAW)
    b.listen(PORT)
    raw.connect(IP_B, PORT)
    net.run_for(2 * secs * S)
    ack = net.frames[2]  # the handshake's last ACK: pass_establish starts the timer
    rst = _first(net, "b", RST)
    assert rst.time_ns - (ack.time_ns + LATENCY) == secs * S
    assert b.upcalls == []  # MPA_REQ_WAIT: abort, no upcall
    assert b.conns() == []


def test_no_mpa_reply_is_connect_reply_etimedout_after_60_s() -> None:
    net = make_net()
    a = cxgb4(net, "a", IP_A)
    raw = net.add_host("raw", IP_B)
    raw.listen(PORT)
    a.connect(IP_B, PORT, ird=4, ord=4)
    net.run_for(120 * S)
    request = next(f for f in net.frames if f.sender == "a" and f.segment
                   and f.segment.payload)
    (up,) = a.upcalls
    assert (up.event, up.status) == (IwEvent.CONNECT_REPLY, -errno.ETIMEDOUT)
    assert up.time_ns - request.time_ns == 60 * S  # send_mpa_req starts the timer
    assert _first(net, "a", RST).time_ns == up.time_ns  # then c4iw_ep_disconnect(abrupt)


def test_a_request_held_60_s_is_aborted_and_accept_then_fails() -> None:
    net = make_net()
    a = cxgb4(net, "a", IP_A, {"ep_timeout_secs": 600})  # let the responder's fire first
    b = cxgb4(net, "b", IP_B)
    b.listen(PORT, policy=Manual())
    a.connect(IP_B, PORT, ird=4, ord=4)
    net.run_for(61 * S)
    req = b.upcalls[0]
    ack = net.frames[2]
    rst = _first(net, "b", RST)
    # pass_establish started it; MPA_REQ_RCVD does not stop it: abort at 60 s
    assert rst.time_ns - (ack.time_ns + LATENCY) == 60 * S
    # the initiator, in MPA_REQ_SENT, takes the RST for a v2 refusal and retries with v1
    assert ("info", "peer_abort", "peer_abort: mpa_rev=2. Retrying with mpav1") \
        in kernel_log(net, "a")
    with pytest.raises(CmError) as exc:
        b.accept(req.conn)
    assert exc.value.errno == errno.ECONNRESET
    assert req.conn not in b.conns()


def test_close_without_the_peer_fin_ends_with_close_etimedout() -> None:
    net = make_net()
    a = cxgb4(net, "a", IP_A)
    raw = net.add_host("raw", IP_B)
    raw.listen(PORT)
    conn = a.connect(IP_B, PORT, ird=4, ord=4)
    net.run_for(S)
    core = raw.core
    assert isinstance(core, RawPeer)
    (sock,) = core.socks("accepted")
    raw_send(net, raw, sock, mpa_frame(KEY_REP, mpa.FLAG_CRC | mpa.FLAG_ENHANCED, 2,
                                        v2_words(4, 4)))
    net.run_for(S)
    assert a.upcalls[0].status == 0
    a.disconnect(conn)
    fin = _first(net, "a", FIN)
    net.run_for(120 * S)
    up = a.upcalls[-1]
    # the peer ACKs the FIN (close_con_rpl: MORIBUND) but never sends its own:
    # process_timeout in MORIBUND -> CLOSE -ETIMEDOUT, then c4iw_ep_disconnect(abrupt),
    # which ignores an endpoint in MORIBUND: no RST, the endpoint stays in MORIBUND
    # until the adapter's FIN_WAIT2 timer ends it (test_cxgb4_finwait2.py)
    assert (up.event, up.status) == (IwEvent.CLOSE, -errno.ETIMEDOUT)
    assert up.time_ns - fin.time_ns == 60 * S
    assert not [f for f in net.frames if f.sender == "a" and f.segment
                and f.segment.flags & RST]
    assert net.trace is not None
    moves = [(r.fields["old"], r.fields["new"], r.fn) for r in net.trace.records
             if r.kind == "state_changed" and r.host == "a" and r.fields.get("conn") == conn]
    assert moves[-2:] == [("CLOSING", "MORIBUND", "close_con_rpl"),
                          ("MORIBUND", "DEAD", "peer_abort")]
    assert ("debug", "c4iw_ep_disconnect", f"ignoring disconnect ep#{conn} state 10") \
        in kernel_log(net, "a")
