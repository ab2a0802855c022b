"""erdma's request, reply and reject byte for byte as erdma_cm.c writes them, and the
wire module that reads and writes them (mpa_emu.wire.erdma_mpa).

Expected bytes follow erdma_cm.h and erdma_cm.c: ``struct mpa_rr`` (the 16-byte key,
``__be16 bits`` = flags byte then revision byte, ``__be16 pd_len``), then ``struct
erdma_mpa_ext`` (``__be32 cookie``, ``__be32 bits`` with MPA_EXT_FLAG_CC 0x0000000f), then
the private data (erdma_send_mpareqrep's three iovecs); MPA_REVISION_EXT_1 is 129.
"""

from __future__ import annotations

import struct

import pytest

from mpa_emu.net.network import Network
from mpa_emu.net.policy import Accept, Reject
from mpa_emu.wire import erdma_mpa
from mpa_emu.wire.mpa import KEY_REP, KEY_REQ, MpaFormatError

S = 1_000_000_000


def payloads(net: Network, sender: str) -> list[bytes]:
    return [f.segment.payload for f in net.frames
            if f.sender == sender and f.segment is not None and f.segment.payload]


def pair(*, policy: Accept | Reject, a_cc: int = 0, b_cc: int = 0,
         pdata: bytes = b"hello") -> tuple[Network, bytes, bytes]:
    net = Network(seed=11)
    a = net.add_host("a", "192.0.2.1", stack="erdma", params={"cc": a_cc})
    b = net.add_host("b", "192.0.2.2", stack="erdma", params={"cc": b_cc})
    b.listen(31000, policy=policy)
    a.connect(b, 31000, private_data=pdata, ird=8, ord=8)
    net.run_for(S)
    (request,) = payloads(net, "a")
    (answer,) = payloads(net, "b")
    return net, request, answer


def split(frame: bytes) -> tuple[bytes, int, int, int, int, int, bytes]:
    key = frame[:16]
    flags, rev, pd_len = struct.unpack_from("!BBH", frame, 16)
    cookie, bits = struct.unpack_from("!II", frame, 20)
    return key, flags, rev, pd_len, cookie, bits, frame[28:]


def test_request_is_header_extension_and_private_data() -> None:
    _net, request, _ = pair(policy=Accept(private_data=b"welcome"), a_cc=3)
    key, flags, rev, pd_len, _cookie, bits, rest = split(request)
    # erdma_newconn_connected: bits = 0, then __mpa_rr_set_revision(MPA_REVISION_EXT_1);
    # the request key; ext bits carry the QP's CC (__mpa_ext_set_cc); PD_Length counts the
    # private data only, not the 8-byte extension.
    assert key == KEY_REQ
    assert (flags, rev) == (0x00, 129)
    assert pd_len == 5 and rest == b"hello"
    assert bits == 3
    assert len(request) == erdma_mpa.HDR_LEN + 5 == 33


def test_reply_echoes_the_request_bits_and_carries_its_own_cookie() -> None:
    _net, request, reply = pair(policy=Accept(private_data=b"welcome"))
    key, flags, rev, pd_len, cookie, bits, rest = split(reply)
    # erdma_proc_mpareq turns the request header into the reply's (MPA_KEY_REP, same
    # bits); erdma_accept writes ext_data.bits = 0 | the QP's CC, and the QP's cookie.
    assert key == KEY_REP
    assert (flags, rev) == (0x00, 129)
    assert (pd_len, rest) == (7, b"welcome")
    assert bits == 0
    assert cookie != split(request)[4]  # each side's QP has its own device cookie


def test_reply_carries_the_compromise_cc_when_the_ccs_differ() -> None:
    net, request, reply = pair(policy=Accept(private_data=b"ok"), a_cc=0, b_cc=2)
    assert split(request)[5] == 0
    # erdma_accept: qp->attrs.cc (2) != __mpa_ext_cc of the request (0) -> ERDMA_QPA_IWARP_CC
    # with COMPROMISE_CC (ERDMA_CC_CUBIC, 1); erdma_modify_qp_state_to_rts stores it in
    # qp->attrs.cc, which __mpa_ext_set_cc then writes into the reply.
    assert split(reply)[5] == erdma_mpa.COMPROMISE_CC == 1
    a, b = net.hosts["a"], net.hosts["b"]
    (ca,) = a.conns()
    (cb,) = b.conns()
    # the initiator compares the reply's CC (1) with its own (0): Cubic as well
    assert a.node(ca).cc == b.node(cb).cc == 1


def test_equal_ccs_need_no_compromise() -> None:
    net, _request, reply = pair(policy=Accept(), a_cc=4, b_cc=4)
    assert split(reply)[5] == 4
    (ca,) = net.hosts["a"].conns()
    assert net.hosts["a"].node(ca).cc == 4


def test_reject_echoes_the_request_extension() -> None:
    _net, request, reject = pair(policy=Reject(private_data=b"no"))
    key, flags, rev, pd_len, cookie, bits, rest = split(reject)
    # erdma_reject: bits |= MPA_RR_FLAG_REJECT on the request's header (now the reply
    # key), erdma_send_mpareqrep with mpa.ext_data untouched: the initiator's own cookie
    # and bits come back.
    assert key == KEY_REP
    assert (flags, rev) == (0x20, 129)
    assert (pd_len, rest) == (2, b"no")
    assert (cookie, bits) == split(request)[4:6]


def test_same_seed_same_bytes() -> None:
    first = pair(policy=Accept(private_data=b"w"))[1:]
    second = pair(policy=Accept(private_data=b"w"))[1:]
    assert first == second


def test_wire_module_round_trip_and_refusals() -> None:
    raw = erdma_mpa.build(request=True, cookie=0x01020304, cc=2, private_data=b"pd",
                          ext_bits=0xABCD0000)
    assert raw == (KEY_REQ + bytes((0, 129, 0, 2)) + bytes.fromhex("01020304abcd0002")
                   + b"pd")
    frame = erdma_mpa.parse(raw + b"trailing")
    assert frame.request and not frame.reject
    assert (frame.cookie, frame.cc, frame.cc_name, frame.private_data) == (
        0x01020304, 2, "HPCC-RTT", b"pd")
    assert erdma_mpa.looks_like_erdma(raw)
    ietf = KEY_REQ + bytes((0x40, 1, 0, 0)) + b"\0" * 8
    assert not erdma_mpa.looks_like_erdma(ietf)
    with pytest.raises(MpaFormatError, match="revision 1, not erdma's 129"):
        erdma_mpa.parse(ietf)
    with pytest.raises(MpaFormatError, match="needs 28 bytes"):
        erdma_mpa.parse(raw[:27])
    with pytest.raises(MpaFormatError, match="PD_Length 2 needs 30 bytes"):
        erdma_mpa.parse(raw[:29])
    with pytest.raises(MpaFormatError, match="not an MPA key"):
        erdma_mpa.parse(b"X" * 16 + raw[16:])
