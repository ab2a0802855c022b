"""The QP's shared records: the driver's states (``IwQp.states``), the untagged queues'
expected MSN and offset (RFC 5041 section 5.1) and the send counts. Each is one record
shared by the QPs with equal values, and a write to one QP never shows in another."""

from __future__ import annotations

from mpa_emu.stacks.irdma.offload.iwqp import NEW_QP, IwQp
from mpa_emu.stacks.irdma.offload.qp_records import FIRST_RECV, NO_SENDS, RecvExpect, SendCounts
from mpa_emu.stacks.irdma.offload.states import IbQpState, IwarpState


def test_driver_states_are_shared_and_written_per_qp() -> None:
    a, b = IwQp(), IwQp()
    assert a.states is b.states is NEW_QP
    assert (a.ibqp_state, a.iwarp_state, a.hw_iwarp_state) == \
        (IbQpState.RTS, IwarpState.RTS, IwarpState.RTS)
    assert (a.cm_id, a.flush_issued, a.rts_ae_rcvd) == (True, False, False)
    a.iwarp_state = IwarpState.CLOSING
    a.cm_id = False
    assert (a.iwarp_state, a.cm_id) == (IwarpState.CLOSING, False)
    assert (b.iwarp_state, b.cm_id) == (IwarpState.RTS, True)
    b.cm_id = False
    b.iwarp_state = IwarpState.CLOSING
    assert a.states is b.states  # the same values, in another order of writes
    c = IwQp(iwarp_state=IwarpState.CLOSING, cm_id=False)
    assert c.states is a.states


def test_expected_msn_and_offset_per_queue() -> None:
    # RFC 5041 section 5.1: the first message on each queue has MSN 1, offset 0.
    assert RecvExpect((1, 1, 1), (0, 0, 0)) == FIRST_RECV
    # A Send in two segments of 100 and 20 bytes, then a one-segment Read Request.
    mid = FIRST_RECV.after(0, False, 100)
    assert mid == RecvExpect((1, 1, 1), (100, 0, 0))
    done = mid.after(0, True, 20)
    assert done == RecvExpect((2, 1, 1), (0, 0, 0))
    assert done.after(1, True, 28) == RecvExpect((2, 2, 1), (0, 0, 0))
    # the MSN is 32 bits and wraps
    assert RecvExpect((0xFFFFFFFF, 1, 1), (0, 0, 0)).after(0, True, 0).msn == (0, 1, 1)
    # QPs that received the same messages share one record
    assert FIRST_RECV.after(0, True, 5) is FIRST_RECV.after(0, True, 9)


def test_send_counts() -> None:
    one = NO_SENDS.next_message()
    assert one == SendCounts(1, 0)
    assert one.retransmitted().retransmitted() == SendCounts(1, 2)
    assert SendCounts(0xFFFFFFFF, 3).next_message() == SendCounts(0, 3)
    assert NO_SENDS.next_message() is one
