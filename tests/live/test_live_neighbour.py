"""ARP and neighbour-discovery frames of the live responder, judged by scapy's dissectors."""

from __future__ import annotations

import ipaddress

from scapy.layers.inet import IP, TCP
from scapy.layers.inet6 import (
    ICMPv6ND_NA,
    ICMPv6ND_NS,
    ICMPv6NDOptDstLLAddr,
    ICMPv6NDOptSrcLLAddr,
    IPv6,
)
from scapy.layers.l2 import ARP, Dot1Q, Ether

from mpa_emu.live.neighbour import NeighbourResponder, solicited_node
from mpa_emu.wire.addr import ip_bytes, mac_bytes

OUR_MAC = mac_bytes("02:00:00:00:00:02")
KERNEL_MAC = mac_bytes("5a:11:22:33:44:55")
OUR_V4, KERNEL_V4 = ip_bytes("192.0.2.2"), ip_bytes("192.0.2.1")
OUR_V6, KERNEL_V6 = ip_bytes("2001:db8::2"), ip_bytes("2001:db8::1")


def responder() -> NeighbourResponder:
    r = NeighbourResponder(OUR_MAC)
    r.add_address(OUR_V4)
    r.add_address(OUR_V6)
    return r


def kernel_arp_request(target: str) -> bytes:
    return bytes(Ether(src="5a:11:22:33:44:55", dst="ff:ff:ff:ff:ff:ff")
                 / ARP(op=1, hwsrc="5a:11:22:33:44:55", psrc="192.0.2.1", pdst=target))


def kernel_ns(target: str, src: str = "2001:db8::1") -> bytes:
    group = str(ipaddress.ip_address(solicited_node(ip_bytes(target))))
    pkt = (Ether(src="5a:11:22:33:44:55", dst="33:33:ff:00:00:02")
           / IPv6(src=src, dst=group, hlim=255) / ICMPv6ND_NS(tgt=target))
    if src != "::":
        pkt = pkt / ICMPv6NDOptSrcLLAddr(lladdr="5a:11:22:33:44:55")
    return bytes(pkt)


def test_arp_request_for_our_address_gets_a_reply_and_teaches_the_sender():
    result = responder().handle(kernel_arp_request("192.0.2.2"))
    assert result is not None
    assert result.learned == [(KERNEL_V4, KERNEL_MAC)]
    (reply,) = result.replies
    pkt = Ether(reply)
    assert pkt.dst == "5a:11:22:33:44:55" and pkt.src == "02:00:00:00:00:02"
    arp = pkt[ARP]
    assert (arp.op, arp.hwsrc, arp.psrc, arp.hwdst, arp.pdst) == (
        2, "02:00:00:00:00:02", "192.0.2.2", "5a:11:22:33:44:55", "192.0.2.1")


def test_arp_request_for_another_address_is_not_answered():
    result = responder().handle(kernel_arp_request("192.0.2.99"))
    assert result is not None and result.replies == []


def test_removed_address_is_no_longer_answered():
    r = responder()
    r.remove_address(OUR_V4)
    result = r.handle(kernel_arp_request("192.0.2.2"))
    assert result is not None and result.replies == []


def test_arp_solicit_is_a_broadcast_request_from_our_address():
    pkt = Ether(responder().solicit(KERNEL_V4, OUR_V4))
    assert pkt.dst == "ff:ff:ff:ff:ff:ff"
    assert (pkt[ARP].op, pkt[ARP].psrc, pkt[ARP].pdst, pkt[ARP].hwsrc) == (
        1, "192.0.2.2", "192.0.2.1", "02:00:00:00:00:02")


def test_neighbour_solicitation_gets_a_solicited_override_advertisement():
    result = responder().handle(kernel_ns("2001:db8::2"))
    assert result is not None
    assert result.learned == [(KERNEL_V6, KERNEL_MAC)]
    (reply,) = result.replies
    pkt = Ether(reply)
    assert pkt.dst == "5a:11:22:33:44:55"
    assert (pkt[IPv6].src, pkt[IPv6].dst, pkt[IPv6].hlim) == ("2001:db8::2", "2001:db8::1", 255)
    na = pkt[ICMPv6ND_NA]
    assert (na.R, na.S, na.O, na.tgt) == (0, 1, 1, "2001:db8::2")
    assert pkt[ICMPv6NDOptDstLLAddr].lladdr == "02:00:00:00:00:02"
    # scapy recomputes the ICMPv6 checksum when the field is cleared: ours must match.
    sent = na.cksum
    del pkt[ICMPv6ND_NA].cksum
    assert Ether(bytes(pkt))[ICMPv6ND_NA].cksum == sent


