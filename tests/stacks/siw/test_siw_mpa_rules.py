"""siw's MPA rules against a peer whose bytes the test writes (a plain Linux-shaped TCP
socket): frames split over segments, the MPA timers, limits, markers, the reply checks
and the Terminate. Expected values come from siw_cm.c, siw_qp.c and iwarp.h."""

from __future__ import annotations

import errno
import struct

from helpers.siw_pair import KEY_REP, KEY_REQ, PEER_IP, SIW_IP, Pair, frame
from mpa_emu.stacks.contract.events import IwEvent

from mpa_emu.wire.segment import FIN, RST

MS = 1_000_000
S_NS = 1_000_000_000
PORT = 31000


def responder(params: dict[str, int | bool] | None = None) -> tuple[Pair, int]:
    """siw listening, the peer connected and established."""
    p = Pair(params or {})
    p.siw.create_listen(SIW_IP, PORT)
    sock = p.peer.connect(PEER_IP, SIW_IP, PORT, None, 0)
    p.run(MS)
    return p, sock


def initiator(params: dict[str, int | bool] | None = None) -> tuple[Pair, int, int]:
    """The peer listening, siw connected and its request sent; returns the siw conn
    and the peer's socket."""
    p = Pair(params or {})
    p.peer.listen(PEER_IP, PORT, 16)
    conn = p.siw.connect(SIW_IP, PEER_IP, PORT, private_data=b"hi", ird=8, ord=8, now_ns=0)
    p.run(MS)
    sock = next(e.sock for e in p.peer_events if e.kind == "accepted")
    return p, conn, sock


def after_request(p: Pair) -> bytes:
    """What the peer received after siw's MPA request (2 bytes of private data)."""
    data = p.peer_data()
    assert data[:16] == KEY_REQ
    return data[20 + struct.unpack_from("!H", data, 18)[0]:]


V2_REQ = frame(KEY_REQ, 0x10, 2, b"hello", struct.pack("!HH", 8, 8))


def test_request_split_over_segments_is_read_whole() -> None:
    p, sock = responder()
    p.peer.send(sock, V2_REQ[:10], p.now)
    p.run(p.now + 100 * MS)
    assert p.upcalls == []  # siw_recv_mpa_rr: -EAGAIN, header incomplete
    p.peer.send(sock, V2_REQ[10:23], p.now)
    p.run(p.now + 100 * MS)
    assert p.upcalls == []  # header complete, private data incomplete: -EAGAIN
    p.peer.send(sock, V2_REQ[23:], p.now)
    p.run(p.now + 100 * MS)
    (up,) = p.upcalls
    assert (up.event, up.status, up.private_data) == (IwEvent.CONNECT_REQUEST, 0, b"hello")


def test_reply_split_over_segments_is_read_whole() -> None:
    p, conn, sock = initiator()
    reply = frame(KEY_REP, 0x10, 2, b"ok", struct.pack("!HH", 8, 8))
    p.peer.send(sock, reply[:7], p.now)
    p.run(p.now + 100 * MS)
    # siw_proc_mpareply: -EAGAIN leaves out_err without an upcall
    assert p.upcalls == [] and p.siw.node(conn).state.name == "AWAIT_MPAREP"
    p.peer.send(sock, reply[7:], p.now)
    p.run(p.now + 100 * MS)
    (up,) = p.upcalls
    assert (up.event, up.status, up.private_data) == (IwEvent.CONNECT_REPLY, 0, b"ok")


def test_responder_mpa_timeout_is_5_seconds_and_silent() -> None:
    p, _ = responder()
    accepted_at = MS // 2  # handshake done well within the first millisecond
    p.run(20 * S_NS)
    # siw_accept_newconn queues SIW_CM_WORK_MPATIMEOUT with MPAREP_TIMEOUT (HZ * 5); in
    # AWAIT_MPAREQ it releases the endpoint: no upcall, the socket closed with a FIN.
    assert p.upcalls == []
    fin_times = [t for t, who, seg, _ in p.wire if who == "siw" and seg.flags & FIN]
    assert len(fin_times) == 1
    assert 5 * S_NS <= fin_times[0] <= 5 * S_NS + accepted_at + MS


