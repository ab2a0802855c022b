"""What a TCP payload is in MPA terms (RFC 5044 section 7.1: the 16-byte key, then the
flags byte whose R bit marks a reject), from bytes the tests write."""

from __future__ import annotations

from mpa_emu.wire.mpa import mpa_kind

REQ_KEY = b"MPA ID Req Frame"
REP_KEY = b"MPA ID Rep Frame"


def _frame(key: bytes, flags: int) -> bytes:
    return key + bytes([flags, 2]) + (0).to_bytes(2, "big")


def test_a_request_key_is_a_request() -> None:
    assert mpa_kind(_frame(REQ_KEY, 0x00)) == "request"


def test_a_reply_key_without_r_is_a_reply_and_with_r_a_reject() -> None:
    assert mpa_kind(_frame(REP_KEY, 0x40)) == "reply"
    assert mpa_kind(_frame(REP_KEY, 0x20)) == "reject"


def test_a_key_without_the_rest_of_the_header_is_data() -> None:
    assert mpa_kind(REQ_KEY + b"\x00\x02") == "data"
    assert mpa_kind(b"\x00\x10" + bytes(20)) == "data"


def test_no_payload_is_no_kind() -> None:
    assert mpa_kind(b"") == ""
