"""The MPA request, reply and reject and the RTR a qedr host puts on the wire, byte for
byte, as qed_iwarp.c parameterises them: the ULP buffer is the RFC 6581 block of
qed_iwarp_mpa_v2_set_private followed by the private data, the header around it carries
C (crc_needed), S and Rev 2 (MPA_NEGOTIATION_TYPE_ENHANCED). Raw peers write and read
the other side byte by byte."""

from __future__ import annotations

import errno
import struct

from helpers.cxgb4_lab import (
    IP_A,
    IP_B,
    IP_RAW,
    KEY_REP,
    KEY_REQ,
    PORT,
    RawPeer,
    make_net,
    mpa_frame,
    payloads,
    raw_send,
)

from mpa_emu.net.host import Host
from mpa_emu.net.network import Network
from mpa_emu.net.policy import Accept, Manual, Reject
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.wire import ddp, mpa

MS = 1_000_000
C_S = mpa.FLAG_CRC | mpa.FLAG_ENHANCED


def _block(ird_word: int, ord_word: int) -> bytes:
    return struct.pack("!HH", ird_word, ord_word)


def _active(params: dict[str, object] | None = None, *, pd: bytes = b"hello", ird: int = 4,
            ord: int = 8) -> tuple[Network, Host, Host, int, int]:
    net = make_net()
    a = net.add_host("a", IP_A, stack="qedr", params=params)
    raw = net.add_host("raw", IP_B)
    raw.listen(PORT)
    conn = a.connect(IP_B, PORT, private_data=pd, ird=ird, ord=ord)
    net.run_for(MS)
    core = raw.core
    assert isinstance(core, RawPeer)
    (sock,) = core.socks("accepted")
    return net, a, raw, sock, conn


def _request(raw: Host, sock: int) -> bytes:
    core = raw.core
    assert isinstance(core, RawPeer)
    return core.received[sock]


def _passive(params: dict[str, object] | None = None, policy: object = None
             ) -> tuple[Network, Host, Host, int]:
    net = make_net()
    b = net.add_host("b", IP_B, stack="qedr", params=params)
    raw = net.add_host("raw", IP_RAW)
    b.listen(PORT, policy=policy or Manual())  # type: ignore[arg-type]
    sock = raw.connect(IP_B, PORT)
    net.run_for(MS)
    return net, b, raw, sock


def test_request_offers_send_write_and_read_with_crc() -> None:
    # qed_iwarp_connect: rtr_type SEND|WRITE|READ (peer2peer); qed_iwarp_mpa_v2_set_private
    # ird | P2P | SEND_RTR, ord | WRITE_RTR | READ_RTR; crc_needed 1, mode ENHANCED
    _net, _a, raw, sock, _conn = _active()
    assert _request(raw, sock) == (KEY_REQ + bytes((C_S, 2)) + (9).to_bytes(2, "big")
                                   + _block(0xC004, 0xC008) + b"hello")


def test_request_ord_zero_becomes_one_with_the_read_rtr() -> None:
    # qed_iwarp_connect: (rtr_type & MPA_RTR_TYPE_ZERO_READ) && ord == 0 -> ord = 1
    _net, _a, raw, sock, _conn = _active(pd=b"", ird=0, ord=0)
    assert _request(raw, sock)[16:] == bytes((C_S, 2, 0, 4)) + _block(0xC000, 0xC001)


def test_request_without_peer2peer_has_no_rtr_bits() -> None:
    # qed_iwarp_connect: !peer2peer -> MPA_RTR_TYPE_NONE; set_private writes the values only
    _net, _a, raw, sock, _conn = _active({"peer2peer": False}, pd=b"", ord=0)
    assert _request(raw, sock)[20:] == _block(0x0004, 0x0000)


def test_basic_mode_request_is_rev_1_without_a_block() -> None:
    # MPA_NEGOTIATION_TYPE_BASIC: qed_iwarp_mpa_v2_set_private adds nothing
    _net, _a, raw, sock, _conn = _active({"mpa_rev": 1, "crc_needed": False})
    assert _request(raw, sock) == KEY_REQ + bytes((0, 1, 0, 5)) + b"hello"


def test_connect_refuses_ord_or_ird_above_32() -> None:
    import pytest

    from mpa_emu.stacks.contract.errors import CmError
    net = make_net()
    a = net.add_host("a", IP_A, stack="qedr")
    net.add_host("raw", IP_B)
    with pytest.raises(CmError) as info:
        a.connect(IP_B, PORT, ord=33)
    assert info.value.errno == errno.EINVAL  # qed_iwarp_connect: QED_IWARP_ORD_DEFAULT
    assert a.conns() == [] and not net.frames