def test_initiator_mpa_timeout_is_10_seconds() -> None:
    p, conn, _ = initiator()
    request_at = next(t for t, who, seg, _ in p.wire if who == "siw" and seg.payload)
    p.run(30 * S_NS)
    # siw_connect queues the timer in AWAIT_MPAREP: MPAREQ_TIMEOUT (HZ * 10);
    # SIW_CM_WORK_MPATIMEOUT then signals CONNECT_REPLY(-ETIMEDOUT) and releases.
    (up,) = p.upcalls
    assert (up.event, up.status) == (IwEvent.CONNECT_REPLY, -errno.ETIMEDOUT)
    assert up.time_ns == request_at + 10 * S_NS
    assert p.siw.node(conn) is None


def test_request_with_pd_length_over_the_limit_is_dropped() -> None:
    p, sock = responder()
    p.peer.send(sock, KEY_REQ + struct.pack("!BBH", 0x10, 2, 257), p.now)
    p.run(p.now + S_NS)
    # siw_recv_mpa_rr: PD_Length > MPA_MAX_PRIVDATA (256): -EPROTO, released, no upcall.
    assert p.upcalls == []
    assert any(seg.flags & FIN for seg in p.sent_by("siw"))


def test_request_with_markers_gets_a_reject_with_a_zero_block() -> None:
    p, sock = responder()
    p.peer.send(sock, frame(KEY_REQ, 0x90, 2, b"", struct.pack("!HH", 8, 8)), p.now)
    p.run(p.now + S_NS)
    # siw_proc_mpareq reject_conn: M cleared, R set; the block (enhanced already set) is
    # the still-zero cep->mpa.v2_ctrl; PD_Length 4; then -EOPNOTSUPP releases the socket.
    assert p.upcalls == []
    assert p.peer_data() == KEY_REP + struct.pack("!BBH", 0x30, 2, 4) + bytes(4)


def test_extra_bytes_after_the_request_are_a_protocol_error() -> None:
    p, sock = responder()
    p.peer.send(sock, V2_REQ + b"XYZW", p.now)
    p.run(p.now + S_NS)
    # siw_recv_mpa_rr reads to_rcv + 4 bytes: more than to_rcv is -EPROTO.
    assert p.upcalls == []
    assert any(t.endswith("siw_recv_mpa_rr: peer sent extra data: 4") for t in p.kernel_log())


def test_reply_without_crc_is_refused_when_crc_is_required() -> None:
    p, _conn, sock = initiator({"mpa_crc_required": True})
    request = next(s.payload for s in p.sent_by("siw") if s.payload)
    assert request[16] == 0x50  # siw_connect: C with S
    p.peer.send(sock, frame(KEY_REP, 0x10, 2, b"", struct.pack("!HH", 8, 8)), p.now)
    p.run(p.now + S_NS)
    (up,) = p.upcalls
    assert (up.event, up.status) == (IwEvent.CONNECT_REPLY, -errno.ECONNREFUSED)


def test_v1_reply_to_an_enhanced_request_is_connreset() -> None:
    p, _conn, sock = initiator()
    p.peer.send(sock, frame(KEY_REP, 0x00, 1, b"old"), p.now)
    p.run(p.now + S_NS)
    # "The responder MUST reply with MPA version 2 and MUST set MPA_RR_FLAG_ENHANCED"
    (up,) = p.upcalls
    assert (up.event, up.status) == (IwEvent.CONNECT_REPLY, -errno.ECONNRESET)


def test_wrong_reply_key_sends_siws_little_endian_terminate() -> None:
    p, _conn, sock = initiator()
    p.peer.send(sock, frame(KEY_REQ, 0x10, 2, b"", struct.pack("!HH", 8, 8)), p.now)
    p.run(p.now + S_NS)
    (up,) = p.upcalls
    assert (up.event, up.status) == (IwEvent.CONNECT_REPLY, -errno.EINVAL)
    term = after_request(p)
    # siw_send_terminate: struct iwarp_terminate (24 bytes) and the CRC field, zero
    # before RTS; ULPDU_Length 28 - (2 + 4) = 22; DDP L|DV1, RDMAP RV1 | opcode 7;
    # QN 2, MSN 1, MO 0.
    assert len(term) == 28
    assert struct.unpack_from("!HBBIIII", term) == (22, 0x41, 0x47, 0, 2, 1, 0)
    # The control word's bit-fields on a little-endian host: layer 2 (LLP) in bits 0-3,
    # etype 0 (MPA) in bits 4-7, ecode 4 (LLP_ECODE_INVALID_REQ_RESP) in bits 8-15,
    # stored little-endian: bytes 02 04 00 00 (RFC 5040's layout would be 20 04 00 00).
    assert term[20:24] == bytes([0x02, 0x04, 0x00, 0x00])
    assert term[24:] == bytes(4)


