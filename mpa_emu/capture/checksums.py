"""Checksums as a capture tool reads them, not as a NIC does.

A capture taken on a Linux endpoint shows the frames that endpoint sent before its NIC
filled in the TCP checksum: with TX checksum offload (``CHECKSUM_PARTIAL``) the stack
writes only the folded one's-complement sum of the pseudo-header into the field
(``tcp_v4_send_check``/``__tcp_v6_send_check``) and leaves the rest to the hardware.
Wireshark does not validate TCP checksums by default for that reason. This module sorts
every TCP checksum into one of four verdicts:

- ``good``: the segment sums to -0 (RFC 1071 section 2, RFC 9293 section 3.1);
- ``offload``: the field holds the pseudo-header partial sum, or zero: what a host with
  TX checksum offload hands its NIC, so the capture cannot tell what the wire carried;
- ``bad``: anything else;
- ``unchecked``: the frame was captured short, so its checksum cannot be verified.

IPv4 header checksums are always computed by the stack, never offloaded, so a wrong one
is simply bad. What a verdict means for a report depends on the :class:`Mode` a user
picks (``--checksums``): ``strict`` treats offload artefacts as errors (the NIC's view),
``offload`` (the default of every reading command) makes them a note, ``off`` never
checks.
"""

from __future__ import annotations

import struct
from enum import StrEnum
from typing import Literal

from mpa_emu.wire.codec import internet_checksum, ones_complement_sum

__all__ = [
    "OFFLOAD_NOTE",
    "Mode",
    "Verdict",
    "ip_header_ok",
    "is_error",
    "pseudo_header",
    "repaired",
    "tcp_verdict",
]

OFFLOAD_NOTE = "TX checksum offload: not verified"
"""What a report says of a frame whose TCP checksum is an offload artefact."""


class Verdict(StrEnum):
    """What a TCP checksum in a capture says about the segment."""

    GOOD = "good"
    BAD = "bad"
    OFFLOAD = "offload"
    UNCHECKED = "unchecked"


class Mode(StrEnum):
    """How a reading command treats checksums (``--checksums``)."""

    STRICT = "strict"
    """As the receiving NIC: anything but a correct checksum is an error."""
    OFFLOAD = "offload"
    """As Wireshark would with validation on: offload artefacts are notes, not errors."""
    OFF = "off"
    """Never checked."""


ModeName = Literal["strict", "offload", "off"]
"""A :class:`Mode` as the reports name it (``--checksums``, the JSON's ``checksums``)."""

_MODE_NAMES: dict[Mode, ModeName] = {Mode.STRICT: "strict", Mode.OFFLOAD: "offload",
                                     Mode.OFF: "off"}


def mode_name(mode: Mode) -> ModeName:
    """The name of ``mode``."""
    return _MODE_NAMES[mode]


def is_error(verdict: Verdict, mode: Mode) -> bool:
    """True when ``verdict`` is an error under ``mode``."""
    if mode is Mode.OFF:
        return False
    if verdict is Verdict.BAD:
        return True
    return mode is Mode.STRICT and verdict is Verdict.OFFLOAD


def pseudo_header(src: bytes, dst: bytes, tcp_length: int) -> bytes:
    """The TCP pseudo-header over IPv4 (RFC 9293 section 3.1) or IPv6 (RFC 8200 section
    8.1), chosen by the address length."""
    if len(src) == 16:
        return src + dst + struct.pack("!IxxxB", tcp_length, 6)
    return src + dst + struct.pack("!BBH", 0, 6, tcp_length)


def tcp_verdict(pseudo: bytes, segment: bytes | bytearray | memoryview,
                *, complete: bool = True) -> Verdict:
    """The verdict on the TCP checksum of ``segment`` (header and payload, as captured)
    with the ``pseudo`` header; ``complete=False`` for a frame captured short."""
    if not complete or len(segment) < 20:
        return Verdict.UNCHECKED
    if ones_complement_sum(bytes(pseudo) + bytes(segment)) == 0:
        return Verdict.GOOD
    field = (segment[16] << 8) | segment[17]
    # The stack stores the folded pseudo-header sum uncomplemented; 0 and 0xFFFF are the
    # same residue, and ones_complement_sum reduces modulo 0xFFFF.
    if field == 0 or field % 0xFFFF == ones_complement_sum(pseudo):
        return Verdict.OFFLOAD
    return Verdict.BAD


def ip_header_ok(header: bytes | bytearray | memoryview) -> bool:
    """True when an IPv4 header (options included) sums to -0 (RFC 791 section 3.1)."""
    return ones_complement_sum(bytes(header)) == 0


def repaired(frame: bytes) -> bytes:
    """``frame`` (Ethernet, optionally 802.1Q-tagged, IPv4 or IPv6 carrying TCP) with its
    IPv4 header and TCP checksums recomputed: the frame as the sender's NIC put it on
    the wire. Raises ``struct.error`` or ``IndexError`` for a frame too short to hold
    the headers it announces."""
    buf = bytearray(frame)
    off = 14
    ethertype = struct.unpack_from("!H", buf, 12)[0]
    while ethertype in (0x8100, 0x88A8):
        ethertype = struct.unpack_from("!H", buf, off + 2)[0]
        off += 4
    if ethertype == 0x0800:
        ihl = (buf[off] & 0xF) * 4
        total = struct.unpack_from("!H", buf, off + 2)[0]
        struct.pack_into("!H", buf, off + 10, 0)
        struct.pack_into("!H", buf, off + 10, internet_checksum(bytes(buf[off:off + ihl])))
        src, dst = bytes(buf[off + 12:off + 16]), bytes(buf[off + 16:off + 20])
        tcp_off, tcp_len = off + ihl, total - ihl
    else:
        tcp_len = struct.unpack_from("!H", buf, off + 4)[0]
        src, dst = bytes(buf[off + 8:off + 24]), bytes(buf[off + 24:off + 40])
        tcp_off = off + 40
    if tcp_off + tcp_len > len(buf) or tcp_len < 20:
        raise IndexError("frame shorter than its IP length")
    struct.pack_into("!H", buf, tcp_off + 16, 0)
    csum = internet_checksum(pseudo_header(src, dst, tcp_len)
                             + bytes(buf[tcp_off:tcp_off + tcp_len]))
    struct.pack_into("!H", buf, tcp_off + 16, csum)
    return bytes(buf)
