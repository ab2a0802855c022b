"""Sequence-number arithmetic modulo 2**32 (RFC 9293 section 3.4), values worked by hand."""

from __future__ import annotations

from mpa_emu.wire import seq


def test_add_wraps_past_2_32() -> None:
    assert seq.add(0xFFFF_FFFF, 1) == 0
    assert seq.add(0xFFFF_FFF0, 0x20) == 0x10
    assert seq.add(5, -10) == 0xFFFF_FFFB


def test_diff_is_signed_across_the_wrap() -> None:
    assert seq.diff(0x10, 0xFFFF_FFF0) == 0x20
    assert seq.diff(0xFFFF_FFF0, 0x10) == -0x20
    assert seq.diff(0x8000_0000, 0) == -(1 << 31)  # half the space counts as behind
    assert seq.diff(0x7FFF_FFFF, 0) == (1 << 31) - 1


def test_after_and_at_or_after() -> None:
    assert seq.after(1, 0xFFFF_FFFF)
    assert not seq.after(0xFFFF_FFFF, 1)
    assert not seq.after(7, 7)
    assert seq.at_or_after(7, 7)
    assert not seq.at_or_after(0x8000_0000, 0)


def test_between_as_cm_c_computes_it() -> None:
    # between(seq1, seq2, seq3): seq3 - seq2 >= seq1 - seq2, both unsigned 32-bit.
    assert seq.between(0xFFFF_FFFF, 0xFFFF_FFF0, 0x10)
    assert seq.between(0x10, 0xFFFF_FFF0, 0x10)
    assert not seq.between(0x11, 0xFFFF_FFF0, 0x10)
    assert not seq.between(0xFFFF_FFEF, 0xFFFF_FFF0, 0x10)


def test_before_and_at_or_before_mirror_after() -> None:
    assert seq.before(0xFFFF_FFFF, 1)
    assert not seq.before(1, 0xFFFF_FFFF)
    assert not seq.before(7, 7)
    assert seq.at_or_before(7, 7)
    assert seq.at_or_before(0xFFFF_FFF0, 0x10)


def test_numbers_half_the_space_apart_are_not_ordered() -> None:
    # RFC 1982 section 3.2: for a distance of exactly 2**31 the comparison is undefined;
    # mpa_emu's one answer: neither comes before or after the other, either way round.
    for a, b in ((0x8000_0000, 0), (0, 0x8000_0000), (0xFFFF_FFFF, 0x7FFF_FFFF),
                 (0x1234_5678, 0x9234_5678)):
        assert (a - b) % (1 << 32) == 1 << 31
        assert not seq.after(a, b) and not seq.before(a, b)
        assert not seq.at_or_after(a, b) and not seq.at_or_before(a, b)


def test_one_short_of_half_the_space_is_ordered() -> None:
    assert seq.after(0x7FFF_FFFF, 0) and seq.before(0, 0x7FFF_FFFF)
    assert seq.before(0x8000_0001, 0) and seq.after(0, 0x8000_0001)
