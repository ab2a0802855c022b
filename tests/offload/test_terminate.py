"""Terminate after an error (ctrl.c irdma_terminate_connection / irdma_bld_terminate_hdr,
utils.c irdma_terminate_done / irdma_terminate_start_timer, irdma_terminate_received),
driven through ``disconnect.on_ae`` with the stand-in host of the disconnect tests.

Expected Terminate bytes are written out by hand from RFC 5040 section 4.8 (control word
Layer|EType|Error Code|M D R), RFC 5041 section 4.4 (untagged header, QN 2, MSN 1) and
the layer/etype/error-code values of irdma's type.h."""

from __future__ import annotations

import struct

import pytest
from helpers.offload_host import OUR_SEQ, PEER_SEQ, Host, passive_host
from helpers.offload_peer import from_peer
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.irdma.offload import Ae, IwarpState, TcpState
from mpa_emu.stacks.irdma.offload.terminate import build_terminate, terminate_fields

from mpa_emu.wire import mpa
from mpa_emu.wire.segment import ACK, FIN, RST

TERM_HEAD = bytes.fromhex("4147" "00000000" "00000002" "00000001" "00000000")
"""Untagged, L, DV 1; RV 1, opcode 7 (Terminate); RsvdULP 0; QN 2; MSN 1; MO 0."""


def send_ulpdu(payload: bytes, msn: int = 1, mo: int = 0, ctl: int = 0x41,
               rctl: int = 0x43, qn: int = 0) -> bytes:
    return bytes([ctl, rctl]) + struct.pack("!IIII", 0, qn, msn, mo) + payload


def deliver_fpdu(host: Host, ulpdu: bytes, now: int, *, crc: int | None = None) -> bytes:
    fpdu = mpa.frame_fpdu(ulpdu, crc=crc)
    host.deliver({"seq": PEER_SEQ, "ack": OUR_SEQ, "payload": fpdu}, now)
    return fpdu


def test_crc_error_sends_a_terminate_with_llp_mpa_crc_and_the_copied_ddp_header() -> None:
    host = passive_host()
    ulpdu = send_ulpdu(b"hello")
    fpdu = deliver_fpdu(host, ulpdu, 10, crc=0)
    payloads = [t.segment.payload for t in host.wire if t.segment.payload]
    assert len(payloads) == 1
    # Layer 2 (LLP/MPA), EType 3 (DDP_LLP), code 2 (MPA_CRC); M and D set; then the
    # ULPDU_LENGTH (23) and the 18-byte untagged DDP header of the bad FPDU.
    body = bytes.fromhex("2302c000") + struct.pack("!H", 23) + ulpdu[:18]
    assert payloads[0] == mpa.frame_fpdu(TERM_HEAD + body)
    assert fpdu[:2] == struct.pack("!H", 23)
    qp = host.nic_qp
    assert qp is not None and qp.nic_iwarp_state == IwarpState.TERMINATE
    # IRDMA_AE_TERMINATE_SENT -> irdma_terminate_send_fin: the FIN follows
    assert host.wire[-1].segment.flags == FIN | ACK
    assert qp.iwqp.term_flags == 0x01 and qp.iwqp.terminate_at == 10 + 1_000_000_000
    assert host.upcalls == []


