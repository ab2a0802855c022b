"""irdma_build_mpa_v2 sets rcv_mark_en for every v2 frame it builds, the accept reply
included; a v1 reply (irdma_build_mpa_v1) leaves it alone."""

from __future__ import annotations

from helpers.audit_peer import handshake, make_host, v1_request, v2_request
from mpa_emu.stacks.irdma.config import CmConfig


def test_accept_with_iw_ooo_enables_receive_markers_on_the_qp() -> None:
    # irdma_build_mpa_v2: if (iwdev->iw_ooo) { flags |= M; cm_node->rcv_mark_en = true; }
    # irdma_accept builds the reply before irdma_cm_init_tsa_conn, which copies
    # rcv_mark_en into iwarp_info (rcv_mark_en, align_hdrs).
    p = make_host(CmConfig(gen=1, iw_ooo=True))
    pas = handshake(p, v2_request())
    conn = pas.conn()
    p.core.accept(conn, now_ns=p.now)
    [reply] = [s for s in p.drain() if s.payload]
    assert reply.payload[16] == 0xD0  # M|C|S
    qp = p.core.qp(conn)
    assert qp is not None and qp.init.rcv_markers


def test_v1_accept_with_iw_ooo_leaves_receive_markers_off() -> None:
    # the v1 reply goes through irdma_build_mpa_v1 only: flags C, no M, rcv_mark_en false
    p = make_host(CmConfig(gen=1, iw_ooo=True))
    pas = handshake(p, v1_request())
    conn = pas.conn()
    p.core.accept(conn, now_ns=p.now)
    [reply] = [s for s in p.drain() if s.payload]
    assert reply.payload[16:18] == bytes([0x40, 1])
    qp = p.core.qp(conn)
    assert qp is not None and not qp.init.rcv_markers
