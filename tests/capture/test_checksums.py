"""Checksum verdicts as a capture tool reads them: good, bad, TX offload artefact."""

from __future__ import annotations

import ipaddress

import pytest
from scapy.layers.inet import IP, TCP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Dot1Q, Ether
from scapy.utils import checksum

from mpa_emu.capture.checksums import Mode, Verdict, is_error, pseudo_header, repaired, tcp_verdict


def _frame(ip: IP | IPv6, csum: int | None = None, vlan: int | None = None) -> bytes:
    tcp = TCP(sport=40000, dport=31000, flags="PA", seq=1, ack=2) / b"x"
    if csum is not None:
        tcp.chksum = csum
    l2 = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
    if vlan is not None:
        l2 = l2 / Dot1Q(vlan=vlan)
    return bytes(l2 / ip / tcp)


def _split(frame: bytes) -> tuple[bytes, bytes]:
    pkt = Ether(frame)
    ip = pkt[IP] if IP in pkt else pkt[IPv6]
    tcp = bytes(pkt[TCP])
    return pseudo_header(bytes.fromhex(_hex(ip.src)), bytes.fromhex(_hex(ip.dst)),
                         len(tcp)), tcp


def _hex(addr: str) -> str:
    return ipaddress.ip_address(addr).packed.hex()


def _linux_partial(src: str, dst: str, length: int) -> int:
    """What Linux writes before TX offload: the folded IPv4 pseudo-header sum,
    uncomplemented (scapy's checksum() returns the complement)."""
    ph = (ipaddress.ip_address(src).packed + ipaddress.ip_address(dst).packed
          + bytes([0, 6]) + length.to_bytes(2, "big"))
    return 0xFFFF & ~checksum(ph)


def _v6_partial(src: str, dst: str, length: int) -> int:
    ph = (ipaddress.ip_address(src).packed + ipaddress.ip_address(dst).packed
          + length.to_bytes(4, "big") + b"\0\0\0\x06")
    return 0xFFFF & ~checksum(ph)


V4 = IP(src="192.0.2.1", dst="192.0.2.2")
V6 = IPv6(src="2001:db8::1", dst="2001:db8::2")


@pytest.mark.parametrize("ip", [V4, V6], ids=["ipv4", "ipv6"])
def test_scapy_computed_checksum_is_good(ip: IP | IPv6) -> None:
    assert tcp_verdict(*_split(_frame(ip))) is Verdict.GOOD


@pytest.mark.parametrize("ip", [V4, V6], ids=["ipv4", "ipv6"])
def test_linux_partial_sum_is_an_offload_artefact(ip: IP | IPv6) -> None:
    v6 = isinstance(ip, IPv6)
    partial = (_v6_partial if v6 else _linux_partial)(ip.src, ip.dst, 21)
    assert tcp_verdict(*_split(_frame(ip, partial))) is Verdict.OFFLOAD


def test_zero_checksum_is_an_offload_artefact() -> None:
    assert tcp_verdict(*_split(_frame(V4, 0))) is Verdict.OFFLOAD


def test_other_wrong_checksum_is_bad() -> None:
    good = Ether(_frame(V4))[TCP].chksum
    assert tcp_verdict(*_split(_frame(V4, good ^ 0x0101))) is Verdict.BAD


def test_short_capture_is_unchecked() -> None:
    pseudo, tcp = _split(_frame(V4, 0x1234))
    assert tcp_verdict(pseudo, tcp, complete=False) is Verdict.UNCHECKED


@pytest.mark.parametrize("verdict,strict,offload,off", [
    (Verdict.GOOD, False, False, False),
    (Verdict.BAD, True, True, False),
    (Verdict.OFFLOAD, True, False, False),
    (Verdict.UNCHECKED, False, False, False),
])
def test_modes(verdict: Verdict, strict: bool, offload: bool, off: bool) -> None:
    assert is_error(verdict, Mode.STRICT) is strict
    assert is_error(verdict, Mode.OFFLOAD) is offload
    assert is_error(verdict, Mode.OFF) is off


@pytest.mark.parametrize("ip,vlan", [(V4, None), (V6, None), (V4, 5)])
def test_repaired_frame_carries_scapys_checksums(ip: IP | IPv6, vlan: int | None) -> None:
    want = _frame(ip, vlan=vlan)
    broken = bytearray(_frame(ip, 0x0000, vlan=vlan))
    if isinstance(ip, IP):
        off = 18 if vlan is not None else 14
        broken[off + 10:off + 12] = b"\0\0"
    assert repaired(bytes(broken)) == want
