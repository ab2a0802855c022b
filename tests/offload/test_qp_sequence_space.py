"""The QP's TCP engine compares sequence numbers with mpa_emu.wire.seq, the one home of
sequence arithmetic: numbers exactly 2**31 apart are not ordered there (RFC 1982
section 3.2), and the QP gives the same answer."""

from __future__ import annotations

from mpa_emu.stacks.irdma.offload import qp

from mpa_emu.wire import seq


def test_the_qp_uses_the_wire_s_sequence_comparisons() -> None:
    assert qp._seq_lt is seq.before
    assert qp._seq_le is seq.at_or_before
    assert qp._SEQ_MOD == seq.MOD == 1 << 32


def test_the_qp_orders_nothing_half_the_space_away() -> None:
    snd_una = 0x0000_1000
    ack = (snd_una + (1 << 31)) % (1 << 32)
    assert not qp._seq_lt(snd_una, ack) and not qp._seq_lt(ack, snd_una)
    assert not qp._seq_le(ack, snd_una) and not qp._seq_le(snd_una, ack)
