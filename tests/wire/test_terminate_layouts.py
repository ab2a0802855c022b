"""Both readings of a Terminate control word (RFC 5040 section 4.8 and siw's
little-endian bit-fields, drivers/infiniband/sw/siw/iwarp.h struct iwarp_terminate), on
control words and quoted headers the tests pack themselves."""

from __future__ import annotations

import struct

import pytest
from helpers.third_party_captures import rfc_terminate_word, siw_terminate_word

from mpa_emu.wire.terminate_layouts import RFC, SIW, read_terminate

UNTAGGED_SEND = bytes([0x41, 0x43]) + struct.pack("!IIII", 0, 0, 1, 0)
TAGGED_WRITE = bytes([0xC1, 0x40]) + struct.pack("!IQ", 0x99, 0)
READ_REQUEST = bytes([0x41, 0x41]) + struct.pack("!IIII", 0, 1, 1, 0)
RREQ_HEADER = struct.pack("!IQIIQ", 1, 0, 64, 2, 0)


def quoted(ddp: bytes, rdmap: bytes = b"") -> bytes:
    return struct.pack("!H", len(ddp) + len(rdmap) + 10) + ddp + rdmap


@pytest.mark.parametrize(("fields", "tail"), [
    ((1, 2, 0x02, True, True, False), quoted(UNTAGGED_SEND)),
    ((1, 1, 0x00, True, True, False), quoted(TAGGED_WRITE)),
    ((0, 1, 0x02, True, True, True), quoted(READ_REQUEST, RREQ_HEADER)),
    ((0, 2, 0x06, True, True, False), quoted(UNTAGGED_SEND)),
])
def test_each_layout_is_recognised_by_the_quoted_header(
        fields: tuple[int, int, int, bool, bool, bool], tail: bytes) -> None:
    for pack, layout in ((rfc_terminate_word, RFC), (siw_terminate_word, SIW)):
        read = read_terminate(pack(*fields) + tail)
        assert read.reading.layout == layout
        assert read.reading.fields() == fields
        assert read.reading.fits


def test_identical_readings_need_no_choice() -> None:
    # RDMAP (0), catastrophic (0), code 0xff, no header: the same bytes in both layouts.
    read = read_terminate(siw_terminate_word(0, 0, 0xFF, False, False, False))
    assert read.other is None and read.why() == ""
    assert read.reading.fields() == (0, 0, 0xFF, False, False, False)


def test_without_quoted_header_the_defined_reading_wins() -> None:
    # siw's DDP untagged "Invalid QN" (1, 2, 0x01) with no header: RFC 5040's reading
    # (layer 2, EType 1, code 0x01) names nothing defined.
    read = read_terminate(siw_terminate_word(1, 2, 0x01, False, False, False))
    assert read.reading.layout == SIW and read.reading.known
    assert "fit both layouts" in read.why()
    rfc = read_terminate(rfc_terminate_word(2, 0, 0x02, False, False, False))
    assert rfc.reading.layout == RFC and rfc.reading.is_crc_error()
    assert rfc.why() == ""  # siw's reading (0, 2, 0x02) names nothing defined


def test_short_body_is_refused() -> None:
    with pytest.raises(ValueError, match="4 bytes"):
        read_terminate(b"\x20\x02")


def test_before_any_fpdu_from_the_peer_the_llp_reading_is_kept() -> None:
    # siw's "No matching RTR option" (LLP 2, MPA 0, code 0x07, RFC 6581 section 9), no
    # header quoted: bytes 02 07 00 00. RFC 5040's reading, RDMAP Remote Operation Error
    # 0x07, is defined too, but reports a received segment: with none received, LLP.
    word = siw_terminate_word(2, 0, 0x07, False, False, False)
    assert word == bytes.fromhex("02070000")
    assert read_terminate(word).reading.layout == RFC
    read = read_terminate(word, peer_sent=False)
    assert read.reading.layout == SIW
    assert read.reading.text() == "layer LLP (2), type MPA (0), code 0x07 No matching RTR option"
    assert "no FPDU from the peer came before it" in read.why()
