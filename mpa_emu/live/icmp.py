"""Echo replies for the emulated host's addresses (what its Linux host stack would send),
so ``ping`` tells a user the TAP link and neighbour resolution work.

ICMP echo (RFC 792) over IPv4 and ICMPv6 echo (RFC 4443 section 4) over IPv6, built
with ``struct``. The CM never sees these frames: on a real irdma host they go to the
host stack, not to the connection manager.
"""

from __future__ import annotations

import struct

from mpa_emu.live.neighbour import ETH_P_8021Q, ETH_P_IPV6, icmpv6_checksum, tagged
from mpa_emu.wire import codec

ETH_P_IP = 0x0800
IPPROTO_ICMP = 1
IPPROTO_ICMPV6 = 58
ICMP_ECHO_REQUEST, ICMP_ECHO_REPLY = 8, 0
ICMPV6_ECHO_REQUEST, ICMPV6_ECHO_REPLY = 128, 129
REPLY_TTL = 64


def echo_reply(frame: bytes, addresses: dict[bytes, int | None], mac: bytes) -> bytes | None:
    """The echo reply to ``frame`` when it is an echo request to one of ``addresses``
    (on that address's VLAN) sent to ``mac``; ``None`` otherwise."""
    if len(frame) < 14 or frame[:6] != mac:
        return None
    (ethertype,) = struct.unpack_from("!H", frame, 12)
    vlan = None
    offset = 14
    if ethertype == ETH_P_8021Q and len(frame) >= 18:
        (tci, ethertype) = struct.unpack_from("!HH", frame, 14)
        vlan, offset = tci & 0x0FFF, 18
    packet = frame[offset:]
    if ethertype == ETH_P_IP:
        reply = _ipv4(packet, addresses, vlan)
    elif ethertype == ETH_P_IPV6:
        reply = _ipv6(packet, addresses, vlan)
    else:
        return None
    if reply is None:
        return None
    return tagged(frame[6:12] + mac + struct.pack("!H", ethertype) + reply, vlan)


def _ipv4(packet: bytes, addresses: dict[bytes, int | None], vlan: int | None) -> bytes | None:
    if len(packet) < 20 or packet[0] >> 4 != 4:
        return None
    ihl = (packet[0] & 0x0F) * 4
    (total,) = struct.unpack_from("!H", packet, 2)
    if ihl < 20 or total > len(packet) or total < ihl + 8 or packet[9] != IPPROTO_ICMP:
        return None
    src, dst = packet[12:16], packet[16:20]
    if dst not in addresses or addresses[dst] != vlan or codec.internet_checksum(packet[:ihl]):
        return None
    (frag,) = struct.unpack_from("!H", packet, 6)
    icmp = packet[ihl:total]
    if frag & 0x3FFF or icmp[0] != ICMP_ECHO_REQUEST or icmp[1] != 0 \
            or codec.internet_checksum(icmp):
        return None
    body = bytes((ICMP_ECHO_REPLY, 0, 0, 0)) + icmp[4:]
    body = body[:2] + struct.pack("!H", codec.internet_checksum(body)) + body[4:]
    (ident,) = struct.unpack_from("!H", packet, 4)
    header = struct.pack("!BBHHHBBH4s4s", 0x45, packet[1], 20 + len(body), ident, 0x4000,
                         REPLY_TTL, IPPROTO_ICMP, 0, dst, src)
    header = header[:10] + struct.pack("!H", codec.internet_checksum(header)) + header[12:]
    return header + body


def _ipv6(packet: bytes, addresses: dict[bytes, int | None], vlan: int | None) -> bytes | None:
    if len(packet) < 48 or packet[0] >> 4 != 6 or packet[6] != IPPROTO_ICMPV6:
        return None
    (length,) = struct.unpack_from("!H", packet, 4)
    src, dst = bytes(packet[8:24]), bytes(packet[24:40])
    icmp = bytes(packet[40:40 + length])
    if len(icmp) != length or length < 8 or dst not in addresses or addresses[dst] != vlan:
        return None
    if icmp[0] != ICMPV6_ECHO_REQUEST or icmp[1] != 0 or icmpv6_checksum(src, dst, icmp):
        return None
    body = bytes((ICMPV6_ECHO_REPLY, 0, 0, 0)) + icmp[4:]
    body = body[:2] + struct.pack("!H", icmpv6_checksum(dst, src, body)) + body[4:]
    header = struct.pack("!IHBB", 6 << 28, len(body), IPPROTO_ICMPV6, REPLY_TTL) + dst + src
    return header + body
