"""siw's RDMA Read as the requester (siw_post_send SIW_OP_READ, siw_qp_prepare_tx,
siw_read_to_orq) and the Read Response it receives (siw_proc_rresp): the first segment
must match the Read Request at the head of the ORQ (siw_rresp_check_ntoh: sink STag, TO,
and for a one-segment response the length), the sink memory is resolved on the first
bytes (siw_check_sge: no region is a DDP tagged buffer error, siw_tagged_error), the bytes
land at the sink TO. The expected FPDUs are packed here from RFC 5040 section 4.4 and
RFC 5041 section 4."""

from __future__ import annotations

import struct

import pytest
from stacks.siw.test_siw_after_rts import D, M, after_reply, fpdu, inject, responder, siw_term

from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.wire import ddp

SINK, SINK_TO, SIZE, SOURCE, SOURCE_TO = 0x5A01, 0x10000, 24, 0x7701, 0x2000


def _read_request(msn: int) -> bytes:
    """Untagged, QN 1, the MSN, MO 0; sink STag/TO, size, source STag/TO."""
    return fpdu(bytes([0x41, 0x41]) + struct.pack("!IIII", 0, 1, msn, 0)
                + struct.pack("!IQIIQ", SINK, SINK_TO, SIZE, SOURCE, SOURCE_TO))


def test_post_read_sends_the_read_request_and_places_the_response_in_the_sink() -> None:
    p, sock, conn = responder()
    p.siw.register_mr(SINK, SIZE, va=SINK_TO)
    p.siw.post_read(conn, SINK, SINK_TO, SIZE, SOURCE, SOURCE_TO, now_ns=p.now)
    p.run(p.now + 1_000_000)
    # ddp_msn[RDMAP_UNTAGGED_QN_RDMA_READ] starts at 0: the first Read Request has MSN 1.
    assert after_reply(p) == _read_request(1)
    half = SIZE // 2
    inject(p, sock, fpdu(ddp.read_response(b"a" * half, SINK, SINK_TO, last=False)),
           fpdu(ddp.read_response(b"b" * half, SINK, SINK_TO + half, last=True)))
    assert after_reply(p) == _read_request(1)  # nothing more: no Terminate
    assert p.siw.mr_data(SINK) == b"a" * half + b"b" * half


def test_a_read_response_at_another_to_is_a_base_or_bounds_terminate() -> None:
    p, sock, conn = responder()
    p.siw.register_mr(SINK, SIZE, va=SINK_TO)
    p.siw.post_read(conn, SINK, SINK_TO, SIZE, SOURCE, SOURCE_TO, now_ns=p.now)
    p.run(p.now + 1_000_000)
    inject(p, sock, fpdu(ddp.read_response(b"x" * SIZE, SINK, SINK_TO + 8)))
    # siw_rresp_check_ntoh: "rresp off" -> DDP_ETYPE_TAGGED_BUF, DDP_ECODE_T_BASE_BOUNDS;
    # siw_send_terminate attaches iwarp_ctrl_tagged (M, D) with the payload length.
    attached = struct.pack("!HBBIQ", SIZE, 0xC1, 0x42, SINK, SINK_TO + 8)
    assert after_reply(p)[len(_read_request(1)):] == siw_term(1, 1, 0x01, M | D, attached)


def test_a_read_response_into_no_region_is_an_invalid_stag_terminate() -> None:
    p, sock, conn = responder()
    p.siw.post_read(conn, SINK, SINK_TO, SIZE, SOURCE, SOURCE_TO, now_ns=p.now)
    p.run(p.now + 1_000_000)
    inject(p, sock, fpdu(ddp.read_response(b"x" * SIZE, SINK, SINK_TO)))
    # siw_proc_rresp: siw_check_sge finds no memory for the sink lkey: "target mem
    # check", DDP_ETYPE_TAGGED_BUF with siw_tagged_error(-EINVAL): invalid STag.
    attached = struct.pack("!HBBIQ", SIZE, 0xC1, 0x42, SINK, SINK_TO)
    assert after_reply(p)[len(_read_request(1)):] == siw_term(1, 1, 0x00, M | D, attached)


def test_post_read_needs_rdma_mode() -> None:
    from helpers.siw_pair import PEER_IP, SIW_IP, Pair
    p = Pair()
    p.siw.create_listen(SIW_IP, 31000, now_ns=0)
    p.peer.connect(PEER_IP, SIW_IP, 31000, None, 0)
    p.run(1_000_000)
    with pytest.raises(CmError):
        p.siw.post_read(1, SINK, SINK_TO, SIZE, SOURCE, SOURCE_TO)