def test_p2p_reply_without_a_matching_rtr_terminates() -> None:
    p, _conn, sock = initiator({"peer_to_peer": True, "rtr_type": 1})
    request = next(s.payload for s in p.sent_by("siw") if s.payload)
    assert struct.unpack_from("!HH", request, 20) == (0x8000 | 8, 0x8000 | 8)
    reply = frame(KEY_REP, 0x10, 2, b"", struct.pack("!HH", 0x8000 | 8, 0x4000 | 8))
    p.peer.send(sock, reply, p.now)
    p.run(p.now + S_NS)
    (up,) = p.upcalls
    assert (up.event, up.status) == (IwEvent.CONNECT_REPLY, -errno.EINVAL)
    term = after_request(p)
    assert term[20:22] == bytes([0x02, 0x07])  # LLP_ECODE_NO_MATCHING_RTR


def test_peer_close_in_recvd_mpareq_releases_and_accept_then_fails() -> None:
    p, sock = responder()
    p.peer.send(sock, V2_REQ, p.now)
    p.run(p.now + 10 * MS)
    (req,) = p.upcalls
    p.peer.shutdown(sock, p.now)
    p.run(p.now + 10 * MS)
    # SIW_CM_WORK_PEER_CLOSE without a cm_id in RECVD_MPAREQ: "mpa req recvd, wait for
    # ULP", yet release_cep: the endpoint CLOSED; siw_accept then finds it out of state.
    try:
        p.siw.accept(req.conn, now_ns=p.now)
    except ValueError as exc:
        assert getattr(exc, "errno", None) == errno.ECONNRESET
    else:
        raise AssertionError("siw_accept took a closed endpoint")
    assert not any(seg.flags & RST for seg in p.sent_by("siw"))


def test_try_gso_sets_siws_own_flag_bit_and_the_reply_echoes_it() -> None:
    p, _conn, _sock = initiator({"try_gso": True})
    request = next(s.payload for s in p.sent_by("siw") if s.payload)
    # siw_connect: MPA_RR_FLAG_GSO_EXP, cpu_to_be16(0x0800): bit 0x08 of the flags byte.
    assert request[16] == 0x10 | 0x08
    q, sock = responder()
    q.peer.send(sock, frame(KEY_REQ, 0x18, 2, b"", struct.pack("!HH", 8, 8)), q.now)
    q.run(q.now + MS)
    (req,) = q.upcalls
    q.siw.accept(req.conn, now_ns=q.now)
    q.run(q.now + MS)
    reply = q.peer_data()
    assert reply[:16] == KEY_REP and reply[16] == 0x18  # the request's bits, kept


def test_p2p_request_offering_only_a_zero_length_send_gets_write() -> None:
    p, sock = responder()
    # IRD word: P2P | B (zero-length Send, RFC 6581 section 5); ORD word: no C, no D.
    p.peer.send(sock, frame(KEY_REQ, 0x10, 2, b"", struct.pack("!HH", 0xC008, 0x0008)),
                p.now)
    p.run(p.now + MS)
    (req,) = p.upcalls
    p.siw.accept(req.conn, now_ns=p.now)
    p.run(p.now + MS)
    # siw_proc_mpareq: "Propose zero length Write if none of Read and Write is indicated";
    # siw never sets B itself; ESTABLISHED then waits for the peer's RTR.
    ird_word, ord_word = struct.unpack_from("!HH", p.peer_data(), 20)
    assert (ird_word & 0xC000, ord_word & 0xC000) == (0x8000, 0x8000)
    assert [u.event for u in p.upcalls] == [IwEvent.CONNECT_REQUEST]
    # the peer's zero-length Write brings ESTABLISHED: ULPDU_Length 14, DDP T|L|DV 1,
    # RDMAP RV 1 opcode 0, STag 1, TO 0, no pad, CRC field zero (no C negotiated)
    p.peer.send(sock, struct.pack("!HBBIQ", 14, 0xC1, 0x40, 1, 0) + bytes(4), p.now)
    p.run(p.now + MS)
    assert [u.event for u in p.upcalls] == [IwEvent.CONNECT_REQUEST, IwEvent.ESTABLISHED]