def test_peer_fin_after_terminate_is_acked_and_close_complete_ends_it() -> None:
    host = passive_host()
    fpdu = deliver_fpdu(host, send_ulpdu(b"x"), 10, crc=0)
    qp = host.nic_qp
    assert qp is not None
    our_next = qp.snd_nxt
    host.wire.clear()
    peer_next = PEER_SEQ + len(fpdu)
    # the peer ACKs our Terminate and FIN and sends its FIN
    host.deliver({"seq": peer_next, "ack": our_next, "flags": FIN | ACK}, 20)
    assert [t.segment.flags for t in host.wire] == [ACK]
    assert host.wire[0].segment.ack == peer_next + 1
    # LLP_CLOSE_COMPLETE with term_flags -> irdma_terminate_done: no RST (TCP is done),
    # DISCONNECT(0) and CLOSE (irdma_cm_disconn_true, term_flags)
    assert host.upcalls == [(IwEvent.DISCONNECT, 0, 20), (IwEvent.CLOSE, 0, 20)]
    assert qp.tcp_state in (TcpState.TIME_WAIT, TcpState.CLOSED)
    # irdma_cm_disconn_true: original_hw_tcp_state TIME_WAIT (or CLOSED) -> issue_close,
    # cm_id = NULL and qp->term_flags = 0; the terminate timer was deleted.
    assert qp.iwqp.terminate_at is None and qp.iwqp.term_flags == 0


def test_terminate_timer_resets_a_peer_that_stays_silent() -> None:
    host = passive_host()
    deliver_fpdu(host, send_ulpdu(b"x"), 10, crc=0)
    qp = host.nic_qp
    assert qp is not None
    host.wire.clear()
    due = qp.get_timer()
    assert due is not None and due <= 10 + 1_000_000_000
    # run retransmissions until the terminate timer (HZ after the Terminate) fires
    while (due := qp.get_timer()) is not None and due <= 10 + 1_000_000_000:
        qp.handle_timer(due)
        host.pump(due)
    assert any(t.segment.flags & RST for t in host.wire)
    assert host.upcalls == [(IwEvent.DISCONNECT, 0, 10 + 1_000_000_000),
                            (IwEvent.CLOSE, 0, 10 + 1_000_000_000)]


@pytest.mark.parametrize("ulpdu, layer_etype, code", [
    (send_ulpdu(b"x", msn=5), 0x12, 0x03),          # MSN range
    (send_ulpdu(b"x", mo=4), 0x12, 0x04),           # MO
    (send_ulpdu(b"x", qn=3), 0x12, 0x01),           # QN
    (send_ulpdu(b"x", ctl=0x42), 0x12, 0x06),       # DDP version, untagged
    (send_ulpdu(b"x", rctl=0x83), 0x02, 0x05),      # RDMAP version
    (send_ulpdu(b"x", rctl=0x48), 0x02, 0xFF),      # reserved opcode: unspecified
    (bytes([0xC1, 0x40]) + struct.pack("!IQ", 7, 0) + b"data", 0x11, 0x00),  # STag
])
def test_each_receive_error_maps_to_the_kernels_terminate(ulpdu: bytes, layer_etype: int,
                                                          code: int) -> None:
    host = passive_host()
    deliver_fpdu(host, ulpdu, 10)
    [term] = [t.segment.payload for t in host.wire if t.segment.payload]
    control = term[2 + 18:2 + 22]
    assert control[0] == layer_etype and control[1] == code
    assert term[2:4] == b"\x41\x47"


