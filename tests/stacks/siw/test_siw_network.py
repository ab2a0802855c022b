"""siw hosts on a Network: siw to siw, and siw against irdma both ways. Every expected
value is read from siw_cm.c (and irdma's cm.c for the irdma side), never from a run."""

from __future__ import annotations

import errno
import struct

from mpa_emu.stacks.contract.events import IwEvent

from mpa_emu.net.network import Network
from mpa_emu.net.policy import Accept, Reject
from mpa_emu.wire.segment import ACK, FIN, PSH, RST, SYN

KEY_REQ, KEY_REP = b"MPA ID Req Frame", b"MPA ID Rep Frame"
REQ_PD, REP_PD, REJ_PD = b"siw initiator private data", b"siw responder", b"go away"
S_NS = 1_000_000_000


def pair(a_stack: str = "siw", b_stack: str = "siw", *, a_params: dict[str, object] | None = None,
         b_params: dict[str, object] | None = None) -> tuple[Network, object, object]:
    net = Network(seed=4)
    a = net.add_host("a", "192.0.2.1", stack=a_stack, params=a_params or {})
    b = net.add_host("b", "192.0.2.2", stack=b_stack, params=b_params or {})
    return net, a, b


def payloads(net: Network, sender: str) -> list[bytes]:
    return [f.segment.payload for f in net.frames
            if f.sender == sender and f.segment is not None and f.segment.payload]


def events(host: object) -> list[tuple[IwEvent, int]]:
    return [(u.event, u.status) for u in host.upcalls]  # type: ignore[attr-defined]


def test_siw_to_siw_connect_accept_and_close() -> None:
    net, a, b = pair()
    b.listen(31000, policy=Accept(private_data=REP_PD))
    conn = a.connect(b, 31000, private_data=REQ_PD, ird=8, ord=4)
    net.run_for(S_NS)
    # siw_connect: flags MPA_RR_FLAG_ENHANCED only (no CRC, GSO, P2P by default), rev 2,
    # PD_Length = private data + the 4-byte mpa_v2_data; the block holds IRD 8, ORD 4.
    request, reply = payloads(net, "a")[0], payloads(net, "b")[0]
    assert request == KEY_REQ + struct.pack("!BBH", 0x10, 2, 4 + len(REQ_PD)) \
        + struct.pack("!HH", 8, 4) + REQ_PD
    # siw_proc_mpareq: cep->ord = peer IRD 8, cep->ird = peer ORD 4; siw_accept echoes
    # them (relaxed negotiation), so the reply's block says IRD 4, ORD 8; the reply keeps
    # the request's bits with the key turned into "Rep".
    assert reply == KEY_REP + struct.pack("!BBH", 0x10, 2, 4 + len(REP_PD)) \
        + struct.pack("!HH", 4, 8) + REP_PD
    up_b = b.upcalls
    # siw_cm_upcall: CONNECT_REQUEST swaps IRD/ORD (event.ird = cep->ord) and hides the
    # block; ESTABLISHED at once from siw_accept (no RTR without P2P).
    assert [(u.event, u.status) for u in up_b] == [(IwEvent.CONNECT_REQUEST, 0),
                                                   (IwEvent.ESTABLISHED, 0)]
    assert (up_b[0].private_data, up_b[0].private_data_len) == (REQ_PD, len(REQ_PD))
    assert (up_b[0].ird, up_b[0].ord, up_b[1].ird, up_b[1].ord) == (8, 4, 4, 8)
    # siw_proc_mpareply: cep->ird = rep_ord 8, cep->ord = rep_ird 4.
    (reply_up,) = a.upcalls
    assert (reply_up.event, reply_up.status, reply_up.private_data, reply_up.ird,
            reply_up.ord) == (IwEvent.CONNECT_REPLY, 0, REP_PD, 8, 4)
    assert a.node(conn).state.name == "RDMA_MODE"
    assert a.qp_state(conn).iwarp_state == "RTS"

    a.disconnect(conn)
    net.run()
    # siw_qp_cm_drop: CLOSE on the closing side; SIW_CM_WORK_PEER_CLOSE: DISCONNECT then
    # CLOSE on the other; both sockets released with a FIN.
    assert events(a)[-1] == (IwEvent.CLOSE, 0)
    assert events(b)[-2:] == [(IwEvent.DISCONNECT, 0), (IwEvent.CLOSE, 0)]
    fins = [f.sender for f in net.frames if f.segment.flags & FIN]
    assert fins == ["a", "b"]
    assert not any(f.segment.flags & RST for f in net.frames)
    assert a.node(conn) is None and b.conns() == []


