"""Connect and accept agree on how much private data an MPA frame carries.

RFC 5044 section 7.1 caps PD_Length at 512 (IETF_MAX_PRIV_DATA_LEN); at MPA rev 2 the
4-byte RFC 6581 block counts in it (irdma_build_mpa_v2), so 508 bytes of ULP data fit a
v2 frame and 512 a v1 frame. With ``Quirks.conn_pdata_u8`` off (a u16 length) both verbs
refuse more with -EINVAL and send nothing; with the quirk on (rdma_conn_param's u8
length) the length wraps mod 256 before irdma_accept/irdma_connect see it."""

from __future__ import annotations

import errno

import pytest
from helpers.cm_harness import IP_P, PORT, Pair, make_pair
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.irdma.config import CmConfig, Quirks

OFF = Quirks(conn_pdata_u8=False)
DATA = bytes(range(256)) * 3


def _pd_length(payload: bytes) -> int:
    return int.from_bytes(payload[18:20], "big")  # RFC 5044 section 7.1


def _requested(cfg_a: CmConfig, cfg_p: CmConfig) -> tuple[Pair, int]:
    """A pair whose passive side holds a CONNECT_REQUEST; the connection id."""
    pair = make_pair(cfg_a, cfg_p)
    pair.p.create_listen(IP_P, PORT)
    pair.a.connect(next(iter(pair.a.addresses())), IP_P, PORT, now_ns=0)
    pair.pump()
    pair.at(10_000_000)
    [req] = [u for u in pair.events("P") if u.event == IwEvent.CONNECT_REQUEST]
    return pair, req.conn


def _replies(pair: Pair) -> list[bytes]:
    return [s.seg.payload for s in pair.frames("P")
            if s.seg.payload[:16] == b"MPA ID Rep Frame"]


@pytest.mark.parametrize(("rev", "fits"), [(2, 508), (1, 512)])
def test_accept_refuses_private_data_over_pd_length_512_without_the_u8_quirk(
        rev: int, fits: int) -> None:
    cfg = CmConfig(mpa_rev=rev, quirks=OFF)
    pair, conn = _requested(cfg, cfg)
    with pytest.raises(CmError) as refused:
        pair.p.accept(conn, private_data=DATA[:fits + 1], now_ns=pair.now)
    assert refused.value.errno == errno.EINVAL
    assert f"PD_Length {fits + 1 + (4 if rev == 2 else 0)}" in str(refused.value)
    pair.pump()
    assert _replies(pair) == []  # nothing sent, the request still pending
    pair.p.accept(conn, private_data=DATA[:fits], now_ns=pair.now)
    pair.pump()
    [reply] = _replies(pair)
    assert _pd_length(reply) == 512


def test_accept_of_600_bytes_is_refused_as_connect_refuses_it() -> None:
    cfg = CmConfig(quirks=OFF)
    pair, conn = _requested(cfg, cfg)
    with pytest.raises(CmError) as accept:
        pair.p.accept(conn, private_data=DATA[:600], now_ns=pair.now)
    with pytest.raises(CmError) as connect:
        pair.a.connect(next(iter(pair.a.addresses())), IP_P, PORT,
                       private_data=DATA[:600], now_ns=pair.now)
    assert accept.value.errno == connect.value.errno == errno.EINVAL


@pytest.mark.parametrize(("rev", "fits"), [(2, 508), (1, 512)])
def test_connect_refuses_what_accept_refuses(rev: int, fits: int) -> None:
    pair = make_pair(CmConfig(mpa_rev=rev, quirks=OFF))
    local = next(iter(pair.a.addresses()))
    with pytest.raises(CmError) as refused:
        pair.a.connect(local, IP_P, PORT, private_data=DATA[:fits + 1], now_ns=0)
    assert refused.value.errno == errno.EINVAL
    assert pair.frames("A") == []
    pair.p.create_listen(IP_P, PORT)
    pair.a.connect(local, IP_P, PORT, private_data=DATA[:fits], now_ns=0)
    pair.pump()
    [req] = [s.seg.payload for s in pair.frames("A")
             if s.seg.payload[:16] == b"MPA ID Req Frame"]
    assert _pd_length(req) == 512
    # The emulator's own responder takes a request at the limit (irdma_parse_mpa).
    assert [u.event for u in pair.events("P")] == [IwEvent.CONNECT_REQUEST]


def test_accept_of_600_bytes_wraps_to_88_with_the_u8_quirk() -> None:
    pair, conn = _requested(CmConfig(), CmConfig())
    pair.p.accept(conn, private_data=DATA[:600], now_ns=pair.now)
    pair.pump()
    [reply] = _replies(pair)
    assert 600 % 256 == 88
    assert _pd_length(reply) == 4 + 88 and reply[24:] == DATA[:88]
    # The initiator takes the reply: its connect completes.
    pair.at(pair.now + 10_000_000)
    assert [u.status for u in pair.events("A") if u.event == IwEvent.CONNECT_REPLY] == [0]