def test_enhanced_reply_sends_the_write_rtr_and_parses_ird_ord() -> None:
    net, a, raw, sock, conn = _active()
    reply = mpa_frame(KEY_REP, C_S, 2, _block(0x8000 | 9, 0xC000 | 3) + b"ok")
    raw_send(net, raw, sock, reply)
    net.run_for(MS)
    # qed_iwarp_parse_private_data: IRD = the reply's ORD, ORD = the reply's IRD
    (up,) = a.upcalls
    assert (up.event, up.status, up.ird, up.ord) == (IwEvent.CONNECT_REPLY, 0, 3, 9)
    assert (up.private_data, up.private_data_len) == (b"ok", 2)
    # qed_iwarp_send_rtr: the firmware's RTR, a zero-length RDMA Write (fw_rtr_order 0)
    rtr = payloads(net, "a")[-1]
    assert rtr == mpa.frame_fpdu(ddp.rdma_write(b"", 0, 0))
    assert a.node(conn).state == "ESTABLISHED" and a.qp_state(conn).iwarp_state == "RTS"


def test_reply_offering_only_read_gets_the_read_rtr() -> None:
    net, a, raw, sock, _conn = _active()
    raw_send(net, raw, sock, mpa_frame(KEY_REP, C_S, 2, _block(0x8008, 0x4004)))
    net.run_for(MS)
    fpdu = mpa.unframe_fpdu(payloads(net, "a")[-1])
    seg = ddp.parse_segment(fpdu.ulpdu)
    assert seg.read_request is not None and seg.read_request.size == 0
    assert a.upcalls[0].status == 0


def test_v1_reply_loses_four_bytes_of_private_data() -> None:
    # qed_iwarp_mpa_complete -> qed_iwarp_parse_private_data tests the local mpa_rev
    # (ENHANCED): a v1 reply's first 4 bytes become IRD/ORD and leave the private data
    net, a, raw, sock, _conn = _active()
    raw_send(net, raw, sock, mpa_frame(KEY_REP, mpa.FLAG_CRC, 1,
                                       _block(0x0002, 0x0007) + b"rest"))
    net.run_for(MS)
    (up,) = a.upcalls
    assert (up.status, up.private_data, up.private_data_len) == (0, b"rest", 4)
    assert (up.ird, up.ord) == (7, 2)
    # no ENHANCED_MPA_REPLY_ARRIVED, so no qed_iwarp_send_rtr: nothing after the request
    assert len(payloads(net, "a")) == 1


def test_v1_reply_shorter_than_four_bytes_wraps_the_length() -> None:
    # ulp_data_len - 4 in a u16, then the u8 of struct iw_cm_event: 2 - 4 -> 0xfffe -> 254
    net, a, raw, sock, _conn = _active()
    raw_send(net, raw, sock, mpa_frame(KEY_REP, 0, 1, b"ab"))
    net.run_for(MS)
    (up,) = a.upcalls
    assert (up.status, up.private_data_len) == (0, 254)
    assert net.trace is not None
    assert [r for r in net.trace.records if r.kind == "kernel_quirk" and r.host == "a"]


def test_reply_ird_below_our_ord_is_insufficient_ird() -> None:
    # the firmware's check (assumed, docs/stacks/qedr.md): IWARP_CONN_ERROR_MPA_INSUF_IRD,
    # which qed_iwarp_mpa_complete maps to -ECONNREFUSED; the firmware resets the TCP
    net, a, raw, sock, _conn = _active()
    raw_send(net, raw, sock, mpa_frame(KEY_REP, C_S, 2, _block(0x8000 | 7, 0xC000 | 3)))
    net.run_for(MS)
    assert [(u.event, u.status) for u in a.upcalls] == [
        (IwEvent.CONNECT_REPLY, -errno.ECONNREFUSED)]
    assert a.conns() == []


def test_reply_with_p2p_and_no_shared_rtr_is_a_mismatch() -> None:
    # IWARP_CONN_ERROR_MPA_RTR_MISMATCH -> -ECONNREFUSED (qed_iwarp_mpa_complete)
    net, a, raw, sock, _conn = _active({"rtr_type": 2})
    raw_send(net, raw, sock, mpa_frame(KEY_REP, C_S, 2, _block(0x8004, 0x4008)))
    net.run_for(MS)
    assert [(u.event, u.status) for u in a.upcalls] == [
        (IwEvent.CONNECT_REPLY, -errno.ECONNREFUSED)]


