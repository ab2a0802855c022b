"""The NIC after OFFLOADED: LSMM, RTR, data, FIN/RST and the AEs of one OffloadedQp.

The peer side is played by hand-built segments with explicit sequence numbers, so every
expectation below is a number from the spec (4.4, 4.7, 5.6, 6.3) or from RFC 5040/5041,
not from the code under test.
"""

from __future__ import annotations

import struct

import pytest
from helpers.offload_peer import (
    A_IP,
    A_PORT,
    P_IP,
    P_PORT,
    P_RCV,
    P_SEQ,
    REPLY,
    crc32c,
    from_peer,
    qp_init,
    rtr_read_fpdu,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from mpa_emu.stacks.irdma.offload import Ae, OffloadedQp, QpError, TcpState
from mpa_emu.stacks.irdma.offload.qp import REXMIT_THRESH, RTO_INITIAL_NS

from mpa_emu.wire import mpa
from mpa_emu.wire.segment import ACK, FIN, RST, Segment


def test_passive_lsmm_is_the_mpa_reply_with_the_cm_seq_and_ack_in_its_own_segment() -> None:
    qp = OffloadedQp(qp_init(active=False))
    qp.send_lsmm(REPLY, now_ns=0)
    [tx] = qp.frames_to_send()
    seg = tx.segment
    assert (seg.seq, seg.ack, seg.flags, seg.payload) == (P_SEQ, P_RCV, ACK, REPLY)
    assert (seg.src_ip, seg.dst_ip, seg.sport, seg.dport) == (P_IP, A_IP, P_PORT, A_PORT)
    assert seg.window == 0xFFFF and seg.options == b""
    assert "irdma_sc_send_lsmm" in tx.comment and tx.conn == 7
    assert qp.next_ae() is None


def test_active_rtr_is_a_zero_length_read_fpdu_with_good_crc() -> None:
    qp = OffloadedQp(qp_init(active=True))
    qp.send_rtr(now_ns=0)
    [tx] = qp.frames_to_send()
    assert tx.segment.seq == P_RCV and tx.segment.ack == P_SEQ + len(REPLY)
    payload = tx.segment.payload
    # ULPDU_LENGTH 46 = 18-byte untagged DDP header + 28-byte Read Request (wireshark-mpa 7).
    assert payload[:2] == b"\x00\x2e" and len(payload) == 2 + 46 + 0 + 4
    assert payload == rtr_read_fpdu()
    fpdu = mpa.unframe_fpdu(payload)
    assert fpdu.crc_ok
    assert fpdu.ulpdu[0] == 0x41 and fpdu.ulpdu[1] & 0x0F == 1  # untagged, last; Read Req
    assert struct.unpack_from("!I", fpdu.ulpdu, 18)[0] == 0xABCD
    assert struct.unpack_from("!I", fpdu.ulpdu, 34)[0] == 0x1234
    assert qp.next_ae() is Ae.RTS


def test_active_rtr_write_is_a_zero_length_tagged_write() -> None:
    qp = OffloadedQp(qp_init(active=True, rtr_op="write"))
    qp.send_rtr(now_ns=0)
    fpdu = mpa.unframe_fpdu(qp.frames_to_send()[0].segment.payload)
    # RFC 5041 tagged header: T|L|DV, RV|opcode 0 (Write), STag 0, TO 0; no payload.
    assert fpdu.ulpdu == bytes([0xC1, 0x40]) + bytes(12)
    assert fpdu.crc_ok


def test_passive_raises_rts_when_the_rtr_arrives_and_answers_it() -> None:
    qp = OffloadedQp(qp_init(active=False))
    qp.send_lsmm(REPLY, 0)
    qp.frames_to_send()
    assert qp.next_ae() is None
    rtr = rtr_read_fpdu()
    qp.receive(from_peer(qp, P_RCV, P_SEQ + len(REPLY), payload=rtr), 1000)
    assert qp.next_ae() is Ae.RTS
    # RFC 5040 section 5.3: the Read Request is answered by a Read Response, which
    # carries the ACK of the request.
    [answer] = qp.frames_to_send()
    assert answer.segment.flags == ACK and answer.segment.seq == P_SEQ + len(REPLY)
    assert answer.segment.ack == P_RCV + len(rtr)
    # RFC 5044 section 4.1 FPDU: ULPDU_LENGTH 14; RFC 5041 section 4.2 tagged header
    # T|L|DV=01, RV=01|opcode 2 (Read Response), the request's sink STag 0xabcd and
    # sink TO 0; no pad; CRC32c over all of it (RFC 5044 appendix B).
    body = struct.pack("!HBBIQ", 14, 0xC1, 0x42, 0xABCD, 0)
    assert answer.segment.payload == body + struct.pack("<I", crc32c(body))
    assert qp.received[0].crc_ok


def test_read_response_takes_the_sink_stag_and_to_of_the_request() -> None:
    qp = OffloadedQp(qp_init(active=False, crc=False))
    qp.send_lsmm(REPLY, 0)
    qp.frames_to_send()
    # A zero-length Read Request (RFC 5040 section 4.4) with its own sink STag and TO.
    request = (bytes([0x41, 0x41]) + struct.pack("!IIII", 0, 1, 1, 0)
               + struct.pack("!IQIIQ", 0x11223344, 0x0102030405060708, 0, 0x55, 0x99))
    fpdu = struct.pack("!H", len(request)) + request + bytes(2) + bytes(4)
    qp.receive(from_peer(qp, P_RCV, P_SEQ + len(REPLY), payload=fpdu), 10)
    [answer] = qp.frames_to_send()
    # Without negotiated CRC the field is sent as zero (RFC 5044 section 4.1).
    assert answer.segment.payload == struct.pack("!HBBIQ", 14, 0xC1, 0x42, 0x11223344,
                                                 0x0102030405060708) + bytes(4)


def test_active_takes_the_zero_length_read_response_to_its_rtr() -> None:
    qp = OffloadedQp(qp_init(active=True))
    qp.send_rtr(0)
    qp.frames_to_send()
    assert qp.next_ae() is Ae.RTS
    body = struct.pack("!HBBIQ", 14, 0xC1, 0x42, 0xABCD, 0)
    qp.receive(from_peer(qp, qp.rcv_nxt, qp.snd_nxt,
                         payload=body + struct.pack("<I", crc32c(body))), 10)
    assert qp.next_ae() is None  # no error AE: the response is accepted
    [ack] = qp.frames_to_send()
    assert ack.segment.flags == ACK and ack.segment.payload == b""


def test_passive_send_waits_for_the_first_fpdu() -> None:
    qp = OffloadedQp(qp_init(active=False))
    qp.send_lsmm(REPLY, 0)
    qp.frames_to_send()
    qp.post_send(b"a message of a realistic size, 40 bytes.", 10)
    assert qp.frames_to_send() == []
    qp.receive(from_peer(qp, P_RCV, P_SEQ + len(REPLY), payload=rtr_read_fpdu()), 20)
    frames = qp.frames_to_send()
    sends = [f for f in frames if f.segment.payload]
    # The Send posted first, then the Read Response to the RTR (RFC 5040 section 5.3).
    assert [f.segment.seq for f in sends] == [P_SEQ + len(REPLY),
                                              P_SEQ + len(REPLY) + len(sends[0].segment.payload)]
    assert sends[1].segment.payload[3] == 0x42  # RV 01, opcode 2: Read Response


def test_send_fpdus_fit_the_mss_and_only_the_last_has_the_l_bit() -> None:
    qp = OffloadedQp(qp_init(active=True, mss=536))
    qp.send_rtr(0)
    data = bytes(range(256)) * 5  # 1280 bytes
    qp.post_send(data, 1)
    sends = [f.segment for f in qp.frames_to_send()[1:]]
    assert len(sends) == 3 and all(len(s.payload) <= 536 for s in sends)
    rebuilt = b""
    for index, seg in enumerate(sends):
        fpdu = mpa.unframe_fpdu(seg.payload)
        assert fpdu.crc_ok
        ctrl, opcode = fpdu.ulpdu[0], fpdu.ulpdu[1] & 0x0F
        qn, msn, mo = struct.unpack_from("!III", fpdu.ulpdu, 6)
        assert opcode == 3 and qn == 0 and msn == 1 and mo == len(rebuilt)
        assert bool(ctrl & 0x40) == (index == 2)
        rebuilt += fpdu.ulpdu[18:]
    assert rebuilt == data
    # consecutive segments follow each other in sequence space
    assert sends[1].seq == sends[0].seq + len(sends[0].payload)


def test_out_of_order_segment_is_dropped_with_a_duplicate_ack() -> None:
    qp = OffloadedQp(qp_init(active=False))
    qp.receive(from_peer(qp, P_RCV + 100, P_SEQ, payload=rtr_read_fpdu()), 0)
    [dup] = qp.frames_to_send()
    assert dup.segment.ack == P_RCV and qp.rcv_nxt == P_RCV
    assert qp.next_ae() is None and qp.received == []


def test_graceful_close_sends_fin_and_completes_on_peer_fin() -> None:
    qp = OffloadedQp(qp_init(active=True))
    qp.send_rtr(0)
    rtr_end = P_RCV + len(rtr_read_fpdu())
    qp.next_ae()
    qp.modify_qp("sqd", 10)
    fin = qp.frames_to_send()[-1].segment
    assert fin.flags == FIN | ACK and fin.seq == rtr_end
    assert qp.tcp_state == TcpState.FIN_WAIT_1
    peer_seq = P_SEQ + len(REPLY)
    qp.receive(from_peer(qp, peer_seq, rtr_end + 1), 20)
    assert qp.tcp_state == TcpState.FIN_WAIT_2 and qp.next_ae() is None
    qp.receive(from_peer(qp, peer_seq, rtr_end + 1, flags=FIN | ACK), 30)
    assert qp.tcp_state == TcpState.TIME_WAIT
    assert [qp.next_ae(), qp.next_ae()] == [Ae.LLP_FIN_RECEIVED, Ae.LLP_CLOSE_COMPLETE]
    assert qp.ae_tcp_state == TcpState.TIME_WAIT
    [ack] = qp.frames_to_send()
    assert ack.segment.ack == peer_seq + 1 and ack.segment.flags == ACK


def test_peer_fin_gives_close_wait_then_our_fin_and_close_complete() -> None:
    qp = OffloadedQp(qp_init(active=False))
    qp.receive(from_peer(qp, P_RCV, P_SEQ, flags=FIN | ACK), 0)
    assert qp.next_ae() is Ae.LLP_FIN_RECEIVED and qp.ae_tcp_state == TcpState.CLOSE_WAIT
    [ack] = qp.frames_to_send()
    assert ack.segment.ack == P_RCV + 1
    qp.modify_qp("sqd", 5)
    [fin] = qp.frames_to_send()
    assert fin.segment.flags == FIN | ACK and qp.tcp_state == TcpState.LAST_ACK
    qp.receive(from_peer(qp, P_RCV + 1, P_SEQ + 1), 9)
    assert qp.next_ae() is Ae.LLP_CLOSE_COMPLETE and qp.ae_tcp_state == TcpState.CLOSED


def test_abortive_close_sends_rst_only_when_tcp_is_alive() -> None:
    qp = OffloadedQp(qp_init(active=False))
    qp.modify_qp("err", 0)
    [rst] = qp.frames_to_send()
    assert rst.segment.flags == RST | ACK and rst.segment.seq == P_SEQ
    assert rst.segment.ack == P_RCV
    qp.modify_qp("err", 1)
    assert qp.frames_to_send() == []


def test_abortive_close_without_reset_request_sends_nothing() -> None:
    qp = OffloadedQp(qp_init(active=False))
    qp.modify_qp("err", 0, reset_tcp_conn=False)
    assert qp.frames_to_send() == []


def test_peer_rst_in_window_raises_connection_reset() -> None:
    qp = OffloadedQp(qp_init(active=False))
    qp.receive(from_peer(qp, P_RCV, 0, flags=RST), 0)
    assert qp.next_ae() is Ae.LLP_CONNECTION_RESET and qp.tcp_state == TcpState.CLOSED
    assert qp.frames_to_send() == []


def test_peer_rst_outside_the_window_is_ignored() -> None:
    qp = OffloadedQp(qp_init(active=False))
    qp.receive(from_peer(qp, P_RCV - 10, 0, flags=RST), 0)
    assert qp.next_ae() is None and qp.tcp_state == TcpState.ESTABLISHED


def test_retransmission_doubles_and_gives_up_after_rexmit_thresh() -> None:
    qp = OffloadedQp(qp_init(active=True))
    qp.send_rtr(0)
    qp.frames_to_send()
    qp.next_ae()
    due = []
    while (deadline := qp.get_timer()) is not None:
        due.append(deadline)
        qp.handle_timer(deadline)
        if qp.tcp_state == TcpState.CLOSED:
            break
        [again] = qp.frames_to_send()
        assert again.segment.payload == rtr_read_fpdu()
    expected, at, rto = [], 0, RTO_INITIAL_NS
    for _ in range(REXMIT_THRESH + 1):
        at += rto
        expected.append(at)
        rto *= 2
    assert due == expected
    assert qp.next_ae() is Ae.LLP_TOO_MANY_RETRIES and qp.retransmissions == REXMIT_THRESH


def test_ack_stops_the_retransmission_timer() -> None:
    qp = OffloadedQp(qp_init(active=True))
    qp.send_rtr(0)
    assert qp.get_timer() == RTO_INITIAL_NS
    qp.receive(from_peer(qp, P_SEQ + len(REPLY), P_RCV + len(rtr_read_fpdu())), 5)
    assert qp.get_timer() is None and qp.bytes_in_flight == 0


def test_bad_crc_fpdu_raises_the_crc_error_ae() -> None:
    qp = OffloadedQp(qp_init(active=False))
    bad = mpa.frame_fpdu(rtr_read_fpdu()[2:-4], crc=0xDEADBEEF)
    qp.receive(from_peer(qp, P_RCV, P_SEQ, payload=bad), 0)
    assert qp.next_ae() is Ae.LLP_RECEIVED_MPA_CRC_ERROR
    assert qp.received[0].crc_ok is False


def test_fpdu_split_over_two_segments_is_reassembled() -> None:
    qp = OffloadedQp(qp_init(active=False))
    rtr = rtr_read_fpdu()
    qp.receive(from_peer(qp, P_RCV, P_SEQ, payload=rtr[:10]), 0)
    assert qp.next_ae() is None
    qp.receive(from_peer(qp, P_RCV + 10, P_SEQ, payload=rtr[10:]), 1)
    assert qp.next_ae() is Ae.RTS and len(qp.received) == 1


def test_misuse_raises_qp_error() -> None:
    passive = OffloadedQp(qp_init(active=False))
    with pytest.raises(QpError):
        passive.send_rtr(0)
    active = OffloadedQp(qp_init(active=True))
    with pytest.raises(QpError):
        active.send_lsmm(REPLY, 0)
    with pytest.raises(QpError):
        active.modify_qp("rts", 0)
    active.modify_qp("err", 0)
    with pytest.raises(QpError):
        active.post_send(b"x" * 40, 0)
    with pytest.raises(QpError):
        OffloadedQp(qp_init(active=True, rtr_op="send"))


def test_same_inputs_give_identical_frames() -> None:
    def run() -> list[Segment]:
        qp = OffloadedQp(qp_init(active=True, vlan=10, pcp=3))
        qp.send_rtr(0)
        qp.post_send(b"determinism" * 20, 1)
        qp.modify_qp("sqd", 2)
        qp.handle_timer(10**9)
        return [t.segment for t in qp.frames_to_send()]

    first, second = run(), run()
    assert first == second and first[0].vlan == 10 and first[0].pcp == 3


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 0xFF), st.integers(-70000, 70000),
                          st.integers(0, 2**32 - 1), st.binary(max_size=120)),
                max_size=12),
       st.booleans())