def test_reject_with_private_data_reaches_the_initiator_as_connreset() -> None:
    net, a, b = pair()
    b.listen(31000, policy=Reject(private_data=REJ_PD))
    a.connect(b, 31000, private_data=REQ_PD, ird=8, ord=4)
    net.run()
    reject = payloads(net, "b")[0]
    # siw_reject: the reply header with MPA_RR_FLAG_REJECT added (0x10 | 0x20), the block
    # siw_proc_mpareq prepared (IRD = peer ORD 4, ORD = peer IRD 8), the private data.
    assert reject == KEY_REP + struct.pack("!BBH", 0x30, 2, 4 + len(REJ_PD)) \
        + struct.pack("!HH", 4, 8) + REJ_PD
    # siw_proc_mpareply: "got mpa reject" -> CONNECT_REPLY(-ECONNRESET), the block hidden.
    (up,) = a.upcalls
    assert (up.event, up.status, up.private_data, up.private_data_len) == (
        IwEvent.CONNECT_REPLY, -errno.ECONNRESET, REJ_PD, len(REJ_PD))
    assert events(b) == [(IwEvent.CONNECT_REQUEST, 0)]
    # siw_reject and the initiator's release both sock_release: a FIN each, no RST.
    assert sorted(f.sender for f in net.frames if f.segment.flags & FIN) == ["a", "b"]
    assert not any(f.segment.flags & RST for f in net.frames)
    texts = [r.fields["text"] for r in net.trace.of_kind("kernel_log")]
    assert any(t.endswith("siw_proc_mpareply: got mpa reject") for t in texts)


def test_accept_over_the_private_data_limit_fails_and_closes() -> None:
    net, a, b = pair()
    b.listen(31000, policy=Accept(private_data=b"x" * 253))
    a.connect(b, 31000)
    net.run()
    # siw_accept: max_priv_data = MPA_MAX_PRIVDATA (256) - 4 for an enhanced request:
    # 253 bytes -> -EINVAL, the socket released (a FIN); the initiator sees a peer close
    # in AWAIT_MPAREP: CONNECT_REPLY(-ECONNRESET) (siw_cm_work_handler, PEER_CLOSE).
    (failure,) = b.failures
    assert (failure.verb, failure.errno) == ("accept", errno.EINVAL)
    assert events(a) == [(IwEvent.CONNECT_REPLY, -errno.ECONNRESET)]
    assert len(payloads(net, "b")) == 0


def test_connect_over_the_private_data_limit_is_refused_at_once() -> None:
    net, a, b = pair()
    b.listen(31000)
    try:
        a.connect(b, 31000, private_data=b"x" * 257)
    except ValueError as exc:
        assert getattr(exc, "errno", None) == errno.EINVAL  # siw_connect: > MPA_MAX_PRIVDATA
    else:
        raise AssertionError("siw_connect took 257 bytes of private data")
    assert net.frames == []


def test_256_bytes_pass_siw_connect_but_the_frame_breaks_the_responders_limit() -> None:
    net, a, b = pair()
    b.listen(31000)
    a.connect(b, 31000, private_data=b"y" * 256)
    net.run()
    # PD_Length = 256 + 4 > MPA_MAX_PRIVDATA: siw_recv_mpa_rr returns -EPROTO, the
    # responder releases the endpoint with no upcall (FIN); the initiator, awaiting the
    # reply, gets CONNECT_REPLY(-ECONNRESET) from the peer close.
    assert payloads(net, "a")[0][18:20] == struct.pack("!H", 260)
    assert b.upcalls == []
    assert events(a) == [(IwEvent.CONNECT_REPLY, -errno.ECONNRESET)]


