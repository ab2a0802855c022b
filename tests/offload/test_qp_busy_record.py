"""The QP's busy record and its shared parts: what an idle established QP does not hold.

An OffloadedQp keeps its send queue, unacknowledged segments, retransmission timer,
receive buffer and unread AEs in one record that exists only while one of them holds
something; the driver's IwQp is the QP itself; the expected MSN and MO per queue are one
tuple shared by the QPs that received the same messages. Expected values are sequence
numbers and timeouts worked out by hand from RFC 9293 section 3.8.1 (retransmit the
oldest unacknowledged segment), RFC 6298 section 5 (back off the timer on each
retransmission, restart it when new data is acknowledged), RFC 5041 section 5.1 (MSN per
queue, starting at 1) and IRDMA_DEFAULT_REXMIT_THRESH.
"""

from __future__ import annotations

import struct

from helpers.offload_peer import P_RCV, P_SEQ, REPLY, from_peer, qp_init, rtr_read_fpdu
from mpa_emu.stacks.irdma.offload import Ae, IbQpState, IwarpState, OffloadedQp, TcpState
from mpa_emu.stacks.irdma.offload.qp import RTO_INITIAL_NS

from mpa_emu.wire import mpa
from mpa_emu.wire.segment import ACK

MS = 1_000_000
RTR_LEN = 2 + 46 + 4
"""The read0 RTR FPDU: ULPDU_LENGTH, 18-byte untagged header + 28-byte Read Request, CRC."""


def busy(qp: OffloadedQp) -> bool:
    """Whether the QP holds its busy record (the private slot is what is pinned here)."""
    return qp._busy is not None


def read_request(msn: int) -> bytes:
    # RFC 5041 section 4.3: untagged, last, DDP version 1 (0x41); RDMAP version 1, Read
    # Request (0x41); QN 1, the given MSN, MO 0; RFC 5040 section 4.4: a zero-length Read.
    ulpdu = (bytes([0x41, 0x41]) + struct.pack("!IIII", 0, 1, msn, 0)
             + struct.pack("!IQIIQ", 0xABCD, 0, 0, 0x1234, 0))
    return mpa.frame_fpdu(ulpdu)


def test_a_new_qp_holds_no_busy_record_and_the_lsmm_makes_one_until_acked() -> None:
    qp = OffloadedQp(qp_init(active=False))
    assert not busy(qp) and qp.get_timer() is None
    qp.send_lsmm(REPLY, now_ns=0)
    assert busy(qp) and qp.get_timer() == 200 * MS
    qp.frames_to_send()
    # The peer acknowledges the whole MPA reply: nothing is left in flight.
    qp.receive(from_peer(qp, P_RCV, P_SEQ + len(REPLY)), 3 * MS)
    assert not busy(qp) and qp.get_timer() is None and qp.bytes_in_flight == 0
    assert qp.frames_to_send() == [] and qp.next_ae() is None


def test_an_unread_ae_keeps_the_record_until_the_driver_takes_it() -> None:
    qp = OffloadedQp(qp_init(active=True))
    qp.send_rtr(0)
    qp.frames_to_send()
    qp.receive(from_peer(qp, P_SEQ + len(REPLY), P_RCV + RTR_LEN), 1 * MS)
    assert qp.get_timer() is None
    assert busy(qp)  # the RTS AE of irdma_sc_send_rtt is still unread
    assert qp.next_ae() is Ae.RTS
    assert not busy(qp) and qp.ae_tcp_state is TcpState.ESTABLISHED


def test_the_read_response_is_taken_and_acked_without_leaving_a_record() -> None:
    qp = OffloadedQp(qp_init(active=True))
    qp.send_rtr(0)
    qp.next_ae()
    rtr_end = P_RCV + RTR_LEN
    # RFC 5041 section 4.2 tagged header: tagged, last, version 1 (0xc1); RFC 5040
    # section 4.3: RDMAP version 1, opcode 0010b Read Response (0x42); the sink STag
    # 0xabcd and TO 0 of the read0 RTR; no data.
    response = mpa.frame_fpdu(bytes([0xC1, 0x42]) + struct.pack("!IQ", 0xABCD, 0))
    qp.receive(from_peer(qp, P_SEQ + len(REPLY), rtr_end, payload=response), 2 * MS)
    assert not busy(qp) and qp.next_ae() is None and qp.received_count == 1
    [tx] = qp.frames_to_send()[-1:]
    assert (tx.segment.flags, tx.segment.seq, tx.segment.ack) == (
        ACK, rtr_end, P_SEQ + len(REPLY) + len(response))