def test_anything_a_peer_sends_never_raises(segments: list[tuple[int, int, int, bytes]],
                                            active: bool) -> None:
    qp = OffloadedQp(qp_init(active=active))
    if active:
        qp.send_rtr(0)
    else:
        qp.send_lsmm(REPLY, 0)
    now = 1
    for flags, offset, ack, payload in segments:
        seq = (qp.rcv_nxt + offset) % 2**32
        qp.receive(from_peer(qp, seq, ack, flags=flags, payload=payload), now)
        qp.handle_timer(now)
        now += 50_000_000
        for tx in qp.frames_to_send():
            assert tx.segment.sport == qp.init.local_port
        while qp.next_ae() is not None:
            pass


def test_qp_in_error_with_tcp_alive_answers_with_a_reset() -> None:
    qp = OffloadedQp(qp_init(active=False))
    qp.modify_qp("err", 0, reset_tcp_conn=False)
    assert qp.frames_to_send() == []
    qp.receive(from_peer(qp, P_RCV, P_SEQ + 7, payload=rtr_read_fpdu()), 1)
    # RFC 9293 section 3.10.7.1: the segment carries an ACK, so <SEQ=SEG.ACK><CTL=RST>
    [rst] = qp.frames_to_send()
    assert rst.segment.flags == RST and rst.segment.seq == P_SEQ + 7
    assert qp.next_ae() is None and qp.tcp_state == TcpState.CLOSED
    qp.receive(from_peer(qp, P_RCV, P_SEQ + 7, payload=rtr_read_fpdu()), 2)
    assert qp.frames_to_send() == []


