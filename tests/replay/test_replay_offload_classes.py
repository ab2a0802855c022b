"""Which frames of the emulated host only the NIC's QP produces (compared as warnings)."""

from __future__ import annotations

from mpa_emu.replay.recording import offload_classes
from mpa_emu.wire.mpa import FLAG_CRC, FLAG_REJECT, MpaFrame
from mpa_emu.wire.segment import ACK, FIN, RST, SYN, Segment

REQ = MpaFrame(request=True, rev=1).to_bytes()
REP = MpaFrame(request=False, rev=1).to_bytes()
REJ = MpaFrame(request=False, rev=1, flags=FLAG_CRC | FLAG_REJECT).to_bytes()


def seg(flags: int, payload: bytes = b"") -> Segment:
    return Segment(b"\x02" * 6, b"\x04" * 6, bytes(4), bytes(4), 1, 2, 0, 0, flags,
                   payload=payload)


def test_passive_host_frames_after_its_accepting_reply_belong_to_the_nic() -> None:
    flow = [(False, seg(SYN)), (True, seg(SYN | ACK)), (False, seg(ACK, REQ)),
            (True, seg(ACK)), (True, seg(ACK, REP)), (False, seg(ACK, b"rtr")),
            (True, seg(ACK)), (True, seg(FIN | ACK))]
    assert offload_classes(flow) == [False, False, False, True, True]


def test_active_host_acks_the_reply_from_the_cm_then_the_nic_takes_over() -> None:
    flow = [(True, seg(SYN)), (False, seg(SYN | ACK)), (True, seg(ACK)), (True, seg(ACK, REQ)),
            (False, seg(ACK)), (False, seg(ACK, REP)), (True, seg(ACK)), (True, seg(ACK, b"rtr")),
            (True, seg(RST | ACK))]
    assert offload_classes(flow) == [False, False, False, False, True, True]


def test_a_reject_is_no_hand_off() -> None:
    flow = [(False, seg(SYN)), (True, seg(SYN | ACK)), (False, seg(ACK, REQ)),
            (True, seg(FIN | ACK, REJ)), (True, seg(ACK))]
    assert offload_classes(flow) == [False, False, False]


def test_a_reply_from_the_initiator_is_a_malformed_frame_not_a_hand_off() -> None:
    # The passive host gets "MPA ID Rep Frame" where a request is due and resets.
    flow = [(False, seg(SYN)), (True, seg(SYN | ACK)), (False, seg(ACK, REP)),
            (True, seg(RST | ACK))]
    assert offload_classes(flow) == [False, False]


def test_capture_starting_after_the_handshake_still_finds_the_hand_off() -> None:
    flow = [(False, seg(ACK, REQ)), (True, seg(ACK)), (True, seg(ACK, REP)), (True, seg(ACK))]
    assert offload_classes(flow) == [False, False, True]
