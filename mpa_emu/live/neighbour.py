"""ARP (RFC 826) and IPv6 neighbour discovery (RFC 4861) for the emulated host's
addresses, built and parsed with ``struct`` (this sits on the hot receive path).

The responder answers requests for its own addresses and learns the link-layer address
of every neighbour that speaks to it; it also builds the requests the driver sends to
resolve a peer before ``connect`` (``irdma_make_cm_node`` needs a valid neighbour entry:
``irdma_addr_resolve_neigh``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from mpa_emu.wire import codec

ETH_P_ARP = 0x0806
ETH_P_IPV6 = 0x86DD
ETH_P_8021Q = 0x8100
ETH_HEADER = 14
BROADCAST = b"\xff" * 6

ARP_REQUEST = 1
ARP_REPLY = 2
_ARP_ETHER_IPV4 = struct.pack("!HHBB", 1, 0x0800, 6, 4)  # htype, ptype, hlen, plen

IPPROTO_ICMPV6 = 58
ND_SOLICIT = 135
ND_ADVERT = 136
OPT_SOURCE_LLADDR = 1
OPT_TARGET_LLADDR = 2
NA_SOLICITED = 0x40000000
NA_OVERRIDE = 0x20000000
ALL_NODES = bytes.fromhex("ff020000000000000000000000000001")
_SOLICITED_PREFIX = bytes.fromhex("ff02000000000000000000" "01ff")  # ff02::1:ff00:0/104


@dataclass
class NeighbourResult:
    """What one received ARP/ND frame produced: frames to send back and learned
    ``(ip, mac)`` pairs (packed)."""

    replies: list[bytes] = field(default_factory=list)
    learned: list[tuple[bytes, bytes]] = field(default_factory=list)


def icmpv6_checksum(src: bytes, dst: bytes, message: bytes) -> int:
    """RFC 4443 section 2.3: over the IPv6 pseudo-header and the message."""
    pseudo = src + dst + struct.pack("!I3xB", len(message), IPPROTO_ICMPV6)
    return codec.internet_checksum(pseudo + message)


def solicited_node(ip6: bytes) -> bytes:
    """ff02::1:ffXX:XXXX for an IPv6 address (RFC 4291 section 2.7.1)."""
    return _SOLICITED_PREFIX + ip6[13:]


def multicast_mac(ip6: bytes) -> bytes:
    """33:33 plus the low 32 bits of an IPv6 multicast address (RFC 2464 section 7)."""
    return b"\x33\x33" + ip6[12:]


def _ipv6_frame(src_mac: bytes, dst_mac: bytes, src: bytes, dst: bytes,
                icmp: bytes) -> bytes:
    csum = icmpv6_checksum(src, dst, icmp)
    icmp = icmp[:2] + struct.pack("!H", csum) + icmp[4:]
    # Version 6, hop limit 255 as RFC 4861 section 7.1.1 requires for ND.
    ip = struct.pack("!IHBB", 6 << 28, len(icmp), IPPROTO_ICMPV6, 255) + src + dst
    return dst_mac + src_mac + struct.pack("!H", ETH_P_IPV6) + ip + icmp


def tagged(frame: bytes, vlan: int | None) -> bytes:
    """``frame`` with one 802.1Q tag (priority 0) for ``vlan``; unchanged for ``None``."""
    if vlan is None:
        return frame
    return frame[:12] + struct.pack("!HH", ETH_P_8021Q, vlan & 0x0FFF) + frame[12:]


def arp_frame(op: int, src_mac: bytes, src_ip: bytes, dst_mac: bytes, dst_ip: bytes) -> bytes:
    """An Ethernet ARP frame; a request goes to broadcast with a zero target MAC."""
    eth_dst = BROADCAST if op == ARP_REQUEST else dst_mac
    target_mac = b"\0" * 6 if op == ARP_REQUEST else dst_mac
    body = _ARP_ETHER_IPV4 + struct.pack("!H", op) + src_mac + src_ip + target_mac + dst_ip
    return eth_dst + src_mac + struct.pack("!H", ETH_P_ARP) + body


def neighbour_solicitation(src_mac: bytes, src_ip: bytes, target: bytes) -> bytes:
    """An NS for ``target`` to its solicited-node group, with our link-layer address."""
    group = solicited_node(target)
    icmp = struct.pack("!BBHI", ND_SOLICIT, 0, 0, 0) + target
    icmp += struct.pack("!BB", OPT_SOURCE_LLADDR, 1) + src_mac
    return _ipv6_frame(src_mac, multicast_mac(group), src_ip, group, icmp)


def neighbour_advertisement(src_mac: bytes, target: bytes, dst_mac: bytes, dst_ip: bytes,
                            solicited: bool) -> bytes:
    """An NA for our ``target`` address carrying our link-layer address."""
    flags = NA_OVERRIDE | (NA_SOLICITED if solicited else 0)
    icmp = struct.pack("!BBHI", ND_ADVERT, 0, 0, flags) + target
    icmp += struct.pack("!BB", OPT_TARGET_LLADDR, 1) + src_mac
    return _ipv6_frame(src_mac, dst_mac, target, dst_ip, icmp)


def _lladdr_option(options: bytes, kind: int) -> bytes | None:
    offset = 0
    while offset + 2 <= len(options):
        opt_type, units = options[offset], options[offset + 1]
        if units == 0:  # RFC 4861 section 4.6: length 0 is invalid, drop the packet
            return None
        if opt_type == kind and units == 1 and offset + 8 <= len(options):
            return bytes(options[offset + 2:offset + 8])
        offset += units * 8
    return None


class NeighbourResponder:
    """Answers ARP and NS for the host's addresses; learns neighbours from ARP/ND."""

    def __init__(self, mac: bytes) -> None:
        if len(mac) != 6:
            raise ValueError(f"MAC must be 6 bytes, got {len(mac)}")
        self.mac = mac
        self.addresses: dict[bytes, int | None] = {}
        """Our addresses and the VLAN each lives on (``None`` = untagged)."""

    def add_address(self, ip: bytes, vlan: int | None = None) -> None:
        """Answer for ``ip`` (4 or 16 packed bytes) on ``vlan`` from now on."""
        self.addresses[ip] = vlan

    def remove_address(self, ip: bytes) -> None:
        """Stop answering for ``ip``."""
        self.addresses.pop(ip, None)

    def solicit(self, target: bytes, source: bytes) -> bytes:
        """The ARP request or NS that resolves ``target`` from our ``source`` address,
        tagged with the source address's VLAN."""
        if len(target) == 4:
            frame = arp_frame(ARP_REQUEST, self.mac, source, BROADCAST, target)
        else:
            frame = neighbour_solicitation(self.mac, source, target)
        return tagged(frame, self.addresses.get(source))

    def handle(self, frame: bytes) -> NeighbourResult | None:
        """Process one received frame. ``None`` when it is not ARP or ND (the caller
        passes it on); otherwise the replies to send and what was learned. A frame with
        one 802.1Q tag is answered on the same VLAN, for addresses on that VLAN."""
        if len(frame) < ETH_HEADER:
            return None
        (ethertype,) = struct.unpack_from("!H", frame, 12)
        vlan = None
        if ethertype == ETH_P_8021Q and len(frame) >= ETH_HEADER + 4:
            (tci, ethertype) = struct.unpack_from("!HH", frame, 14)
            vlan = tci & 0x0FFF
            frame = frame[:12] + frame[16:]
        if ethertype == ETH_P_ARP:
            result = self._arp(frame, vlan)
        elif ethertype == ETH_P_IPV6 and len(frame) >= ETH_HEADER + 40 + 24 \
                and frame[ETH_HEADER + 6] == IPPROTO_ICMPV6 \
                and frame[ETH_HEADER + 40] in (ND_SOLICIT, ND_ADVERT):
            result = self._nd(frame, vlan)
        else:
            return None
        result.replies = [tagged(reply, vlan) for reply in result.replies]
        return result

    def _ours(self, ip: bytes, vlan: int | None) -> bool:
        return ip in self.addresses and self.addresses[ip] == vlan

    def _arp(self, frame: bytes, vlan: int | None) -> NeighbourResult:
        result = NeighbourResult()
        body = frame[ETH_HEADER:ETH_HEADER + 28]
        if len(body) < 28 or body[:6] != _ARP_ETHER_IPV4:
            return result
        (op,) = struct.unpack_from("!H", body, 6)
        sender_mac, sender_ip = body[8:14], body[14:18]
        target_ip = body[24:28]
        if sender_ip != b"\0\0\0\0" and sender_mac != self.mac:
            result.learned.append((bytes(sender_ip), bytes(sender_mac)))
        if op == ARP_REQUEST and self._ours(bytes(target_ip), vlan):
            result.replies.append(arp_frame(ARP_REPLY, self.mac, bytes(target_ip),
                                            bytes(sender_mac), bytes(sender_ip)))
        return result

    def _nd(self, frame: bytes, vlan: int | None) -> NeighbourResult:
        result = NeighbourResult()
        ip = frame[ETH_HEADER:ETH_HEADER + 40]
        (payload_len,) = struct.unpack_from("!H", ip, 4)
        icmp = frame[ETH_HEADER + 40:ETH_HEADER + 40 + payload_len]
        src, dst = bytes(ip[8:24]), bytes(ip[24:40])
        # RFC 4861 sections 7.1.1/7.1.2: hop limit 255, code 0, a valid checksum.
        if ip[7] != 255 or len(icmp) < 24 or icmp[1] != 0 or icmpv6_checksum(src, dst, icmp):
            return result
        target = bytes(icmp[8:24])
        options = bytes(icmp[24:])
        if icmp[0] == ND_SOLICIT:
            lladdr = _lladdr_option(options, OPT_SOURCE_LLADDR)
            unspecified = src == b"\0" * 16
            if lladdr is not None and not unspecified:
                result.learned.append((src, lladdr))
            if self._ours(target, vlan):
                if unspecified:  # DAD probe: answer to all-nodes, unsolicited
                    reply = neighbour_advertisement(self.mac, target,
                                                    multicast_mac(ALL_NODES), ALL_NODES, False)
                else:
                    reply = neighbour_advertisement(self.mac, target,
                                                    lladdr or bytes(frame[6:12]), src, True)
                result.replies.append(reply)
        else:
            lladdr = _lladdr_option(options, OPT_TARGET_LLADDR) or bytes(frame[6:12])
            if lladdr != self.mac:
                result.learned.append((target, lladdr))
        return result