def test_terminate_fields_cover_irdma_bld_terminate_hdr() -> None:
    write = mpa.frame_fpdu(bytes([0xC1, 0x40]) + bytes(12) + b"d")
    read = mpa.frame_fpdu(send_ulpdu(bytes(28), rctl=0x41, qn=1))
    cases = {
        (Ae.AMP_UNALLOCATED_STAG, write): (1, 1, 0x00),
        (Ae.AMP_UNALLOCATED_STAG, read): (0, 1, 0x00),
        (Ae.AMP_BOUNDS_VIOLATION, write): (1, 1, 0x01),
        (Ae.AMP_BOUNDS_VIOLATION, None): (0, 1, 0x01),
        (Ae.AMP_BAD_PD, write): (1, 1, 0x02),
        (Ae.AMP_BAD_PD, None): (0, 1, 0x03),
        (Ae.AMP_INVALID_STAG, None): (0, 1, 0x00),
        (Ae.AMP_BAD_QP, None): (1, 2, 0x01),
        (Ae.AMP_BAD_STAG_KEY, None): (0, 2, 0x00),
        (Ae.AMP_RIGHTS_VIOLATION, None): (0, 1, 0x02),
        (Ae.AMP_TO_WRAP, None): (0, 1, 0x04),
        (Ae.LLP_RECEIVED_MPA_CRC_ERROR, None): (2, 3, 0x02),
        (Ae.LLP_SEGMENT_TOO_SMALL, None): (1, 0, 0x00),
        (Ae.DDP_NO_L_BIT, None): (1, 0, 0x00),
        (Ae.DDP_INVALID_MSN_GAP_IN_MSN, None): (1, 2, 0x03),
        (Ae.DDP_UBE_DDP_MESSAGE_TOO_LONG_FOR_AVAILABLE_BUFFER, None): (1, 2, 0x05),
        (Ae.DDP_UBE_INVALID_DDP_VERSION, write): (1, 1, 0x04),
        (Ae.DDP_UBE_INVALID_DDP_VERSION, None): (1, 2, 0x06),
        (Ae.DDP_UBE_INVALID_MO, None): (1, 2, 0x04),
        (Ae.DDP_UBE_INVALID_MSN_NO_BUFFER_AVAILABLE, None): (1, 2, 0x02),
        (Ae.DDP_UBE_INVALID_QN, None): (1, 2, 0x01),
        (Ae.RDMAP_ROE_INVALID_RDMAP_VERSION, None): (0, 2, 0x05),
        (Ae.RDMAP_ROE_UNEXPECTED_OPCODE, None): (0, 2, 0xFF),
    }
    for (ae, frame), (layer, etype, code) in cases.items():
        f = terminate_fields(ae, frame)
        assert (f.layer, f.etype, f.error_code) == (layer, etype, code), ae
    # a Read Request's RDMAP header is copied too (R): 2 + 18 + 28 after the control word
    body = build_terminate(Ae.AMP_UNALLOCATED_STAG, read)[18:]
    assert body[2] == 0xE0 and len(body) == 4 + 2 + 18 + 28


def test_received_terminate_remote_error_closes_at_once_with_rst() -> None:
    host = passive_host()
    # RDMAP layer, remote protection (0x01), invalid STag
    deliver_fpdu(host, TERM_HEAD + bytes.fromhex("01000000"), 10)
    assert [t.segment.flags for t in host.wire if t.segment.flags & RST] == [RST | ACK]
    assert host.upcalls == [(IwEvent.DISCONNECT, 0, 10), (IwEvent.CLOSE, 0, 10)]


def test_received_terminate_other_error_sends_fin_and_starts_the_timer() -> None:
    host = passive_host()
    deliver_fpdu(host, TERM_HEAD + bytes.fromhex("23020000"), 10)
    assert host.wire[-1].segment.flags == FIN | ACK
    qp = host.nic_qp
    assert qp is not None and qp.iwqp.term_flags == 0x02
    assert qp.iwqp.terminate_at == 10 + 1_000_000_000 and host.upcalls == []


def test_malformed_received_terminate_is_answered_by_a_terminate() -> None:
    host = passive_host()
    bad = bytes.fromhex("4147" "00000000" "00000002" "00000009" "00000000") + bytes(4)
    deliver_fpdu(host, bad, 10)
    [term] = [t.segment.payload for t in host.wire if t.segment.payload]
    assert term[2 + 18] == 0x12 and term[2 + 19] == 0x03  # DDP untagged, MSN range


def test_qp_in_error_answers_the_peers_fin_with_a_reset() -> None:
    host = passive_host()
    qp = host.nic_qp
    assert qp is not None
    qp.modify_qp("err", 5, reset_tcp_conn=False)
    host.wire.clear()
    qp.receive(from_peer(qp, PEER_SEQ, OUR_SEQ, flags=FIN | ACK), 6)
    host.pump(6)
    assert [(t.segment.flags, t.segment.seq) for t in host.wire] == [(RST, OUR_SEQ)]
