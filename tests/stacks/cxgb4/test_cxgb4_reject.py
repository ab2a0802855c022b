"""Rejects: send_mpa_reject's frame, the u8 limits of the private data, what a cxgb4
initiator's process_mpa_reply makes of PD_Length over MPA_MAX_PRIVATE_DATA (256), and
the ``if (ep->plen)`` quirk of the v2 branch."""

from __future__ import annotations

import errno

import pytest
from helpers.cxgb4_lab import (
    IP_A,
    IP_B,
    KEY_REP,
    PORT,
    cxgb4,
    flags_of,
    make_net,
    mpa_frame,
    payloads,
    v2_words,
)
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.events import IwEvent

from mpa_emu.net.policy import Manual, Reject
from mpa_emu.wire import mpa

R_S = mpa.FLAG_REJECT | mpa.FLAG_ENHANCED


def _reject_with(pdata: bytes, params: dict[str, object] | None = None,
                 connect_pdata: bytes = b""):
    net = make_net()
    a = cxgb4(net, "a", IP_A, params)
    b = cxgb4(net, "b", IP_B, params)
    b.listen(PORT, policy=Reject(pdata))
    a.connect(IP_B, PORT, private_data=connect_pdata, ird=4, ord=8)
    net.run_for(1_000_000)
    return net, a, b


@pytest.mark.parametrize("size", [0, 1, 252])
def test_v2_reject_reaches_the_initiator_as_econnrefused(size: int) -> None:
    pdata = (bytes(range(256)) * 2)[:size]
    net, a, b = _reject_with(pdata)
    # send_mpa_reject: R, S, rev 2, the block of the request (ird 4, ord 8, A and the
    # local p2p_type bit D) and the private data
    assert payloads(net, "b") == [mpa_frame(KEY_REP, R_S, 2, v2_words(4, 8) + pdata)]
    (up,) = a.upcalls
    assert (up.event, up.status) == (IwEvent.CONNECT_REPLY, -errno.ECONNREFUSED)
    assert (up.private_data, up.private_data_len) == (pdata, size)
    assert (up.ird, up.ord) == (8, 4)  # connect_reply_upcall: ep->ord, ep->ird
    # c4iw_reject_cr: FIN after the reject; process_mpa_reply returns 2: the initiator RSTs
    assert "FA" in flags_of(net, "b")
    assert any("R" in f for f in flags_of(net, "a"))
    assert a.conns() == [] and b.conns() == []


@pytest.mark.parametrize("size", [253, 255])
def test_v2_reject_over_252_bytes_overflows_a_cxgb4_initiator(size: int) -> None:
    pdata = bytes(size)
    net, a, _b = _reject_with(pdata)
    frame = payloads(net, "b")[0]
    assert len(frame) == 20 + 4 + size > 276  # mpa_pkt[sizeof(mpa_message) + 256]
    (up,) = a.upcalls
    # process_mpa_reply: mpa_pkt_len + skb->len > sizeof(ep->mpa_pkt) -> -EINVAL, abort
    assert (up.event, up.status) == (IwEvent.CONNECT_REPLY, -errno.EINVAL)
    assert up.private_data == b""


def test_reject_private_data_is_a_u8() -> None:
    net = make_net()
    a = cxgb4(net, "a", IP_A)
    b = cxgb4(net, "b", IP_B)
    b.listen(PORT, policy=Manual())
    a.connect(IP_B, PORT, ird=4, ord=8)
    net.run_for(1_000_000)
    (req,) = b.upcalls
    sent = len(net.frames)
    with pytest.raises(CmError) as exc:
        b.reject(req.conn, private_data=bytes(256))
    assert exc.value.errno == errno.EINVAL
    assert len(net.frames) == sent  # nothing went out; the request is still pending
    b.reject(req.conn, private_data=bytes(255))
    net.run_for(1_000_000)
    assert payloads(net, "b")[0][18:20] == (4 + 255).to_bytes(2, "big")


def test_v1_reject_carries_255_bytes_and_the_upcall_reports_cur_max_read_depth() -> None:
    pdata = bytes(range(255))
    net, a, _b = _reject_with(pdata, {"mpa_rev": 1})
    assert payloads(net, "b") == [mpa_frame(KEY_REP, mpa.FLAG_REJECT, 1, pdata)]
    (up,) = a.upcalls
    assert (up.status, up.private_data, up.private_data_len) == \
        (-errno.ECONNREFUSED, pdata, 255)
    assert (up.ird, up.ord) == (32, 32)  # v1: cur_max_read_depth = min(32, 32)


def test_request_pd_length_256_leaves_ep_plen_0_and_the_reject_without_its_data() -> None:
    # 252 bytes + the 4-byte block: PD_Length 256, stored as (u8) 0 in ep->plen
    net, a, b = _reject_with(b"no", connect_pdata=bytes(range(252)))
    (req,) = b.upcalls
    # connect_request_upcall: private_data_len = ep->plen - 4, as u8: 252
    assert (req.private_data_len, req.private_data) == (252, bytes(range(252)))
    # send_mpa_reject copies pdata only `if (ep->plen)`: two zero bytes go out
    assert payloads(net, "b") == [mpa_frame(KEY_REP, R_S, 2, v2_words(4, 8) + b"\0\0")]
    (up,) = a.upcalls
    assert (up.status, up.private_data) == (-errno.ECONNREFUSED, b"\0\0")


def test_mpa_rev_0_rejects_with_a_rst_and_the_initiator_retries_for_ever() -> None:
    net, a, _b = _reject_with(b"x", {"mpa_rev": 0})
    # c4iw_reject_cr: mpa_rev == 0 -> abort: a RST, no reject frame
    assert payloads(net, "b") == []
    assert "RA" in flags_of(net, "b")
    # peer_abort in MPA_REQ_SENT retries with v1 unless mpa_rev == 1 or (mpa_rev == 2
    # and tried_with_mpa_v1): with mpa_rev 0 neither holds, so every RST (the mpa_rev 0
    # responder refuses rev 1: "MPA version mismatch") starts another attempt and the
    # ULP never hears back.
    requests = payloads(net, "a")
    assert requests[0][17] == 0 and len(requests) > 3
    assert {r[17] for r in requests[1:]} == {1}
    assert a.upcalls == []
