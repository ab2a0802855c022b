"""Echo replies of the emulated host's host stack, judged by scapy's dissectors."""

from __future__ import annotations

from scapy.layers.inet import ICMP, IP
from scapy.layers.inet6 import ICMPv6EchoReply, ICMPv6EchoRequest, IPv6
from scapy.layers.l2 import Dot1Q, Ether

from mpa_emu.live.icmp import echo_reply
from mpa_emu.wire.addr import ip_bytes, mac_bytes

OUR_MAC = mac_bytes("02:00:00:00:00:02")
ADDRESSES: dict[bytes, int | None] = {ip_bytes("192.0.2.2"): None,
                                      ip_bytes("2001:db8::2"): None,
                                      ip_bytes("192.0.2.66"): 100}
ETH = Ether(src="5a:11:22:33:44:55", dst="02:00:00:00:00:02")


def checksums_hold(pkt: Ether) -> bool:
    """Rebuild with the IPv4 and ICMP checksums cleared: scapy must compute ours."""
    fresh = pkt.copy()
    del fresh[IP].chksum
    del fresh[ICMP].chksum
    return bytes(Ether(bytes(fresh))) == bytes(pkt)


def test_ipv4_echo_request_gets_a_reply_with_the_same_id_seq_and_data() -> None:
    request = ETH / IP(src="192.0.2.1", dst="192.0.2.2", id=7) / ICMP(id=0x1234, seq=3) / b"ping!"
    reply = Ether(echo_reply(bytes(request), ADDRESSES, OUR_MAC))
    assert (reply.src, reply.dst) == ("02:00:00:00:00:02", "5a:11:22:33:44:55")
    assert (reply[IP].src, reply[IP].dst, reply[IP].ttl) == ("192.0.2.2", "192.0.2.1", 64)
    assert (reply[ICMP].type, reply[ICMP].id, reply[ICMP].seq) == (0, 0x1234, 3)
    assert bytes(reply[ICMP].payload) == b"ping!"
    assert checksums_hold(reply)


def test_ipv6_echo_request_gets_a_reply() -> None:
    request = ETH / IPv6(src="2001:db8::1", dst="2001:db8::2") / ICMPv6EchoRequest(
        id=9, seq=1, data=b"hello")
    reply = Ether(echo_reply(bytes(request), ADDRESSES, OUR_MAC))
    assert (reply[IPv6].src, reply[IPv6].dst) == ("2001:db8::2", "2001:db8::1")
    echo = reply[ICMPv6EchoReply]
    assert (echo.id, echo.seq, echo.data) == (9, 1, b"hello")
    sent = echo.cksum
    del reply[ICMPv6EchoReply].cksum
    assert Ether(bytes(reply))[ICMPv6EchoReply].cksum == sent


def test_vlan_address_answers_on_its_vlan_only() -> None:
    on_vlan = ETH / Dot1Q(vlan=100) / IP(src="192.0.2.65", dst="192.0.2.66") / ICMP()
    reply = Ether(echo_reply(bytes(on_vlan), ADDRESSES, OUR_MAC))
    assert reply[Dot1Q].vlan == 100 and reply[ICMP].type == 0
    untagged = ETH / IP(src="192.0.2.65", dst="192.0.2.66") / ICMP()
    assert echo_reply(bytes(untagged), ADDRESSES, OUR_MAC) is None


def test_requests_not_for_us_or_broken_get_nothing() -> None:
    other_ip = ETH / IP(src="192.0.2.1", dst="192.0.2.9") / ICMP()
    other_mac = Ether(dst="02:00:00:00:00:99") / IP(src="192.0.2.1", dst="192.0.2.2") / ICMP()
    reply_not_request = ETH / IP(src="192.0.2.1", dst="192.0.2.2") / ICMP(type=0)
    bad = bytearray(bytes(ETH / IP(src="192.0.2.1", dst="192.0.2.2") / ICMP()))
    bad[-1] ^= 0xFF  # breaks the ICMP checksum
    for frame in (bytes(other_ip), bytes(other_mac), bytes(reply_not_request), bytes(bad),
                  b"\x00" * 20):
        assert echo_reply(frame, ADDRESSES, OUR_MAC) is None
