"""cxgb4 and irdma on one network, both ways. The expected side comes from the two
drivers' sources: irdma offers both RTR types and picks READ when the reply allows it
(irdma_build_mpa_v2, irdma_negotiate_mpa_v2_ird_ord); cxgb4's process_mpa_request takes
the WRITE bit first, and send_mpa_reply answers with its local p2p_type."""

from __future__ import annotations

from helpers.cxgb4_lab import IP_A, IP_B, KEY_REP, KEY_REQ, PORT, cxgb4, make_net, payloads
from mpa_emu.stacks.contract.events import IwEvent

from mpa_emu.wire import ddp, mpa

MS = 1_000_000


def _words(frame: bytes) -> tuple[int, int]:
    return int.from_bytes(frame[20:22], "big"), int.from_bytes(frame[22:24], "big")


def _segment(data: bytes) -> ddp.DdpSegment:
    fpdu = mpa.unframe_fpdu(data)
    assert fpdu.crc_ok
    return ddp.parse_segment(fpdu.ulpdu)


def test_irdma_initiator_cxgb4_responder() -> None:
    net = make_net()
    i = net.add_host("i", IP_A)  # irdma
    c = cxgb4(net, "c", IP_B)
    c.listen(PORT)
    i.connect(IP_B, PORT, private_data=b"from irdma", ird=4, ord=8)
    net.run_for(10 * MS)
    request = payloads(net, "i")[0]
    assert request.startswith(KEY_REQ)
    ird_word, ord_word = _words(request)
    assert ord_word & 0xC000 == 0xC000  # irdma offers WRITE and READ
    req, est = c.upcalls
    assert (req.event, req.private_data, req.ird, req.ord) == \
        (IwEvent.CONNECT_REQUEST, b"from irdma", ird_word & 0x3FFF, ord_word & 0x3FFF)
    assert c.node(req.conn).p2p_type == 0  # FW_RI_INIT_P2PTYPE_RDMA_WRITE: C checked first
    reply = payloads(net, "c")[0]
    assert reply.startswith(KEY_REP)
    # send_mpa_reply: A, and the *local* p2p_type (read: D), not the negotiated write
    r_ird, r_ord = _words(reply)
    assert r_ird & 0x8000 and r_ord & 0xC000 == 0x4000
    assert (r_ird & 0x3FFF, r_ord & 0x3FFF) == (8, 4)  # the echoed accept
    assert est.event == IwEvent.ESTABLISHED
    (rep,) = i.upcalls
    assert (rep.event, rep.status) == (IwEvent.CONNECT_REPLY, 0)
    # irdma picks READ from the reply and sends its read RTR; the adapter answers it
    rtr = _segment(payloads(net, "i")[1])
    assert rtr.opcode == ddp.Opcode.READ_REQUEST and rtr.read_request is not None
    resp = _segment(payloads(net, "c")[1])
    head = resp.header
    assert resp.opcode == ddp.Opcode.READ_RESPONSE and isinstance(head, ddp.TaggedHeader)
    assert (head.stag, head.to) == (rtr.read_request.sink_stag, rtr.read_request.sink_to)


def test_cxgb4_initiator_irdma_responder() -> None:
    net = make_net()
    i = net.add_host("i", IP_A)
    c = cxgb4(net, "c", IP_B)
    i.listen(PORT)
    c.connect(IP_A, PORT, private_data=b"from cxgb4", ird=4, ord=8)
    net.run_for(10 * MS)
    reply = payloads(net, "i")[0]
    assert reply.startswith(KEY_REP)
    r_ird, r_ord = _words(reply)
    assert r_ird & 0x8000 and r_ord & 0x4000  # irdma answers a READ offer with READ
    (rep,) = c.upcalls
    assert (rep.event, rep.status) == (IwEvent.CONNECT_REPLY, 0)
    # process_mpa_reply (relaxed): ep->ord 8 drops to the responder's IRD when lower,
    # ep->ird 4 becomes the responder's ORD (it is within max_ordird_qp);
    # connect_reply_upcall reports ird = ep->ord, ord = ep->ird
    resp_ird, resp_ord = r_ird & 0x3FFF, r_ord & 0x3FFF
    assert resp_ord <= 32
    assert (rep.ird, rep.ord) == (min(8, resp_ird), resp_ord)
    rtr = _segment(payloads(net, "c")[1])
    assert rtr.read_request is not None
    assert (rtr.read_request.sink_stag, rtr.read_request.src_stag) == (1, 1)
    assert [u.event for u in i.upcalls] == [IwEvent.CONNECT_REQUEST, IwEvent.ESTABLISHED]


def test_close_from_either_side_between_irdma_and_cxgb4() -> None:
    for closer in ("c", "i"):
        net = make_net()
        i = net.add_host("i", IP_A)
        c = cxgb4(net, "c", IP_B)
        c.listen(PORT)
        conn = i.connect(IP_B, PORT, ird=4, ord=4)
        net.run_for(10 * MS)
        if closer == "i":
            i.disconnect(conn)
        else:
            c.disconnect(c.upcalls[0].conn)
        net.run_for(10 * MS)
        assert c.upcalls[-1].event == IwEvent.CLOSE and c.upcalls[-1].status == 0
        assert c.conns() == []