def test_retransmissions_back_off_and_the_ack_drops_the_record_but_keeps_the_count() -> None:
    qp = OffloadedQp(qp_init(active=True))
    qp.send_rtr(0)
    qp.next_ae()
    [first] = qp.frames_to_send()
    qp.handle_timer(200 * MS - 1)
    assert qp.frames_to_send() == []
    qp.handle_timer(200 * MS)  # first RTO: 200 ms
    [again] = qp.frames_to_send()
    assert (again.segment.seq, again.segment.payload) == (P_RCV, first.segment.payload)
    assert qp.get_timer() == 600 * MS  # backed off: 200 + 400 ms
    qp.handle_timer(600 * MS)
    [third] = qp.frames_to_send()
    assert third.segment.seq == P_RCV and qp.get_timer() == 1400 * MS  # 600 + 800 ms
    assert qp.retransmissions == 2 and busy(qp)
    qp.receive(from_peer(qp, P_SEQ + len(REPLY), P_RCV + RTR_LEN), 700 * MS)
    assert not busy(qp) and qp.get_timer() is None and qp.retransmissions == 2
    # New data after the ACK starts from the initial RTO again, and is the first Send.
    qp.post_send(b"abc", 800 * MS)
    assert busy(qp) and qp.get_timer() == 800 * MS + RTO_INITIAL_NS
    [send] = qp.frames_to_send()
    assert send.segment.seq == P_RCV + RTR_LEN
    assert struct.unpack_from("!I", send.segment.payload, 2 + 2 + 8)[0] == 1  # MSN 1


def test_part_of_an_fpdu_waits_in_the_record_until_the_rest_arrives() -> None:
    rtr, request = rtr_read_fpdu(), read_request(2)
    alone = OffloadedQp(qp_init(active=False))
    alone.receive(from_peer(alone, P_RCV, P_SEQ, payload=rtr[:10]), 0)
    assert busy(alone) and alone.next_ae() is None  # only the 10 buffered bytes
    qp = OffloadedQp(qp_init(active=False))
    # RFC 5040 section 5.3: each Read Request is answered by a zero-length Read
    # Response: ULPDU_LENGTH 14 (the tagged header), no pad, CRC: 20 bytes.
    response_len = 2 + 14 + 4
    # One segment: the whole RTR and the first 5 bytes of a second Read Request.
    qp.receive(from_peer(qp, P_RCV, P_SEQ, payload=rtr + request[:5]), 0)
    assert qp.next_ae() is Ae.RTS and qp.received_count == 1
    [first] = qp.frames_to_send()
    assert first.segment.payload[:2] == b"\x00\x0e" and busy(qp)
    # The rest, acknowledging the first Read Response.
    qp.receive(from_peer(qp, P_RCV + RTR_LEN + 5, P_SEQ + response_len,
                         payload=request[5:]), 1)
    assert qp.received_count == 2 and qp.next_ae() is None
    [second] = qp.frames_to_send()
    assert (second.segment.seq, second.segment.ack) == (P_SEQ + response_len,
                                                        P_RCV + 2 * RTR_LEN)
    assert busy(qp)  # the second Read Response is in flight
    qp.receive(from_peer(qp, P_RCV + 2 * RTR_LEN, P_SEQ + 2 * response_len), 2)
    assert not busy(qp) and qp.get_timer() is None


def test_expected_msns_are_shared_until_one_qp_advances_alone() -> None:
    a = OffloadedQp(qp_init(active=False))
    b = OffloadedQp(qp_init(active=False, conn=8, local_port=31001))
    for qp in (a, b):
        qp.receive(from_peer(qp, P_RCV, P_SEQ, payload=rtr_read_fpdu()), 0)
        assert qp.next_ae() is Ae.RTS
    assert a._recv is b._recv  # one tuple for both
    second = P_RCV + RTR_LEN
    a.receive(from_peer(a, second, P_SEQ, payload=read_request(2)), 1)
    assert a.next_ae() is None  # MSN 2 is the next one on queue 1
    # b has received one Read Request only: it still expects MSN 2.
    b.receive(from_peer(b, second, P_SEQ, payload=read_request(2)), 1)
    assert b.next_ae() is None
    b.receive(from_peer(b, second + RTR_LEN, P_SEQ, payload=read_request(2)), 2)
    assert b.next_ae() is Ae.DDP_INVALID_MSN_GAP_IN_MSN
    a.receive(from_peer(a, second + RTR_LEN, P_SEQ, payload=read_request(3)), 2)
    assert a.next_ae() is None


def test_the_driver_qp_is_the_qp_itself_with_its_own_iwarp_state() -> None:
    qp = OffloadedQp(qp_init(active=True))
    iw = qp.iwqp
    assert iw is qp
    # A new struct irdma_qp as the emulator's driver starts it (the IwQp defaults).
    assert (iw.ibqp_state, iw.iwarp_state, iw.hw_tcp_state, iw.hw_iwarp_state) == (
        IbQpState.RTS, IwarpState.RTS, TcpState.ESTABLISHED, IwarpState.RTS)
    assert (iw.last_aeq, iw.close_timer_started, iw.cm_id, iw.flush_issued,
            iw.rts_ae_rcvd, iw.term_flags, iw.terminate_at, iw.parked) == (
        None, 0, True, False, False, 0, None, ())
    qp.modify_qp("err", 0)
    # The NIC moved; the driver's copy changes only when irdma_modify_qp writes it.
    assert qp.nic_iwarp_state is IwarpState.ERROR and iw.iwarp_state is IwarpState.RTS
    iw.iwarp_state = IwarpState.CLOSING
    assert qp.nic_iwarp_state is IwarpState.ERROR and iw.iwarp_state is IwarpState.CLOSING
