"""Every frame the codec refuses, with the reason a NIC or the CM would give, and every
segment it cannot put on the wire. Malformed frames are built with scapy, so their bytes
do not depend on the codec."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrFragment, IPv6ExtHdrHopByHop
from scapy.layers.l2 import ARP, Dot1Q, Ether
from scapy.packet import Packet, Raw

from mpa_emu.wire.codec import DecodeError, DecodeFailure, EncodeError, decode, encode, from_scapy
from mpa_emu.wire.segment import ACK, Segment

ETH = Ether(src="02:00:00:00:0a:01", dst="02:00:00:00:0a:02")
V4 = IP(src="192.168.10.1", dst="192.168.10.2", flags="DF")
V6 = IPv6(src="fd00:a::1", dst="fd00:a::2")
SEG = TCP(sport=40001, dport=31000, seq=1, ack=2, flags="A", window=65535)


def refused(frame: bytes | Packet) -> DecodeError:
    with pytest.raises(DecodeError) as info:
        decode(bytes(frame))
    return info.value


def test_a_valid_frame_decodes() -> None:  # the baseline the mutations below start from
    assert decode(bytes(ETH / V4 / SEG)).flags == ACK


@pytest.mark.parametrize("length", [0, 1, 13])
def test_frame_shorter_than_ethernet_header_is_truncated(length: int) -> None:
    err = refused(bytes(ETH / V4 / SEG)[:length])
    assert err.reason is DecodeFailure.TRUNCATED and "Ethernet" in str(err)


def test_frame_ending_inside_the_vlan_tag_is_truncated() -> None:
    err = refused(bytes(ETH / Dot1Q(vlan=5) / V4 / SEG)[:16])
    assert err.reason is DecodeFailure.TRUNCATED and "802.1Q" in str(err)


def test_vlan_tag_with_dei_is_unsupported() -> None:
    err = refused(ETH / Dot1Q(vlan=5, dei=1) / V4 / SEG)
    assert err.reason is DecodeFailure.UNSUPPORTED and "DEI" in str(err)


def test_arp_is_not_ip() -> None:
    err = refused(ETH / ARP())
    assert err.reason is DecodeFailure.NOT_IP and "0x0806" in str(err)


def test_double_tagged_frame_is_not_ip() -> None:
    err = refused(ETH / Dot1Q(vlan=5) / Dot1Q(vlan=6) / V4 / SEG)
    assert err.reason is DecodeFailure.NOT_IP and "0x8100" in str(err)


def test_truncated_ipv4_header() -> None:
    err = refused(bytes(ETH / V4 / SEG)[:14 + 19])
    assert err.reason is DecodeFailure.TRUNCATED and "IPv4 header" in str(err)


def test_ipv4_ethertype_with_version_6_header() -> None:
    frame = bytearray(bytes(ETH / V4 / SEG))
    frame[14] = 0x65
    err = refused(bytes(frame))
    assert err.reason is DecodeFailure.BAD_IP_HEADER and "version 6" in str(err)


def test_ipv4_ihl_below_five() -> None:
    err = refused(ETH / IP(src="1.1.1.1", dst="2.2.2.2", ihl=4) / SEG)
    assert err.reason is DecodeFailure.BAD_IP_HEADER and "IHL 4" in str(err)


def test_ipv4_options_are_unsupported() -> None:
    err = refused(ETH / IP(src="1.1.1.1", dst="2.2.2.2", options=b"\x01\x01\x01\x00") / SEG)
    assert err.reason is DecodeFailure.UNSUPPORTED and "IPv4 options (4 bytes)" in str(err)


def test_ipv4_total_length_below_header() -> None:
    err = refused(ETH / IP(src="1.1.1.1", dst="2.2.2.2", len=19) / SEG)
    assert err.reason is DecodeFailure.BAD_IP_HEADER and "total length 19" in str(err)


def test_ipv4_total_length_beyond_frame_is_truncated() -> None:
    frame = bytes(ETH / V4 / SEG / Raw(b"x" * 20))
    err = refused(frame[:-1])
    assert err.reason is DecodeFailure.TRUNCATED and "total length 60" in str(err)


def test_bad_ipv4_header_checksum() -> None:
    err = refused(ETH / IP(src="1.1.1.1", dst="2.2.2.2", chksum=0x1234) / SEG)
    assert err.reason is DecodeFailure.BAD_IP_CHECKSUM and "0x1234" in str(err)


@pytest.mark.parametrize(("flags", "frag", "text"), [
    ("MF", 0, "MF 1, offset 0"), (0, 185, "MF 0, offset 1480"), ("MF", 3, "MF 1, offset 24")])
def test_ipv4_fragments_are_refused(flags: str | int, frag: int, text: str) -> None:
    err = refused(ETH / IP(src="1.1.1.1", dst="2.2.2.2", flags=flags, frag=frag) / SEG)
    assert err.reason is DecodeFailure.IP_FRAGMENT and text in str(err)


def test_ipv4_reserved_flag_is_unsupported() -> None:
    err = refused(ETH / IP(src="1.1.1.1", dst="2.2.2.2", flags="evil") / SEG)
    assert err.reason is DecodeFailure.UNSUPPORTED and "reserved flag" in str(err)


def test_ipv4_udp_is_not_tcp() -> None:
    err = refused(ETH / V4 / UDP(sport=1, dport=2))
    assert err.reason is DecodeFailure.NOT_TCP and "protocol 17" in str(err)


def test_truncated_ipv6_header() -> None:
    err = refused(bytes(ETH / V6 / SEG)[:14 + 39])
    assert err.reason is DecodeFailure.TRUNCATED and "IPv6 header" in str(err)


def test_ipv6_ethertype_with_version_4_header() -> None:
    frame = bytearray(bytes(ETH / V6 / SEG))
    frame[14] = 0x40
    err = refused(bytes(frame))
    assert err.reason is DecodeFailure.BAD_IP_HEADER and "version 4" in str(err)


@pytest.mark.parametrize(("ext", "text"), [
    (IPv6ExtHdrHopByHop(), "extension header 0 (Hop-by-Hop Options)"),
    (IPv6ExtHdrFragment(), "extension header 44 (Fragment)")])
def test_ipv6_extension_headers_are_unsupported(ext: Packet, text: str) -> None:
    err = refused(ETH / V6 / ext / SEG)
    assert err.reason is DecodeFailure.UNSUPPORTED and text in str(err)


def test_ipv6_udp_is_not_tcp() -> None:
    err = refused(ETH / V6 / UDP(sport=1, dport=2))
    assert err.reason is DecodeFailure.NOT_TCP and "next header 17" in str(err)


def test_ipv6_payload_length_beyond_frame_is_truncated() -> None:
    err = refused(bytes(ETH / V6 / SEG / Raw(b"x" * 30))[:-2])
    assert err.reason is DecodeFailure.TRUNCATED and "payload length 50" in str(err)


@pytest.mark.parametrize("ip", [V4, V6], ids=["v4", "v6"])
def test_ip_payload_shorter_than_a_tcp_header(ip: Packet) -> None:
    short = ip.copy()
    if isinstance(short, IP):
        short.len, short.proto = 20 + 12, 6
    else:
        short.plen, short.nh = 12, 6
    err = refused(ETH / short / Raw(b"\x00" * 12))
    assert err.reason is DecodeFailure.TRUNCATED and "TCP header needs 20 bytes" in str(err)


def test_tcp_data_offset_below_five() -> None:
    err = refused(ETH / V4 / TCP(dataofs=4))
    assert err.reason is DecodeFailure.BAD_TCP_HEADER and "data offset 4" in str(err)


def test_tcp_data_offset_beyond_segment_is_truncated() -> None:
    err = refused(ETH / V4 / TCP(dataofs=15) / Raw(b"\x01" * 8))
    assert err.reason is DecodeFailure.TRUNCATED and "data offset 15 (60 bytes)" in str(err)


@pytest.mark.parametrize("ip", [V4, V6], ids=["v4", "v6"])
def test_bad_tcp_checksum(ip: Packet) -> None:
    err = refused(ETH / ip / TCP(sport=1, dport=2, chksum=0xBEEF) / Raw(b"MPA"))
    assert err.reason is DecodeFailure.BAD_TCP_CHECKSUM and "0xbeef" in str(err)


@pytest.mark.parametrize("ip", [V4, V6], ids=["v4", "v6"])
def test_single_bit_flip_in_payload_fails_the_tcp_checksum(ip: Packet) -> None:
    frame = bytearray(bytes(ETH / ip / SEG / Raw(b"MPA ID Req Frame")))
    frame[-3] ^= 0x04
    assert refused(bytes(frame)).reason is DecodeFailure.BAD_TCP_CHECKSUM


def test_decode_error_is_a_value_error() -> None:
    assert issubclass(DecodeError, ValueError)


def test_from_scapy_without_ethernet_needs_macs() -> None:
    with pytest.raises(DecodeError, match="src_mac and dst_mac"):
        from_scapy(V4 / SEG)


def test_from_scapy_refuses_a_non_frame() -> None:
    with pytest.raises(DecodeError, match="got TCP"):
        from_scapy(SEG)


def test_from_scapy_reports_a_bad_user_checksum() -> None:
    with pytest.raises(DecodeError) as info:
        from_scapy(ETH / V4 / TCP(chksum=1))
    assert info.value.reason is DecodeFailure.BAD_TCP_CHECKSUM


# ---- encode refusals ---------------------------------------------------------------

GOOD = Segment(src_mac=b"\x02" * 6, dst_mac=b"\x04" * 6, src_ip=bytes(4), dst_ip=bytes(4),
               sport=1, dport=2, seq=0, ack=0, flags=ACK)


@pytest.mark.parametrize(("change", "text"), [
    ({"options": b"\x01" * 41}, r"44 bytes \(padded\)"),
    ({"src_mac": b"\x02" * 5}, "MAC addresses must be 6 bytes"),
    ({"dst_ip": bytes(16)}, "got 4 and 16"),
    ({"src_ip": bytes(5), "dst_ip": bytes(5)}, "got 5 and 5"),
    ({"vlan": 4096}, "VLAN id 4096"),
    ({"vlan": 1, "pcp": 8}, "priority 8"),
    ({"flags": 0x1000}, "do not fit in 12 bits"),
    ({"seq": 1 << 32}, "out of range"),
    ({"sport": -1}, "out of range"),
    ({"ttl": 256}, "out of range"),
    ({"payload": b"x" * 65500}, "total length 65540"),
    ({"src_ip": bytes(16), "dst_ip": bytes(16), "flow_label": 1 << 20}, "flow label"),
    ({"src_ip": bytes(16), "dst_ip": bytes(16), "tos": 256}, "traffic class 256"),
    ({"src_ip": bytes(16), "dst_ip": bytes(16), "payload": b"x" * 65516},
     "payload length 65536"),
])
def test_encode_refuses_segments_that_do_not_fit(change: dict[str, object], text: str) -> None:
    with pytest.raises(EncodeError, match=text):
        encode(replace(GOOD, **change))  # type: ignore[arg-type]


# ---- fuzz: nothing but DecodeError ever escapes ----------------------------------------

VALID = [bytes(ETH / V4 / SEG / Raw(b"MPA ID Req Frame" + bytes(8))),
         bytes(ETH / Dot1Q(vlan=7) / V6 / SEG / Raw(b"x" * 9))]


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=120))
def test_random_bytes_decode_or_raise_decode_error(data: bytes) -> None:
    try:
        decode(data)
    except DecodeError as exc:
        assert isinstance(exc.reason, DecodeFailure) and str(exc)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(VALID), st.integers(0, 10_000), st.integers(0, 255),
       st.integers(0, 200))
def test_mutated_frames_decode_or_raise_decode_error(frame: bytes, where: int, value: int,
                                                     cut: int) -> None:
    mutated = bytearray(frame)
    mutated[where % len(frame)] = value
    try:
        seg = decode(bytes(mutated[:len(frame) - cut % len(frame)]))
    except DecodeError:
        return
    # Whatever decodes must re-encode to a frame that decodes to the same segment.
    assert decode(encode(seg)) == seg