def test_duplicate_address_probe_is_answered_to_all_nodes_unsolicited():
    result = responder().handle(kernel_ns("2001:db8::2", src="::"))
    assert result is not None and result.learned == []
    pkt = Ether(result.replies[0])
    assert pkt.dst == "33:33:00:00:00:01" and pkt[IPv6].dst == "ff02::1"
    assert pkt[ICMPv6ND_NA].S == 0


def test_solicitation_with_a_bad_checksum_is_ignored():
    frame = bytearray(kernel_ns("2001:db8::2"))
    frame[14 + 40 + 2] ^= 0xFF
    result = responder().handle(bytes(frame))
    assert result is not None and result.replies == [] and result.learned == []


def test_neighbour_solicit_goes_to_the_solicited_node_group():
    pkt = Ether(responder().solicit(KERNEL_V6, OUR_V6))
    assert pkt.dst == "33:33:ff:00:00:01"
    assert pkt[IPv6].dst == "ff02::1:ff00:1" and pkt[IPv6].hlim == 255
    assert pkt[ICMPv6ND_NS].tgt == "2001:db8::1"
    assert pkt[ICMPv6NDOptSrcLLAddr].lladdr == "02:00:00:00:00:02"


def test_advertisement_teaches_the_target_mac():
    na = bytes(Ether(src="5a:11:22:33:44:55", dst="02:00:00:00:00:02")
               / IPv6(src="2001:db8::1", dst="2001:db8::2", hlim=255)
               / ICMPv6ND_NA(tgt="2001:db8::1", S=1, O=1)
               / ICMPv6NDOptDstLLAddr(lladdr="5a:11:22:33:44:55"))
    result = responder().handle(na)
    assert result is not None and result.learned == [(KERNEL_V6, KERNEL_MAC)]


def test_tcp_and_short_frames_are_passed_on():
    r = responder()
    assert r.handle(b"\x00" * 10) is None

    assert r.handle(bytes(Ether() / IP(dst="192.0.2.2") / TCP())) is None


def test_vlan_tagged_request_is_answered_only_for_an_address_on_that_vlan():
    r = responder()
    r.add_address(ip_bytes("192.0.2.66"), vlan=100)
    request = bytes(Ether(src="5a:11:22:33:44:55", dst="ff:ff:ff:ff:ff:ff") / Dot1Q(vlan=100)
                    / ARP(op=1, hwsrc="5a:11:22:33:44:55", psrc="192.0.2.65",
                          pdst="192.0.2.66"))
    result = r.handle(request)
    assert result is not None
    (reply,) = result.replies
    assert Ether(reply)[Dot1Q].vlan == 100 and Ether(reply)[ARP].psrc == "192.0.2.66"
    wrong_vlan = bytes(Ether(src="5a:11:22:33:44:55", dst="ff:ff:ff:ff:ff:ff") / Dot1Q(vlan=100)
                       / ARP(op=1, hwsrc="5a:11:22:33:44:55", psrc="192.0.2.65",
                             pdst="192.0.2.2"))
    for other in (wrong_vlan, kernel_arp_request("192.0.2.66")):
        answer = r.handle(other)  # 192.0.2.2 lives untagged; .66 is not asked on VLAN 100
        assert answer is not None and answer.replies == []


def test_solicit_from_a_vlan_address_is_tagged():
    r = responder()
    r.add_address(ip_bytes("192.0.2.66"), vlan=100)
    pkt = Ether(r.solicit(ip_bytes("192.0.2.65"), ip_bytes("192.0.2.66")))
    assert pkt[Dot1Q].vlan == 100 and pkt[ARP].pdst == "192.0.2.65"
