"""irdma's TCP arithmetic: check_seq, option parsing bounds, the SYN options (irdma_check_seq,
5.2)."""

from __future__ import annotations

import pytest
from mpa_emu.stacks.irdma.tcp import between, check_seq, process_options, syn_options


def test_between_is_inclusive_and_wraps() -> None:
    assert between(5, 5, 10) and between(10, 5, 10) and not between(11, 5, 10)
    assert between(2, 0xFFFFFFF0, 0x10)  # across the wrap
    assert not between(0xFFFFFFEF, 0xFFFFFFF0, 0x10)


def test_check_seq_needs_the_exact_ack_and_a_seq_in_the_window() -> None:
    ok = dict(loc_seq_num=1000, rcv_nxt=0xFFFFFF00, rcv_wnd=0xFFFF)
    assert check_seq(0xFFFFFF00, 1000, **ok)
    assert check_seq(0xFEFF, 1000, **ok)  # rcv_nxt + rcv_wnd, wrapped, inclusive
    assert not check_seq(0xFF00, 1000, **ok)
    assert not check_seq(0xFFFFFF00, 999, **ok)  # ack must equal loc_seq_num
    assert not check_seq(0xFFFFFEFF, 1000, **ok)  # before rcv_nxt


@pytest.mark.parametrize(("ipv4", "mss", "accepted"), [
    (True, 536, True), (True, 535, False), (False, 1220, True), (False, 1219, False)])
def test_mss_floor_per_family(ipv4: bool, mss: int, accepted: bool) -> None:
    res = process_options(bytes([2, 4, mss >> 8, mss & 0xFF]), syn=True, ipv4=ipv4,
                          mss=1460, snd_wscale=0)
    assert (res.error is None) is accepted
    if accepted:
        assert res.mss == min(1460, mss)


def test_mss_only_lowers_and_unknown_options_are_skipped() -> None:
    sack_perm, timestamps = bytes([4, 2]), bytes([8, 10, 0, 0, 0, 1, 0, 0, 0, 0])
    opts = sack_perm + timestamps + bytes([2, 4, 0x05, 0xDC, 3, 3, 14])
    res = process_options(opts, syn=True, ipv4=True, mss=1460, snd_wscale=0)
    assert (res.error, res.mss, res.snd_wscale) == (None, 1460, 14)


def test_window_scale_has_no_cap_and_no_length_check() -> None:
    res = process_options(bytes.fromhex("0309ff"), syn=False, ipv4=True, mss=1460,
                          snd_wscale=0)
    assert (res.error, res.snd_wscale, res.mss) == (None, 0xFF, 1460)


def test_zero_length_option_is_reported_as_a_hang() -> None:
    for opts in (bytes.fromhex("0300"), bytes.fromhex("2200")):
        res = process_options(opts, syn=True, ipv4=True, mss=1460, snd_wscale=0)
        assert res.hang and res.error is not None
    res = process_options(bytes.fromhex("0200"), syn=True, ipv4=True, mss=1460,
                          snd_wscale=0)
    assert not res.hang and res.error == "MSS option length 0 != 4"


def test_syn_options_bytes() -> None:
    assert syn_options(1460, 2) == bytes.fromhex("020405b403030200")
