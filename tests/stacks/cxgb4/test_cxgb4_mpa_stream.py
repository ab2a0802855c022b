"""process_mpa_request and process_mpa_reply read the MPA frame over as many CPL_RX_DATA
as it takes (ep->mpa_pkt), check it in a fixed order at every call, and refuse bytes
past the frame. A raw peer writes the frames byte for byte."""

from __future__ import annotations

import errno
import itertools

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
    kernel_log,
    make_net,
    mpa_frame,
    raw_send,
    v2_words,
)
from mpa_emu.stacks.contract.events import IwEvent

from mpa_emu.net.policy import Manual
from mpa_emu.wire import mpa

MS = 1_000_000
C_S = mpa.FLAG_CRC | mpa.FLAG_ENHANCED


def _passive(params: dict[str, object] | None = None):
    net = make_net()
    b = cxgb4(net, "b", IP_B, params)
    raw = net.add_host("raw", IP_RAW)
    b.listen(PORT, policy=Manual())
    sock = raw.connect(IP_B, PORT)
    net.run_for(MS)
    return net, b, raw, sock


def _active(params: dict[str, object] | None = None):
    net = make_net()
    a = cxgb4(net, "a", IP_A, params)
    raw = net.add_host("raw", IP_B)
    raw.listen(PORT)
    conn = a.connect(IP_B, PORT, private_data=b"hi", ird=4, ord=8)
    net.run_for(MS)
    core = raw.core
    assert isinstance(core, RawPeer)
    (sock,) = core.socks("accepted")
    assert core.received[sock].startswith(KEY_REQ)
    return net, a, raw, sock, conn


@pytest.mark.parametrize("cuts", [(10,), (19, 20), (1, 22, 26), tuple(range(1, 29))])
def test_request_split_over_segments_is_reassembled(cuts: tuple[int, ...]) -> None:
    net, b, raw, sock = _passive()
    request = mpa_frame(KEY_REQ, C_S, 2, v2_words(4, 8) + b"hello")
    edges = (0, *cuts, len(request))
    for start, end in itertools.pairwise(edges):
        assert b.upcalls == []  # nothing before the last byte
        raw_send(net, raw, sock, request[start:end])
        net.run_for(MS)
    (up,) = b.upcalls
    assert (up.event, up.private_data, up.ird, up.ord) == \
        (IwEvent.CONNECT_REQUEST, b"hello", 4, 8)


def test_bytes_after_the_request_abort_without_an_upcall() -> None:
    net, b, raw, sock = _passive()
    raw_send(net, raw, sock, mpa_frame(KEY_REQ, C_S, 2, v2_words(4, 8)) + b"extra")
    net.run_for(MS)
    assert b.upcalls == []
    assert "RA" in flags_of(net, "b")  # return 2 -> c4iw_ep_disconnect(abrupt)


@pytest.mark.parametrize(("frame", "log"), [
    (mpa_frame(b"MPA ID Bad Frame", C_S, 2, v2_words(4, 8)), None),
    (mpa_frame(KEY_REQ, C_S, 3, v2_words(4, 8)),
     "process_mpa_request MPA version mismatch. Local = 2, Received = 3"),
    (mpa_frame(KEY_REQ, C_S, 2, v2_words(4, 8), pd_length=257), None),
])
def test_bad_requests_abort_without_an_upcall(frame: bytes, log: str | None) -> None:
    net, b, raw, sock = _passive()
    raw_send(net, raw, sock, frame)
    net.run_for(MS)
    assert b.upcalls == []
    assert "RA" in flags_of(net, "b")
    errs = [text for level, _fn, text in kernel_log(net, "b") if level == "err"]
    assert errs == ([] if log is None else [log])


def test_request_pd_length_256_is_accepted() -> None:
    net, b, raw, sock = _passive()
    raw_send(net, raw, sock, mpa_frame(KEY_REQ, C_S, 2, v2_words(4, 8) + bytes(252)))
    net.run_for(MS)
    (up,) = b.upcalls
    assert (up.private_data_len, up.private_data) == (252, bytes(252))


def test_v2_request_without_s_loses_its_first_four_bytes() -> None:
    net, b, raw, sock = _passive()
    # rev 2 without S: tried_with_mpa_v1 stays 0, so connect_request_upcall skips a
    # 4-byte block that is not there and reports plen - 4
    raw_send(net, raw, sock, mpa_frame(KEY_REQ, mpa.FLAG_CRC, 2, b"abcdefgh"))
    net.run_for(MS)
    (up,) = b.upcalls
    assert (up.private_data, up.private_data_len) == (b"efgh", 4)
    assert (up.ird, up.ord) == (0, 0)  # ep->ird/ord never set


def test_reply_split_over_two_segments_is_reassembled() -> None:
    net, a, raw, sock, conn = _active()
    reply = mpa_frame(KEY_REP, C_S, 2, v2_words(8, 4) + b"welcome")
    raw_send(net, raw, sock, reply[:20])
    net.run_for(MS)
    assert a.upcalls == []
    raw_send(net, raw, sock, reply[20:])
    net.run_for(MS)
    (up,) = a.upcalls
    assert (up.event, up.status, up.private_data) == (IwEvent.CONNECT_REPLY, 0, b"welcome")
    assert a.qp_state(conn).iwarp_state == "RTS"


def test_reply_followed_by_an_fpdu_in_one_segment_is_eproto() -> None:
    net, a, raw, sock, _conn = _active()
    raw_send(net, raw, sock, mpa_frame(KEY_REP, C_S, 2, v2_words(8, 4)) + bytes(8))
    net.run_for(MS)
    (up,) = a.upcalls
    # "If plen does not account for pkt size": -EPROTO, abort
    assert (up.status, any("R" in f for f in flags_of(net, "a"))) == (-errno.EPROTO, True)


def test_reject_of_pd_length_257_is_eproto_when_the_header_comes_first() -> None:
    net, a, raw, sock, _conn = _active()
    frame = mpa_frame(KEY_REP, mpa.FLAG_REJECT | mpa.FLAG_ENHANCED, 2,
                      v2_words(8, 4) + bytes(253))
    raw_send(net, raw, sock, frame[:20])
    net.run_for(MS)
    (up,) = a.upcalls
    # the header alone passes the buffer check; PD_Length 257 > MPA_MAX_PRIVATE_DATA
    assert up.status == -errno.EPROTO


def test_reply_with_a_newer_revision_is_eproto_and_logged() -> None:
    net, a, raw, sock, _conn = _active({"mpa_rev": 1})
    raw_send(net, raw, sock, mpa_frame(KEY_REP, C_S, 2, v2_words(8, 4)))
    net.run_for(MS)
    assert a.upcalls[0].status == -errno.EPROTO
    assert ("err", "process_mpa_reply",
            "process_mpa_reply MPA version mismatch. Local = 1, Received = 2") \
        in kernel_log(net, "a")