def test_a_long_lived_qp_keeps_the_count_and_only_the_last_messages() -> None:
    from mpa_emu.stacks.irdma.offload.qp import RECEIVED_KEPT

    qp = OffloadedQp(qp_init(active=False, crc=False))
    qp.send_lsmm(REPLY, 0)
    qp.frames_to_send()
    seq = P_RCV
    rtr = rtr_read_fpdu()
    qp.receive(from_peer(qp, seq, P_SEQ + len(REPLY), payload=rtr), 1000)
    seq += len(rtr)
    sends = []
    for msn in range(1, 20):
        # RFC 5041 section 4.3 untagged header: L=1, DV=01; RV=01, opcode Send (3);
        # QN 0, MSN counting from 1, MO 0; then four bytes of message.
        ulpdu = bytes([0x41, 0x43]) + struct.pack("!IIII", 0, 0, msn, 0) + b"m%03d" % msn
        sends.append(ulpdu)
        fpdu = mpa.frame_fpdu(ulpdu)
        qp.receive(from_peer(qp, seq, P_SEQ + len(REPLY), payload=fpdu), 2000 + msn)
        seq += len(fpdu)
    assert qp.next_ae() is Ae.RTS and qp.next_ae() is None  # every Send was taken
    assert qp.received_count == 20
    assert [m.ulpdu for m in qp.received] == sends[-RECEIVED_KEPT:]
