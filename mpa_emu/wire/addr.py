"""Address helpers: the core keeps IP addresses as packed bytes (4 or 16) and MACs as 6 bytes."""

from __future__ import annotations

import ipaddress
import socket
from typing import Final

_PACKED: Final[dict[str, bytes]] = {}
_PACKED_MAX: Final = 4096
"""Addresses :func:`ip_bytes` remembers (a run names the same few again and again, and
``ipaddress`` takes about 10 us to parse one); past this many it starts over."""


def ip_bytes(text: str) -> bytes:
    """Pack an IPv4 or IPv6 address given as text; raise ValueError with the text on failure."""
    packed = _PACKED.get(text)
    if packed is not None:
        return packed
    try:
        packed = ipaddress.ip_address(text).packed
    except ValueError:
        raise ValueError(f"not an IPv4 or IPv6 address: {text!r}") from None
    if len(_PACKED) >= _PACKED_MAX:
        _PACKED.clear()
    _PACKED[text] = packed
    return packed


def ip_text(packed: bytes) -> str:
    """Format a packed 4- or 16-byte address as text."""
    if len(packed) == 4:
        return socket.inet_ntop(socket.AF_INET, packed)
    if len(packed) == 16:
        return socket.inet_ntop(socket.AF_INET6, packed)
    raise ValueError(f"address must be 4 or 16 bytes, got {len(packed)}")


def is_ipv4(packed: bytes) -> bool:
    """True for a packed IPv4 address."""
    return len(packed) == 4


def mac_bytes(text: str) -> bytes:
    """Parse ``aa:bb:cc:dd:ee:ff`` (or with dashes) into 6 bytes."""
    parts = text.replace("-", ":").split(":")
    if len(parts) != 6:
        raise ValueError(f"not a MAC address: {text!r}")
    try:
        raw = bytes(int(p, 16) for p in parts)
    except ValueError:
        raise ValueError(f"not a MAC address: {text!r}") from None
    return raw


def mac_text(raw: bytes) -> str:
    """Format 6 bytes as ``aa:bb:cc:dd:ee:ff``."""
    if len(raw) != 6:
        raise ValueError(f"MAC must be 6 bytes, got {len(raw)}")
    return ":".join(f"{b:02x}" for b in raw)
