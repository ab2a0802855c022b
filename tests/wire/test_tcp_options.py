"""The one reader of TCP option bytes (RFC 9293 section 3.2; window scale RFC 7323
section 2.2, timestamps section 3.2, SACK permitted RFC 2018 section 2), on bytes the
tests write."""

from __future__ import annotations

from mpa_emu.capture.decode import option_kinds, parse_tcp_options
from mpa_emu.views.describe import describe_options, options_label
from mpa_emu.wire.tcp_options import (
    EOL,
    MSS,
    NOP,
    SACK_PERMITTED,
    TIMESTAMPS,
    WINDOW_SCALE,
    TcpOption,
    option_value,
    parse_options,
)

LINUX_SYN = bytes([2, 4, 0x05, 0xB4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7])
"""MSS 1460, SACK permitted, timestamps TSval 1 TSecr 0, NOP, window scale shift 7."""


def test_a_linux_syn_reads_option_by_option() -> None:
    parsed = parse_options(LINUX_SYN)
    assert parsed.problem is None
    assert [o.kind for o in parsed.options] == [MSS, SACK_PERMITTED, TIMESTAMPS, NOP,
                                                WINDOW_SCALE]
    assert [option_value(o) for o in parsed.options] == [1460, None, (1, 0), None, 7]


def test_eol_ends_the_list_and_is_kept() -> None:
    parsed = parse_options(bytes([2, 4, 0x05, 0xB4, 3, 3, 2, 0, 9, 9]))
    assert parsed.options[-1] == TcpOption(EOL, 1, b"")
    assert parsed.kinds == (MSS, WINDOW_SCALE, EOL)


def test_a_short_or_overlong_option_stops_the_walk_with_its_problem() -> None:
    truncated = parse_options(bytes([1, 8]))
    assert truncated.problem is not None and truncated.problem.what == "truncated"
    assert truncated.kinds == (NOP, 8)
    zero = parse_options(bytes([30, 0, 1, 1]))
    assert zero.problem is not None and zero.problem.what == "bad length"
    assert zero.problem.rest == bytes([30, 0, 1, 1])
    past = parse_options(bytes([2, 4, 0x05]))
    assert past.problem is not None and past.problem.what == "past end"
    assert past.options == (TcpOption(MSS, 4, b"\x05"),)


def test_every_view_shows_the_window_scale_shift_count() -> None:
    # RFC 7323 section 2.2: the option carries shift.cnt; 7 here, a factor of 128
    assert options_label(LINUX_SYN) == "MSS=1460 SACK_PERM TSval=1 TSecr=0 WS=7"
    assert describe_options(LINUX_SYN) == "MSS=1460,SACK_PERM,TS=1/0,NOP,WS=7"
    opts, problem = parse_tcp_options(LINUX_SYN)
    assert problem == "" and opts["ws"] == 7 and opts["mss"] == 1460
    assert option_kinds(LINUX_SYN) == (MSS, SACK_PERMITTED, TIMESTAMPS, NOP, WINDOW_SCALE)


def test_the_views_name_a_bad_length_each_in_their_words() -> None:
    raw = bytes([1, 30, 0])
    assert options_label(raw) == "opt30 (bad length)"
    assert describe_options(raw) == "NOP,bad(1e00)"
    assert parse_tcp_options(raw) == ({}, "TCP option 30 has length 0 "
                                          "(irdma_process_options would loop forever)")