def test_reply_accepts_with_every_shared_rtr_type() -> None:
    # qed_iwarp_mpa_received: rtr_type = offered & ours; qed_iwarp_accept: ORD down to the
    # request's IRD; qed_iwarp_mpa_v2_set_private writes every bit kept
    net, b, raw, sock = _passive(policy=Accept(private_data=b"yes"))
    request = mpa_frame(KEY_REQ, C_S, 2, _block(0x8000 | 2, 0xC000 | 5) + b"hi")
    raw_send(net, raw, sock, request)
    net.run_for(MS)
    (req,) = b.upcalls
    # CONNECT_REQUEST: cm_info.ord and .ird of the request, the block cut off
    assert (req.event, req.ird, req.ord, req.private_data) == (
        IwEvent.CONNECT_REQUEST, 2, 5, b"hi")
    reply = payloads(net, "b")[0]
    # the application echoes: IRD = the request's ORD (5), ORD = its IRD (2)
    assert reply == KEY_REP + bytes((C_S, 2, 0, 7)) + _block(0x8005, 0xC002) + b"yes"


def test_request_with_no_shared_rtr_gets_all_of_ours() -> None:
    # "if we're left with no match send our capabilities"
    net, _b, raw, sock = _passive({"rtr_type": 4}, policy=Accept())
    raw_send(net, raw, sock, mpa_frame(KEY_REQ, C_S, 2, _block(0x8001, 0x8001)))
    net.run_for(MS)
    assert payloads(net, "b")[0][20:24] == _block(0x8001, 0x4001)


def test_request_values_are_capped_at_32() -> None:
    net, b, raw, sock = _passive()
    raw_send(net, raw, sock, mpa_frame(KEY_REQ, C_S, 2, _block(0x8000 | 100, 0x4000 | 40)))
    net.run_for(MS)
    (req,) = b.upcalls
    assert (req.ird, req.ord) == (32, 32)  # min_t(u16, ..., QED_IWARP_*_DEFAULT)


def test_v1_request_is_taken_as_32_32_and_answered_v1() -> None:
    net, b, raw, sock = _passive(policy=Accept(private_data=b"v1"))
    raw_send(net, raw, sock, mpa_frame(KEY_REQ, mpa.FLAG_CRC, 1, b"abc"))
    net.run_for(MS)
    req = b.upcalls[0]
    assert (req.ird, req.ord, req.private_data) == (32, 32, b"abc")
    assert payloads(net, "b")[0] == KEY_REP + bytes((mpa.FLAG_CRC, 1, 0, 2)) + b"v1"
    # no RTR negotiated: the handshake completes with the reply
    assert [u.event for u in b.upcalls] == [IwEvent.CONNECT_REQUEST, IwEvent.ESTABLISHED]


def test_reject_carries_the_request_s_values_and_rtr_types() -> None:
    net, b, raw, sock = _passive(policy=Reject(private_data=b"no"))
    raw_send(net, raw, sock, mpa_frame(KEY_REQ, C_S, 2, _block(0x8003, 0xC006)))
    net.run_for(MS)
    rej = payloads(net, "b")[0]
    # qed_iwarp_reject: set_private with cm_info of the request; R, C, S
    assert rej == KEY_REP + bytes((mpa.FLAG_REJECT | C_S, 2, 0, 6)) \
        + _block(0x8003, 0xC006) + b"no"
    # qedr_iw_passive_complete: -ECONNREFUSED without a QP: no upcall after the request
    assert [u.event for u in b.upcalls] == [IwEvent.CONNECT_REQUEST]
    assert b.conns() == []


def test_responder_waits_for_the_rtr_before_established() -> None:
    net, b, raw, sock = _passive(policy=Accept())
    raw_send(net, raw, sock, mpa_frame(KEY_REQ, C_S, 2, _block(0x8004, 0xC004)))
    net.run_for(MS)
    assert [u.event for u in b.upcalls] == [IwEvent.CONNECT_REQUEST]
    raw_send(net, raw, sock, mpa.frame_fpdu(ddp.read_rtr()))
    net.run_for(MS)
    assert [(u.event, u.status) for u in b.upcalls][-1] == (IwEvent.ESTABLISHED, 0)
    # the firmware answers the zero-length Read Request
    resp = mpa.unframe_fpdu(payloads(net, "b")[-1])
    assert resp.ulpdu[1] & ddp.RDMAP_OPCODE_MASK == ddp.Opcode.READ_RESPONSE


def test_an_rtr_in_the_request_s_segment_is_taken_after_the_reply() -> None:
    net, b, raw, sock = _passive(policy=Accept())
    request = mpa_frame(KEY_REQ, C_S, 2, _block(0x8004, 0x8004))
    raw_send(net, raw, sock, request + mpa.frame_fpdu(ddp.rdma_write(b"", 0, 0)))
    net.run_for(MS)
    assert [(u.event, u.status) for u in b.upcalls] == [(IwEvent.CONNECT_REQUEST, 0),
                                                        (IwEvent.ESTABLISHED, 0)]
