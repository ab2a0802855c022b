"""rdma_conn_param.private_data_len is a u8 (include/rdma/rdma_cm.h); cma_accept_iw and
cma_connect_iw copy it into iw_cm_conn_param (u16), and irdma_accept/irdma_connect send
exactly that many bytes: the accept's MPA reply and the connect's MPA request carry the
length mod 256. With ``conn_pdata_u8`` off the length is taken whole."""

from __future__ import annotations

import pytest
from helpers.cm_harness import IP_P, PORT, Pair, make_pair
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.irdma.config import CmConfig, Quirks

DATA = bytes(range(256)) * 2


def _pd_length(payload: bytes) -> int:
    return int.from_bytes(payload[18:20], "big")  # RFC 5044 section 7.1


def _mpa_from(pair: Pair, src: str, key: bytes) -> bytes:
    for sent in pair.frames(src):
        if sent.seg.payload[:16] == key:
            return sent.seg.payload
    raise AssertionError(f"no {key!r} from {src}")


@pytest.mark.parametrize(("quirks", "length", "expected"), [
    (Quirks(), 300, 44), (Quirks(), 256, 0), (Quirks(), 100, 100),
    (Quirks(conn_pdata_u8=False), 300, 300),
])
def test_connect_private_data_length_is_a_u8(quirks: Quirks, length: int,
                                             expected: int) -> None:
    pair = make_pair(CmConfig(quirks=quirks))
    pair.p.create_listen(IP_P, PORT)
    pair.a.connect(next(iter(pair.a.addresses())), IP_P, PORT,
                   private_data=DATA[:length], now_ns=0)
    pair.pump()
    pair.at(10_000_000)
    req = _mpa_from(pair, "A", b"MPA ID Req Frame")
    assert _pd_length(req) == 4 + expected and req[24:] == DATA[:expected]


@pytest.mark.parametrize(("quirks", "length", "expected"), [
    (Quirks(), 257, 1), (Quirks(), 255, 255),
    (Quirks(conn_pdata_u8=False), 257, 257),
])
def test_accept_private_data_length_is_a_u8(quirks: Quirks, length: int,
                                            expected: int) -> None:
    pair = make_pair(cfg_p=CmConfig(quirks=quirks))
    pair.p.create_listen(IP_P, PORT)
    pair.a.connect(next(iter(pair.a.addresses())), IP_P, PORT, now_ns=0)
    pair.pump()
    pair.at(10_000_000)
    [req] = [u for u in pair.events("P") if u.event == IwEvent.CONNECT_REQUEST]
    pair.p.accept(req.conn, private_data=DATA[:length], now_ns=pair.now)
    pair.pump()
    rep = _mpa_from(pair, "P", b"MPA ID Rep Frame")
    assert _pd_length(rep) == 4 + expected and rep[24:] == DATA[:expected]