def test_irdma_initiator_to_siw_responder() -> None:
    net, a, b = pair("irdma", "siw")
    b.listen(31000, policy=Accept(private_data=REP_PD))
    a.connect(b, 31000, private_data=REQ_PD)
    net.run_for(S_NS)
    request, reply = payloads(net, "a")[0], payloads(net, "b")[0]
    ird_word, ord_word = struct.unpack_from("!HH", request, 20)
    assert ird_word & 0x8000 and ord_word & 0xC000 == 0xC000  # irdma: P2P, Write and Read
    # siw_proc_mpareq: P2P echoed, "Writes are preferred"; the C flag the request set is
    # kept (RFC 5044: CRC MUST be used if the peer requests it).
    flags = reply[16]
    rep_ird, rep_ord = struct.unpack_from("!HH", reply, 20)
    assert flags == request[16] and flags & 0x40
    assert rep_ird & 0x8000 and rep_ord & 0xC000 == 0x8000
    # siw_accept with an RTR picked waits for it (siw_sk_assign_rtr_upcalls): ESTABLISHED
    # comes from siw_rtr_data_ready after irdma's zero-length Write.
    assert events(b) == [(IwEvent.CONNECT_REQUEST, 0), (IwEvent.ESTABLISHED, 0)]
    assert b.upcalls[0].private_data == REQ_PD  # block hidden
    rtr = payloads(net, "a")[1]
    assert rtr[2] & 0x80 and rtr[3] & 0x0F == 0  # tagged, opcode 0: RDMA Write
    assert b.upcalls[1].time_ns > b.upcalls[0].time_ns
    # irdma's side: CONNECT_REPLY(0) with its v2 private data quirk (irdma_parse_mpa:
    # the reply's data and 4 bytes past the frame, Quirks.v2_pdata_plus4).
    assert events(a)[0] == (IwEvent.CONNECT_REPLY, 0)
    assert a.upcalls[0].private_data_len == len(REP_PD) + 4


def test_default_siw_initiator_is_reset_by_irdma() -> None:
    net, a, b = pair("siw", "irdma")
    b.listen(31000)
    a.connect(b, 31000, private_data=REQ_PD)
    net.run()
    # irdma refuses a v2 request without P2P before any upcall and resets it; siw sees
    # the socket closed in AWAIT_MPAREP: CONNECT_REPLY(-ECONNRESET).
    assert any(f.sender == "b" and f.segment.flags & RST for f in net.frames)
    assert b.upcalls == []
    assert events(a) == [(IwEvent.CONNECT_REPLY, -errno.ECONNRESET)]


def test_p2p_siw_initiator_sends_the_read_rtr_irdma_picks() -> None:
    net, a, b = pair("siw", "irdma", a_params={"peer_to_peer": True})
    b.listen(31000)
    a.connect(b, 31000, private_data=REQ_PD)
    net.run_for(S_NS)
    request = payloads(net, "a")[0]
    ird_word, ord_word = struct.unpack_from("!HH", request, 20)
    # siw_connect with peer_to_peer: P2P, and rtr_type = Read | Write.
    assert ird_word & 0x8000 and ord_word & 0xC000 == 0xC000
    # irdma picks Read; siw_qp_mpa_rts sends a zero-length Read Request: untagged, opcode
    # 1, QN 1, MSN 1, sink STag 0 (lkey), size 0, source STag 1 (rkey), CRC as negotiated.
    # ULPDU_Length: sizeof(struct iwarp_rdma_rreq) 48 - 2 (iwarp_pktinfo); DDP L|DV 1,
    # RDMAP RV 1 | opcode 1.
    rtr = payloads(net, "a")[1]
    ulpdu_len, ctrl, rdmap = struct.unpack_from("!HBB", rtr)
    assert (ulpdu_len, ctrl, rdmap) == (46, 0x41, 0x41)
    qn, msn, mo, sink_stag, sink_to, size, src_stag, src_to = struct.unpack_from(
        "!IIIIQIIQ", rtr, 8)
    assert (qn, msn, mo, sink_stag, sink_to, size, src_stag, src_to) == (1, 1, 0, 0, 0, 0,
                                                                          1, 0)
    assert events(a) == [(IwEvent.CONNECT_REPLY, 0)]
    assert events(b)[:2] == [(IwEvent.CONNECT_REQUEST, 0), (IwEvent.ESTABLISHED, 0)]


def test_siw_tcp_handshake_is_linux_shaped() -> None:
    net, a, b = pair()
    b.listen(31000)
    a.connect(b, 31000)
    net.run_for(S_NS)
    syn, synack, ack = (f.segment for f in net.frames[:3])
    assert (syn.flags, synack.flags, ack.flags) == (SYN, SYN | ACK, ACK)
    # tcp_options_write: MSS 1460, SACK_PERM folded before TS, NOP, WS 7.
    assert syn.options[:4] == bytes.fromhex("020405b4") and syn.options[4:8] == bytes.fromhex(
        "0402080a") and syn.options[16:] == bytes.fromhex("01030307")
    assert (syn.window, synack.window) == (64240, 65160)
    assert net.frames[3].segment.flags == PSH | ACK
