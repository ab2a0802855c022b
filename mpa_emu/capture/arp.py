"""ARP frames (RFC 826) named as tcpdump names them: ``who-has 192.0.2.2 tell
192.0.2.1`` for a request, ``192.0.2.2 is-at 02:00:00:00:00:02`` for a reply. Only IPv4
over Ethernet (hardware type 1, protocol 0x0800, lengths 6 and 4), after an Ethernet
header with any 802.1Q/802.1ad tags; anything else is not ARP here."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from mpa_emu.wire.addr import ip_text

ETHERTYPE_ARP = 0x0806
_VLAN_TAGS = (0x8100, 0x88A8)
_REQUEST, _REPLY = 1, 2  # RFC 826 ar$op: ares_op$REQUEST, ares_op$REPLY


@dataclass(frozen=True, slots=True)
class Arp:
    """One ARP request or reply: operation, sender and target hardware and IPv4
    addresses."""

    op: int
    sender_mac: bytes
    sender_ip: bytes
    target_mac: bytes
    target_ip: bytes

    @property
    def is_request(self) -> bool:
        """A request (who-has), broadcast to every host."""
        return self.op == _REQUEST

    @property
    def sender(self) -> str:
        """The sender's IPv4 address as text."""
        return ip_text(self.sender_ip)

    @property
    def target(self) -> str:
        """The target's IPv4 address as text."""
        return ip_text(self.target_ip)

    def text(self) -> str:
        """``ARP who-has 192.0.2.2 tell 192.0.2.1`` / ``ARP 192.0.2.2 is-at MAC``."""
        if self.op == _REQUEST:
            return f"ARP who-has {self.target} tell {self.sender}"
        if self.op == _REPLY:
            return f"ARP {self.sender} is-at {mac_text(self.sender_mac)}"
        return f"ARP operation {self.op} from {self.sender} for {self.target}"


def mac_text(mac: bytes) -> str:
    """``02:00:00:00:00:01``."""
    return ":".join(f"{b:02x}" for b in mac)


def parse_arp(frame: bytes) -> Arp | None:
    """The ARP message of an Ethernet frame, or None when it carries none (another
    ethertype, another hardware or protocol type, or too short)."""
    if len(frame) < 14:
        return None
    off = 12
    ethertype = struct.unpack_from("!H", frame, off)[0]
    while ethertype in _VLAN_TAGS and len(frame) >= off + 6:
        off += 4
        ethertype = struct.unpack_from("!H", frame, off)[0]
    off += 2
    if ethertype != ETHERTYPE_ARP or len(frame) < off + 28:
        return None
    htype, ptype, hlen, plen, op = struct.unpack_from("!HHBBH", frame, off)
    if (htype, ptype, hlen, plen) != (1, 0x0800, 6, 4):
        return None
    body = frame[off + 8:off + 28]
    return Arp(op, body[0:6], body[6:10], body[10:16], body[16:20])
