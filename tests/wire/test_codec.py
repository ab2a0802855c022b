"""Golden frames of one irdma connection through the codec, both ways.

The expected bytes are written field by field from the spec (irdma-cm sections 2.5, 4.2,
5.1, 5.2): window 0xffff, SYN options ``020405b4 03030200`` (doff 7), TTL/hop limit 64,
DF, GEN_1 IPv4 ids from 0x3b48, PSH never set. The checksum fields were filled in with
scapy's checksum routine and are judged independently here by scapy's own build of each
frame and by tshark with checksum validation on.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from scapy.layers.inet import IP, TCP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import Packet, Raw
from scapy.utils import wrpcap

from mpa_emu.wire.codec import decode, encode, from_scapy, to_scapy
from mpa_emu.wire.mpa import FLAG_CRC, FLAG_ENHANCED, MpaFrame, RtrBlock
from mpa_emu.wire.segment import ACK, FIN, RST, SYN, Segment

MAC_A = bytes.fromhex("020000000a01")
MAC_P = bytes.fromhex("020000000a02")
V4_A = bytes.fromhex("c0a80a01")  # 192.168.10.1
V4_P = bytes.fromhex("c0a80a02")  # 192.168.10.2
V6_A = bytes.fromhex("fd00000a000000000000000000000001")  # fd00:a::1
V6_P = bytes.fromhex("fd00000a000000000000000000000002")  # fd00:a::2
PORT_A = 40001
PORT_P = 31000
ISN_A = 0x11223344
ISN_P = 0x55667788
VLAN = 100
PCP = 5
# irdma_send_syn: MSS (MTU 1500 - 40 / - 60), WS shift 2, EOL.
SYN_OPTIONS_V4 = bytes.fromhex("020405b4" "03030200")
SYN_OPTIONS_V6 = bytes.fromhex("020405a0" "03030200")
# irdma_build_mpa_v2 request: C|S, rev 2, PD_Length 4, P2P|IRD 127, WRITE0|READ0|ORD 255.
MPA_REQUEST = MpaFrame(request=True, rev=2, flags=FLAG_CRC | FLAG_ENHANCED,
                       rtr=RtrBlock(ird=127, ord=255, write0=True, read0=True)).to_bytes()
MPA_LEN = len(MPA_REQUEST)

GOLDEN: dict[tuple[str, str], str] = {
    ("v4", "syn"): (
        "020000000a02 020000000a01 0800 "
        "45 00 0030 3b48 4000 40 06 6a2c c0a80a01 c0a80a02 "
        "9c41 7918 11223344 00000000 7002 ffff 940b 0000 020405b4 03030200"),
    ("v4", "synack"): (
        "020000000a01 020000000a02 0800 "
        "45 00 0030 3b48 4000 40 06 6a2c c0a80a02 c0a80a01 "
        "7918 9c41 55667788 11223345 7012 ffff c70b 0000 020405b4 03030200"),
    ("v4", "ack_mpa"): (
        "020000000a02 020000000a01 0800 "
        "45 00 0040 3b49 4000 40 06 6a1b c0a80a01 c0a80a02 "
        "9c41 7918 11223345 55667789 5010 ffff 04ad 0000 "
        "4d504120494420526571204672616d65 50 02 0004 807f c0ff"),
    ("v4", "fin_ack"): (
        "020000000a01 020000000a02 0800 "
        "45 00 0028 3b49 4000 40 06 6a33 c0a80a02 c0a80a01 "
        "7918 9c41 55667789 1122335d 5011 ffff f3b6 0000 000000000000"),
    ("v4", "rst_ack"): (
        "020000000a02 020000000a01 0800 "
        "45 00 0028 3b4a 4000 40 06 6a32 c0a80a01 c0a80a02 "
        "9c41 7918 1122335d 5566778a 5014 ffff f3b2 0000 000000000000"),
    ("v6", "syn"): (
        "020000000a02 020000000a01 86dd "
        "60000000 001c 06 40 fd00000a000000000000000000000001 "
        "fd00000a000000000000000000000002 "
        "9c41 7918 11223344 00000000 7002 ffff 2f5b 0000 020405a0 03030200"),
    ("v6", "synack"): (
        "020000000a01 020000000a02 86dd "
        "60000000 001c 06 40 fd00000a000000000000000000000002 "
        "fd00000a000000000000000000000001 "
        "7918 9c41 55667788 11223345 7012 ffff 625b 0000 020405a0 03030200"),
    ("v6", "ack_mpa"): (
        "020000000a02 020000000a01 86dd "
        "60000000 002c 06 40 fd00000a000000000000000000000001 "
        "fd00000a000000000000000000000002 "
        "9c41 7918 11223345 55667789 5010 ffff 9fe8 0000 "
        "4d504120494420526571204672616d65 50 02 0004 807f c0ff"),
    ("v6", "fin_ack"): (
        "020000000a01 020000000a02 86dd "
        "60000000 0014 06 40 fd00000a000000000000000000000002 "
        "fd00000a000000000000000000000001 "
        "7918 9c41 55667789 1122335d 5011 ffff 8ef2 0000"),
    ("v6", "rst_ack"): (
        "020000000a02 020000000a01 86dd "
        "60000000 0014 06 40 fd00000a000000000000000000000001 "
        "fd00000a000000000000000000000002 "
        "9c41 7918 1122335d 5566778a 5014 ffff 8eee 0000"),
    ("vlan", "syn"): (
        "020000000a02 020000000a01 8100 a064 0800 "
        "45 00 0030 3b48 4000 40 06 6a2c c0a80a01 c0a80a02 "
        "9c41 7918 11223344 00000000 7002 ffff 940b 0000 020405b4 03030200"),
    ("vlan", "synack"): (
        "020000000a01 020000000a02 8100 a064 0800 "
        "45 00 0030 3b48 4000 40 06 6a2c c0a80a02 c0a80a01 "
        "7918 9c41 55667788 11223345 7012 ffff c70b 0000 020405b4 03030200"),
    ("vlan", "ack_mpa"): (
        "020000000a02 020000000a01 8100 a064 0800 "
        "45 00 0040 3b49 4000 40 06 6a1b c0a80a01 c0a80a02 "
        "9c41 7918 11223345 55667789 5010 ffff 04ad 0000 "
        "4d504120494420526571204672616d65 50 02 0004 807f c0ff"),
    ("vlan", "fin_ack"): (
        "020000000a01 020000000a02 8100 a064 0800 "
        "45 00 0028 3b49 4000 40 06 6a33 c0a80a02 c0a80a01 "
        "7918 9c41 55667789 1122335d 5011 ffff f3b6 0000 0000"),
    ("vlan", "rst_ack"): (
        "020000000a02 020000000a01 8100 a064 0800 "
        "45 00 0028 3b4a 4000 40 06 6a32 c0a80a01 c0a80a02 "
        "9c41 7918 1122335d 5566778a 5014 ffff f3b2 0000 0000"),
}
CASES = sorted(GOLDEN)


def golden(case: tuple[str, str]) -> bytes:
    return bytes.fromhex(GOLDEN[case])


def irdma_segment(encap: str, kind: str) -> Segment:
    """The segment the spec describes for ``kind`` in flow 2.5 (A active, P passive)."""
    v6 = encap == "v6"
    ip_a, ip_p = (V6_A, V6_P) if v6 else (V4_A, V4_P)
    syn_options = SYN_OPTIONS_V6 if v6 else SYN_OPTIONS_V4
    # (from A, flags, seq, ack, options, payload, GEN_1 IPv4 id)
    shape = {
        "syn": (True, SYN, ISN_A, 0, syn_options, b"", 0x3B48),
        "synack": (False, SYN | ACK, ISN_P, ISN_A + 1, syn_options, b"", 0x3B48),
        "ack_mpa": (True, ACK, ISN_A + 1, ISN_P + 1, b"", MPA_REQUEST, 0x3B49),
        "fin_ack": (False, FIN | ACK, ISN_P + 1, ISN_A + 1 + MPA_LEN, b"", b"", 0x3B49),
        "rst_ack": (True, RST | ACK, ISN_A + 1 + MPA_LEN, ISN_P + 2, b"", b"", 0x3B4A),
    }[kind]
    from_a, flags, seq, ack, options, payload, ip_id = shape
    src = (MAC_A, ip_a, PORT_A) if from_a else (MAC_P, ip_p, PORT_P)
    dst = (MAC_P, ip_p, PORT_P) if from_a else (MAC_A, ip_a, PORT_A)
    return Segment(
        src_mac=src[0], dst_mac=dst[0], src_ip=src[1], dst_ip=dst[1], sport=src[2],
        dport=dst[2], seq=seq, ack=ack, flags=flags, window=0xFFFF, options=options,
        payload=payload, vlan=VLAN if encap == "vlan" else None,
        pcp=PCP if encap == "vlan" else 0, ttl=64, tos=0, ip_id=0 if v6 else ip_id, df=True)


def scapy_frame(seg: Segment) -> Packet:
    """The same frame built layer by layer by scapy (its own lengths and checksums)."""
    def mac(b: bytes) -> str:
        return ":".join(f"{x:02x}" for x in b)

    def ip(b: bytes) -> str:
        import ipaddress
        return str(ipaddress.ip_address(b))

    pkt: Packet = Ether(src=mac(seg.src_mac), dst=mac(seg.dst_mac))
    if seg.vlan is not None:
        pkt = pkt / Dot1Q(prio=seg.pcp, vlan=seg.vlan)
    if seg.ipv4:
        pkt = pkt / IP(src=ip(seg.src_ip), dst=ip(seg.dst_ip), tos=seg.tos, id=seg.ip_id,
                       flags="DF" if seg.df else 0, ttl=seg.ttl)
    else:
        pkt = pkt / IPv6(src=ip(seg.src_ip), dst=ip(seg.dst_ip), tc=seg.tos,
                         fl=seg.flow_label, hlim=seg.ttl)
    options: list[tuple[object, object]] = []
    if seg.options:
        options = [("MSS", int.from_bytes(seg.options[2:4], "big")), ("WScale", seg.options[6]),
                   ("EOL", None)]
    pkt = pkt / TCP(sport=seg.sport, dport=seg.dport, seq=seg.seq, ack=seg.ack,
                    flags=seg.flags, window=seg.window, options=options)
    if seg.payload:
        pkt = pkt / Raw(seg.payload)
    return pkt


@pytest.mark.parametrize("case", CASES, ids=["-".join(c) for c in CASES])
def test_encode_writes_the_golden_irdma_frame(case: tuple[str, str]) -> None:
    assert encode(irdma_segment(*case)) == golden(case)


@pytest.mark.parametrize("case", CASES, ids=["-".join(c) for c in CASES])
def test_decode_of_golden_frame_gives_the_irdma_segment(case: tuple[str, str]) -> None:
    assert decode(golden(case)) == irdma_segment(*case)


@pytest.mark.parametrize("case", CASES, ids=["-".join(c) for c in CASES])
def test_scapy_builds_the_same_bytes_as_the_golden_frame(case: tuple[str, str]) -> None:
    built = bytes(scapy_frame(irdma_segment(*case)))
    assert built.ljust(60, b"\x00") == golden(case)


def test_syn_options_already_aligned_get_no_padding() -> None:
    frame = encode(irdma_segment("v4", "syn"), pad=False)
    assert frame[14 + 20 + 12] >> 4 == 7  # doff 7: 20 + 8 option bytes, nothing added
    assert len(frame) == 14 + 20 + 28
    assert frame[-8:] == SYN_OPTIONS_V4


def test_unaligned_options_are_padded_with_eol_bytes() -> None:
    seg = irdma_segment("v4", "syn")
    mss_only_nop = bytes.fromhex("020405b4" "01")  # 5 bytes -> 8
    frame = encode(Segment(**{**_fields(seg), "options": mss_only_nop}), pad=False)
    assert frame[14 + 20 + 12] >> 4 == 7
    assert frame[-8:] == mss_only_nop + b"\x00\x00\x00"
    assert decode(frame).options == mss_only_nop + b"\x00\x00\x00"


def test_short_frames_are_padded_to_60_bytes_and_unpadded_on_request() -> None:
    seg = irdma_segment("v4", "fin_ack")
    assert len(encode(seg)) == 60
    assert encode(seg, pad=False) == golden(("v4", "fin_ack"))[:54]
    assert len(encode(irdma_segment("v6", "fin_ack"))) == 74  # already over the minimum


def test_decode_ignores_bytes_after_the_ip_datagram() -> None:
    frame = golden(("v4", "ack_mpa"))
    fcs_like = bytes.fromhex("deadbeef")
    assert decode(frame + fcs_like) == irdma_segment("v4", "ack_mpa")
    v6 = golden(("v6", "rst_ack"))
    assert decode(v6 + b"\x00" * 6) == irdma_segment("v6", "rst_ack")


def test_decode_accepts_any_bytes_like_frame() -> None:
    frame = golden(("v6", "ack_mpa"))
    expected = irdma_segment("v6", "ack_mpa")
    assert decode(bytearray(frame)) == expected
    assert decode(memoryview(frame)) == expected


def test_vlan_tag_carries_priority_and_id() -> None:
    frame = golden(("vlan", "syn"))
    assert frame[12:16] == bytes.fromhex("8100a064")  # PCP 5 << 13 | VID 100
    seg = decode(frame)
    assert (seg.vlan, seg.pcp) == (VLAN, PCP)


def test_ipv6_traffic_class_and_flow_label_round_trip() -> None:
    seg = Segment(**{**_fields(irdma_segment("v6", "syn")), "tos": 0xB8,
                     "flow_label": 0xABCDE})
    frame = encode(seg)
    assert frame[14:18] == bytes.fromhex("6b8abcde")  # version 6, tc 0xb8, flow 0xabcde
    assert decode(frame) == seg


def test_df_clear_and_tos_are_written_for_ipv4() -> None:
    seg = Segment(**{**_fields(irdma_segment("v4", "syn")), "df": False, "tos": 0x10,
                     "ttl": 128, "ip_id": 0xBEEF})
    frame = encode(seg)
    assert frame[15] == 0x10 and frame[18:20] == b"\xbe\xef"
    assert frame[20:22] == b"\x00\x00" and frame[22] == 128
    assert decode(frame) == seg


def test_ae_and_reserved_tcp_bits_survive_a_round_trip() -> None:
    seg = Segment(**{**_fields(irdma_segment("v4", "rst_ack")), "flags": 0xF14})
    frame = encode(seg)
    assert frame[14 + 20 + 12:14 + 20 + 14] == bytes.fromhex("5f14")
    assert decode(frame) == seg


def test_to_scapy_dissects_the_encoded_frame() -> None:
    seg = irdma_segment("vlan", "ack_mpa")
    pkt = to_scapy(seg)
    assert pkt[Dot1Q].vlan == VLAN and pkt[Dot1Q].prio == PCP
    assert pkt[TCP].flags == "A" and pkt[TCP].seq == ISN_A + 1
    assert bytes(pkt[TCP].payload)[:MPA_LEN] == MPA_REQUEST
    assert bytes(pkt) == golden(("vlan", "ack_mpa"))


@pytest.mark.parametrize("case", CASES, ids=["-".join(c) for c in CASES])
def test_from_scapy_reads_a_user_built_frame(case: tuple[str, str]) -> None:
    seg = irdma_segment(*case)
    assert from_scapy(scapy_frame(seg)) == seg


def test_from_scapy_accepts_a_packet_starting_at_ip() -> None:
    seg = irdma_segment("v4", "synack")
    pkt = scapy_frame(seg)[IP]
    assert from_scapy(pkt, src_mac=seg.src_mac, dst_mac=seg.dst_mac) == seg


def _fields(seg: Segment) -> dict[str, object]:
    return {name: getattr(seg, name) for name in Segment.__dataclass_fields__}


# ---- tshark as the independent judge ---------------------------------------------

TSHARK_FIELDS = ["tcp.flags", "tcp.window_size_value", "tcp.options", "ip.ttl",
                 "ip.flags.df", "ipv6.hlim", "vlan.id", "vlan.priority",
                 "tcp.checksum.status", "ip.checksum.status", "tcp.len"]
# tcp.flags, tcp.options, tcp.len as irdma_form_ah_cm_frame and irdma_send_syn fill them
EXPECTED_TCP = {
    "syn": ("0x0002", "020405b403030200", "0"),
    "synack": ("0x0012", "020405b403030200", "0"),
    "ack_mpa": ("0x0010", "", str(MPA_LEN)),
    "fin_ack": ("0x0011", "", "0"),
    "rst_ack": ("0x0014", "", "0"),
}


@pytest.mark.tshark
def test_tshark_reads_golden_frames_with_good_checksums(tmp_path: Path) -> None:
    if shutil.which("tshark") is None:
        pytest.fail("tshark is required (tools/test.sh installs it)")
    capture = tmp_path / "golden.pcap"
    wrpcap(str(capture), [Ether(golden(c)) for c in CASES])
    proc = subprocess.run(
        ["tshark", "-r", str(capture), "-o", "tcp.check_checksum:TRUE",
         "-o", "ip.check_checksum:TRUE", "-T", "fields", "-E", "separator=|",
         *[a for f in TSHARK_FIELDS for a in ("-e", f)]],
        capture_output=True, text=True, check=True)
    rows = [dict(zip(TSHARK_FIELDS, line.split("|"), strict=True))
            for line in proc.stdout.splitlines()]
    assert len(rows) == len(CASES)
    for (encap, kind), row in zip(CASES, rows, strict=True):
        flags, options, tcp_len = EXPECTED_TCP[kind]
        if encap == "v6" and options:
            options = "020405a003030200"  # MSS 1440 over IPv6
        assert row["tcp.flags"] == flags, (encap, kind)
        assert row["tcp.window_size_value"] == "65535"
        assert row["tcp.options"] == options
        assert row["tcp.len"] == tcp_len
        assert row["tcp.checksum.status"] == "1", (encap, kind)  # 1 = Good
        if encap == "v6":
            assert (row["ipv6.hlim"], row["ip.ttl"]) == ("64", "")
        else:
            assert row["ip.ttl"] == "64"
            assert row["ip.flags.df"] == "1"
            assert row["ip.checksum.status"] == "1"
        if encap == "vlan":
            assert (row["vlan.id"], row["vlan.priority"]) == ("100", "5")
        else:
            assert row["vlan.id"] == ""
