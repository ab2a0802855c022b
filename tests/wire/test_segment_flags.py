"""flags_text: TCP flag letters as scapy renders them, for every value a header carries."""

from __future__ import annotations

from scapy.layers.inet import TCP

from mpa_emu.wire.segment import flags_text


def test_every_eight_bit_flag_value_reads_as_scapy_renders_it() -> None:
    for flags in range(256):
        assert flags_text(flags) == str(TCP(flags=flags).flags), flags


def test_the_reserved_and_ns_bits_add_no_letter() -> None:
    for flags in range(256):
        for high in (0x100, 0x200, 0xF00, 0x1000):
            assert flags_text(flags | high) == flags_text(flags)


def test_common_combinations_read_as_in_a_trace() -> None:
    assert [flags_text(f) for f in (0x02, 0x12, 0x10, 0x18, 0x11, 0x14, 0x04)] == \
        ["S", "SA", "A", "PA", "FA", "RA", "R"]
