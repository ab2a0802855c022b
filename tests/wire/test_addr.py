"""Address text to packed bytes and back (RFC 791 section 3.1, RFC 4291 section 2.2)."""

from __future__ import annotations

import pytest

from mpa_emu.wire import addr
from mpa_emu.wire.addr import ip_bytes, ip_text


def test_packs_ipv4_and_ipv6_text() -> None:
    assert ip_bytes("192.0.2.1") == bytes([192, 0, 2, 1])
    assert ip_bytes("2001:db8::7") == bytes.fromhex("20010db8000000000000000000000007")
    assert ip_text(ip_bytes("2001:db8::7")) == "2001:db8::7"


def test_a_bad_address_names_the_text_every_time() -> None:
    for _ in range(2):
        with pytest.raises(ValueError, match=r"not an IPv4 or IPv6 address: '192\.0\.2\.256'"):
            ip_bytes("192.0.2.256")


def test_repeated_text_gives_the_same_bytes_and_the_memo_stays_bounded() -> None:
    assert ip_bytes("198.51.100.9") is ip_bytes("198.51.100.9")
    for i in range(addr._PACKED_MAX + 10):
        text = f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}"
        assert ip_bytes(text) == bytes([10, i >> 16 & 255, i >> 8 & 255, i & 255])
    assert len(addr._PACKED) <= addr._PACKED_MAX
