"""MPA v1 (RFC 5044) has no RTR, but iw_cxgb4's peer-to-peer mode predates RFC 6581: the
revision-1 branches of process_mpa_reply and process_mpa_request set
``ep->mpa_attr.p2p_type = p2p_type`` when ``peer2peer`` is on, and rdma_init then has
the initiator's firmware send that RTR (build_rtr_msg: p2p_type 1 a zero-length RDMA Read
Request with sink and source STag 1 and TO 1, p2p_type 0 a zero-length RDMA Write to
STag 1, TO 1). The RTR-mismatch check (``version == 2 && peer2peer && p2p_type !=
local``) does not apply to v1. c4iw_accept_cr under v1 raises an IRD of 0 to 1 with
``peer2peer``; connect_request_upcall reports IRD/ORD cur_max_read_depth under v1. The
other stacks under v1: irdma_cm_event_connected posts send_rdma0_op's RTR (a zero-length
Read by default) at every revision; siw_proc_mpareply takes its RTR mode from the v2
block only, so siw sends none under v1."""

from __future__ import annotations

import pytest
from helpers.cxgb4_lab import IP_A, IP_B, KEY_REQ, PORT, cxgb4, payloads

from mpa_emu.net import Host, Manual, Network
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.wire import ddp, mpa

MS = 1_000_000


def _fpdu(data: bytes) -> ddp.DdpSegment:
    fpdu = mpa.unframe_fpdu(data)
    assert fpdu.crc_ok
    return ddp.parse_segment(fpdu.ulpdu)


def _fpdus(net: Network, sender: str) -> list[ddp.DdpSegment]:
    out = payloads(net, sender)
    start = next(i for i, p in enumerate(out) if p[:16] in (KEY_REQ, b"MPA ID Rep Frame"))
    return [_fpdu(p) for p in out[start + 1:]]


def _pair(init: dict[str, object], stack: str, resp: dict[str, object]
          ) -> tuple[Network, Host, Host]:
    net = Network(seed=7)
    a = cxgb4(net, "a", IP_A, init)
    b = net.add_host("b", IP_B, stack=stack, params=resp)
    b.listen(PORT)
    a.connect(IP_B, PORT, ird=4, ord=4)
    net.run_for(20 * MS)
    return net, a, b


@pytest.mark.parametrize(("stack", "params"), [
    ("cxgb4", {}), ("cxgb4", {"mpa_rev": 1}), ("irdma", {}), ("siw", {}),
])
def test_a_v1_initiator_with_peer2peer_sends_the_read_rtr(
        stack: str, params: dict[str, object]) -> None:
    net, a, b = _pair({"mpa_rev": 1}, stack, params)
    request = payloads(net, "a")[0]
    assert request[:16] == KEY_REQ and request[17] == 1  # a v1 request, no block
    (rtr,) = _fpdus(net, "a")
    assert rtr.opcode == ddp.Opcode.READ_REQUEST and rtr.read_request is not None
    rr = rtr.read_request
    assert (rr.sink_stag, rr.sink_to, rr.size, rr.src_stag, rr.src_to) == (1, 1, 0, 1, 1)
    (answer,) = _fpdus(net, "b")  # every responder's QP answers the zero-length Read
    assert answer.opcode == ddp.Opcode.READ_RESPONSE and answer.payload == b""
    (rep,) = a.upcalls  # connect_reply_upcall, v1: IRD/ORD cur_max_read_depth
    assert (rep.event, rep.status, rep.ird, rep.ord) == (IwEvent.CONNECT_REPLY, 0, 32, 32)
    assert [u.event for u in b.upcalls] == [IwEvent.CONNECT_REQUEST, IwEvent.ESTABLISHED]


def test_a_v1_write_rtr_is_sent_even_where_v2_would_be_an_rtr_mismatch() -> None:
    # the responder's local p2p_type is Read; under v2 this pair is the RTR-mismatch
    # Terminate, under v1 nothing is compared and the initiator's Write RTR goes out
    net, a, b = _pair({"mpa_rev": 1, "p2p_type": 0}, "cxgb4", {})
    (rtr,) = _fpdus(net, "a")
    head = rtr.header
    assert rtr.tagged and rtr.opcode == ddp.Opcode.WRITE and rtr.payload == b""
    assert isinstance(head, ddp.TaggedHeader) and (head.stag, head.to) == (1, 1)
    assert [(u.event, u.status) for u in a.upcalls] == [(IwEvent.CONNECT_REPLY, 0)]
    assert [u.event for u in b.upcalls] == [IwEvent.CONNECT_REQUEST, IwEvent.ESTABLISHED]


def test_a_v1_initiator_without_peer2peer_sends_no_rtr() -> None:
    net, a, _b = _pair({"mpa_rev": 1, "peer2peer": 0}, "cxgb4", {})
    assert _fpdus(net, "a") == []  # FW_RI_INIT_P2PTYPE_DISABLED
    assert [(u.event, u.status) for u in a.upcalls] == [(IwEvent.CONNECT_REPLY, 0)]


def test_the_other_stacks_under_v1_irdma_sends_its_rtr_siw_none() -> None:
    for stack, params, opcode in (("irdma", {"mpa_rev": 1}, ddp.Opcode.READ_REQUEST),
                                  ("siw", {"mpa_version": 1, "peer_to_peer": 1}, None)):
        net = Network(seed=7)
        a = net.add_host("a", IP_A, stack=stack, params=params)
        b = cxgb4(net, "b", IP_B)
        b.listen(PORT)
        a.connect(IP_B, PORT, ird=4, ord=4)
        net.run_for(20 * MS)
        request = payloads(net, "a")[0]
        assert request[:16] == KEY_REQ and request[17] == 1
        sent = _fpdus(net, "a")
        assert [s.opcode for s in sent] == ([] if opcode is None else [opcode])
        assert [(u.event, u.status) for u in a.upcalls] == [(IwEvent.CONNECT_REPLY, 0)]


@pytest.mark.parametrize(("peer2peer", "ord_seen"), [(1, 1), (0, 0)])
def test_c4iw_accept_cr_under_v1_raises_ird_0_to_1_with_peer2peer(
        peer2peer: int, ord_seen: int) -> None:
    net = Network(seed=7)
    a = cxgb4(net, "a", IP_A, {"mpa_rev": 1})
    b = cxgb4(net, "b", IP_B, {"peer2peer": peer2peer})
    b.listen(PORT, policy=Manual())
    a.connect(IP_B, PORT, ird=4, ord=4)
    net.run_for(5 * MS)
    (req,) = b.events(IwEvent.CONNECT_REQUEST)
    assert (req.ird, req.ord) == (32, 32)  # v1: "Send max supported"
    b.core.accept(req.conn, ird=0, ord=0, now_ns=net.now_ns)
    net.run_for(5 * MS)
    (est,) = b.events(IwEvent.ESTABLISHED)  # established_upcall: ird = ep->ord, ord = ep->ird
    assert (est.ird, est.ord) == (0, ord_seen)


def test_an_echoing_application_accepts_a_v1_request_with_what_it_was_told() -> None:
    # rdma_cm hands the CONNECT_REQUEST's IRD/ORD to the application (cur_max_read_depth
    # under v1); accepting with them, ep->ird and ep->ord are 32
    _net, _a, b = _pair({"mpa_rev": 1}, "cxgb4", {})
    (est,) = b.events(IwEvent.ESTABLISHED)
    assert (est.ird, est.ord) == (32, 32)
