"""The codec against scapy over many generated segments: same bytes out, same segment in.

Scapy builds each frame layer by layer with its own length and checksum code, so any
disagreement in layout, padding or checksum arithmetic shows up here.
"""

from __future__ import annotations

import ipaddress
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.inet import IP, TCP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import Packet, Raw

from mpa_emu.wire.codec import decode, encode, internet_checksum, ones_complement_sum
from mpa_emu.wire.segment import Segment

# TCP options as scapy takes them: (kind, value) pairs; kinds 0/1 are EOL/NOP.
option = st.one_of(
    st.just((1, b"")),
    st.just((0, b"")),
    st.tuples(st.integers(2, 254), st.binary(max_size=6)),
)


def options_bytes(opts: list[tuple[int, bytes]]) -> bytes:
    out = b""
    for kind, value in opts:
        out += bytes([kind]) if kind in (0, 1) else bytes([kind, 2 + len(value)]) + value
    return out


@st.composite
def segments(draw: st.DrawFn) -> tuple[Segment, list[tuple[int, bytes]]]:
    v6 = draw(st.booleans())
    size = 16 if v6 else 4
    opts = draw(st.lists(option, max_size=8).filter(lambda o: len(options_bytes(o)) <= 40))
    vlan = draw(st.one_of(st.none(), st.integers(0, 4095)))
    seg = Segment(
        src_mac=draw(st.binary(min_size=6, max_size=6)),
        dst_mac=draw(st.binary(min_size=6, max_size=6)),
        src_ip=draw(st.binary(min_size=size, max_size=size)),
        dst_ip=draw(st.binary(min_size=size, max_size=size)),
        sport=draw(st.integers(0, 0xFFFF)), dport=draw(st.integers(0, 0xFFFF)),
        seq=draw(st.integers(0, 0xFFFFFFFF)), ack=draw(st.integers(0, 0xFFFFFFFF)),
        flags=draw(st.integers(0, 0xFFF)), window=draw(st.integers(0, 0xFFFF)),
        options=options_bytes(opts), payload=draw(st.binary(max_size=1600)),
        vlan=vlan, pcp=draw(st.integers(0, 7)) if vlan is not None else 0,
        ttl=draw(st.integers(0, 255)), tos=draw(st.integers(0, 255)),
        ip_id=0 if v6 else draw(st.integers(0, 0xFFFF)),
        df=True if v6 else draw(st.booleans()),
        urg_ptr=draw(st.integers(0, 0xFFFF)),
        flow_label=draw(st.integers(0, 0xFFFFF)) if v6 else 0,
    )
    return seg, opts


def scapy_frame(seg: Segment, opts: list[tuple[int, bytes]]) -> Packet:
    def mac(b: bytes) -> str:
        return ":".join(f"{x:02x}" for x in b)

    pkt: Packet = Ether(src=mac(seg.src_mac), dst=mac(seg.dst_mac))
    if seg.vlan is not None:
        pkt = pkt / Dot1Q(prio=seg.pcp, vlan=seg.vlan)
    src, dst = ipaddress.ip_address(seg.src_ip), ipaddress.ip_address(seg.dst_ip)
    if seg.ipv4:
        pkt = pkt / IP(src=str(src), dst=str(dst), tos=seg.tos, id=seg.ip_id, ttl=seg.ttl,
                       flags="DF" if seg.df else 0)
    else:
        pkt = pkt / IPv6(src=str(src), dst=str(dst), tc=seg.tos, fl=seg.flow_label,
                         hlim=seg.ttl)
    pkt = pkt / TCP(sport=seg.sport, dport=seg.dport, seq=seg.seq, ack=seg.ack,
                    flags=seg.flags & 0x1FF, reserved=seg.flags >> 9, window=seg.window,
                    urgptr=seg.urg_ptr, options=list(opts))
    if seg.payload:
        pkt = pkt / Raw(seg.payload)
    return pkt


def padded(options: bytes) -> bytes:
    return options + b"\x00" * (-len(options) % 4)


@settings(max_examples=400, deadline=None)
@given(segments())
def test_encode_equals_scapy_build_and_decode_inverts_it(
        case: tuple[Segment, list[tuple[int, bytes]]]) -> None:
    seg, opts = case
    wire = bytes(scapy_frame(seg, opts))
    assert encode(seg) == wire.ljust(60, b"\x00")
    assert encode(seg, pad=False) == wire
    expected = replace(seg, options=padded(seg.options))
    assert decode(wire) == expected
    assert decode(encode(seg)) == expected


def rfc1071_checksum(data: bytes) -> int:
    """The textbook loop: add 16-bit words, fold carries, complement."""
    if len(data) % 2:
        data += b"\x00"
    total = 0
    for i in range(0, len(data), 2):
        total += data[i] << 8 | data[i + 1]
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


@given(st.binary(max_size=3000))
def test_internet_checksum_matches_the_rfc1071_loop(data: bytes) -> None:
    assert internet_checksum(data) == rfc1071_checksum(data)


@given(st.binary(max_size=200), st.binary(max_size=200))
def test_sum_of_data_with_its_checksum_is_negative_zero(head: bytes, tail: bytes) -> None:
    data = head + b"\x01" + b"\x00" * (len(head) % 2 == 0)  # even length, not all zero
    csum = internet_checksum(data + b"\x00\x00" + tail)
    assert ones_complement_sum(data + csum.to_bytes(2, "big") + tail) == 0


def test_negative_and_positive_zero_sums() -> None:
    assert ones_complement_sum(b"\xff\xff\xff\xff") == 0
    assert internet_checksum(b"\xff\xff") == 0 == rfc1071_checksum(b"\xff\xff")
    assert internet_checksum(b"\x00\x00\x00") == 0xFFFF == rfc1071_checksum(b"\x00\x00\x00")
    assert internet_checksum(b"") == 0xFFFF == rfc1071_checksum(b"")
