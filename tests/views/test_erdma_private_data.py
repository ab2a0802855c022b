"""Diagram labels, the HTML fields panel and describe read erdma's private data after
its 8-byte extension (erdma_cm.h: ``struct mpa_rr``, then ``struct erdma_mpa_ext`` that
PD_Length does not count, then the private data), never the extension's bytes at the
RFC 5044 offset. The frame is written byte by byte from that layout."""

from __future__ import annotations

from mpa_emu.views.describe import describe_payload, mpa_summary
from mpa_emu.views.html.fields import segment_fields
from mpa_emu.wire.segment import Segment

# bits 0x0081: MPA_REVISION_EXT_1 (129), no flag; pd_len 5; cookie 0x0a0b0c0d; ext bits 1
# (ERDMA_CC_CUBIC, erdma.h); private data "hello".
REQUEST = (b"MPA ID Req Frame" + bytes.fromhex("0081" "0005" "0a0b0c0d" "00000001")
           + b"hello")
EXTENSION = bytes.fromhex("0a0b0c0d00000001")


def _segment(payload: bytes) -> Segment:
    return Segment(b"\x02" * 6, b"\x04" * 6, bytes([192, 0, 2, 1]), bytes([192, 0, 2, 2]),
                   40001, 31000, 1, 1, 0x18, payload=payload)


def test_diagram_label_shows_the_private_data_after_the_extension() -> None:
    label = mpa_summary(REQUEST)
    assert label is not None
    assert 'pd="hello"' in label
    assert "cookie 0x0a0b0c0d" in label and "cc Cubic" in label
    assert EXTENSION[:5].hex() not in label


def test_describe_reads_the_private_data_after_the_extension() -> None:
    text = describe_payload(REQUEST)
    assert "rev 129" in text and "PD_Length 5" in text
    assert f"pdata={b'hello'.hex()}" in text


def test_fields_panel_shows_the_extension_and_the_real_private_data() -> None:
    fields = dict(segment_fields(_segment(REQUEST)))
    assert fields["private data"] == '"hello"'
    assert fields["private data hex"] == "68 65 6c 6c 6f"
    assert fields["erdma extension"] == "cookie 0x0a0b0c0d, bits 0x00000001 (CC 1: Cubic)"


def test_an_rfc_frame_of_another_revision_is_read_at_the_rfc_offset() -> None:
    # Revision 1 (RFC 5044 section 7.1): the private data follows the 20-byte header.
    frame = b"MPA ID Req Frame" + bytes.fromhex("0001" "0005") + b"hello"
    assert dict(segment_fields(_segment(frame)))["private data"] == '"hello"'
    assert "erdma" not in (mpa_summary(frame) or "")
