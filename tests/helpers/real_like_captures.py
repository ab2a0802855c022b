"""Captures shaped like traffic the emulator did not make, built byte by byte with scapy.

``linux_v1_offload``: a Linux TCP client (SYN options MSS, SACK-permitted, timestamps,
NOP, WS; window 64240) captured on the client itself, so every client frame carries the
TX checksum offload partial sum (the folded pseudo-header sum, uncomplemented) instead of
its checksum. It speaks MPA v1 with C clear to a userspace server, then sends FPDUs whose
CRC field is zero: a Send (QN 0 MSN 1), a 64-byte RDMA Read Request (QN 1 MSN 1, sink
STag 0x1000) that is never answered, a Send with MSN 3 (MSN 2 missing); the server sends
FIN; the client sends one more Send (MSN 4) after it; the server and then the client
reset, both in 60-byte frames with Ethernet padding.

``v2_crc_errors``: MPA v2 with C set by both sides (irdma frames); the client's RTR has a
CRC field of zero, its next Send a wrong CRC, and the server answers with a Terminate
(layer LLP, type MPA, code 0x02 CRC error).

Frame numbers (1-based) are listed in ``FRAMES`` for the tests; every expected value in
the tests comes from these layouts and RFC 5040/5041/5044, or from tshark.
"""

from __future__ import annotations

import struct
from pathlib import Path

from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw
from scapy.utils import checksum, wrpcap

CLIENT, SERVER = "192.168.77.10", "192.168.77.20"
CPORT, SPORT = 45000, 31000
KEY_REQ, KEY_REP = b"MPA ID Req Frame", b"MPA ID Rep Frame"
LINUX_SYN_OPTIONS = [("MSS", 1460), ("SAckOK", b""), ("Timestamp", (1000, 0)), ("NOP", None),
                     ("WScale", 7)]


def partial_sum(src: str, dst: str, tcp_length: int) -> int:
    """The TX offload partial sum: the folded one's-complement sum of the IPv4
    pseudo-header (RFC 9293 section 3.1), not complemented (scapy's ``checksum`` is)."""
    ph = bytes(map(int, src.split("."))) + bytes(map(int, dst.split(".")))
    ph += struct.pack("!BBH", 0, 6, tcp_length)
    return 0xFFFF & ~checksum(ph)


def crc32c(data: bytes) -> int:
    """Bitwise CRC32c (reflected polynomial 0x82F63B78)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def fpdu(ulpdu: bytes, crc: str = "good") -> bytes:
    """ULPDU_LENGTH, ULPDU, PAD to 4 bytes, CRC little-endian: ``good``, ``zero`` or
    ``wrong`` (the good one with every bit of the low byte flipped)."""
    body = struct.pack("!H", len(ulpdu)) + ulpdu
    body += b"\x00" * (-len(body) % 4)
    value = {"good": crc32c(body), "zero": 0, "wrong": crc32c(body) ^ 0xFF}[crc]
    return body + struct.pack("<I", value)


def send(msn: int, data: bytes) -> bytes:
    """Untagged DDP (L, DV 1), RDMAP v1 Send (opcode 3), QN 0, MO 0 (RFC 5041 4.4)."""
    return bytes([0x41, 0x43]) + struct.pack("!IIII", 0, 0, msn, 0) + data


def read_request(msn: int, sink_stag: int, size: int) -> bytes:
    """Untagged Read Request (opcode 1), QN 1; sink STag/TO, size, source STag/TO."""
    return (bytes([0x41, 0x41]) + struct.pack("!IIII", 0, 1, msn, 0)
            + struct.pack("!IQIIQ", sink_stag, 0, size, 0x2000, 0))


def terminate_crc_error() -> bytes:
    """Terminate (opcode 7), QN 2, MSN 1: layer 2 (LLP), EType 0 (MPA), code 0x02,
    no header-control bits (RFC 5040 section 4.8)."""
    return (bytes([0x41, 0x47]) + struct.pack("!IIII", 0, 2, 1, 0)
            + struct.pack("!I", (2 << 28) | (0 << 24) | (0x02 << 16)))


class _Builder:
    def __init__(self, offload_client: bool) -> None:
        self.seq = {True: 100000, False: 700000}
        self.frames: list[Packet] = []
        self.offload_client = offload_client

    def add(self, from_client: bool, flags: str, payload: bytes = b"", *,
            options: list[tuple[str, object]] | None = None, window: int = 502) -> None:
        src, dst = (CLIENT, SERVER) if from_client else (SERVER, CLIENT)
        sp, dp = (CPORT, SPORT) if from_client else (SPORT, CPORT)
        ack = self.seq[not from_client] if "A" in flags else 0
        tcp = TCP(sport=sp, dport=dp, seq=self.seq[from_client], ack=ack, flags=flags,
                  window=window, options=options or [])
        pkt = Ether(src="02:00:00:00:00:0a" if from_client else "02:00:00:00:00:14",
                    dst="02:00:00:00:00:14" if from_client else "02:00:00:00:00:0a") \
            / IP(src=src, dst=dst, id=len(self.frames) + 1) / tcp
        if payload:
            pkt = pkt / Raw(payload)
        pkt = Ether(bytes(pkt))  # lengths and checksums as scapy computes them
        if from_client and self.offload_client:
            pkt[TCP].chksum = partial_sum(src, dst, len(pkt[TCP]))
            pkt = Ether(bytes(pkt))
        raw = bytes(pkt)
        if len(raw) < 60:
            raw += b"\x00" * (60 - len(raw))  # Ethernet padding to the minimum frame
        out = Ether(raw)
        out.time = len(self.frames) * 0.001
        self.frames.append(out)
        self.seq[from_client] = (self.seq[from_client] + len(payload) + ("S" in flags)
                                 + ("F" in flags)) & 0xFFFFFFFF


FRAMES = {"syn": 1, "synack": 2, "request": 4, "reply": 6, "send1": 7, "read": 8,
          "send3": 9, "server_fin": 10, "late_send": 11, "server_rst": 12,
          "client_rst": 13}
OFFLOAD_FRAMES = [1, 3, 4, 7, 8, 9, 11, 13]
"""The client's frames: every one carries the partial sum."""


def linux_v1_offload(path: Path) -> Path:
    """The capture described in the module docstring, written as pcap."""
    b = _Builder(offload_client=True)
    b.add(True, "S", options=LINUX_SYN_OPTIONS, window=64240)
    b.add(False, "SA", options=LINUX_SYN_OPTIONS, window=65160)
    b.add(True, "A")
    b.add(True, "PA", KEY_REQ + bytes.fromhex("00010000"))
    b.add(False, "A")
    b.add(False, "PA", KEY_REP + bytes.fromhex("00010000"))
    b.add(True, "PA", fpdu(send(1, b"hello"), "zero"))
    b.add(True, "PA", fpdu(read_request(1, 0x1000, 64), "zero"))
    b.add(True, "PA", fpdu(send(3, b"third"), "zero"))
    b.add(False, "FA")
    b.add(True, "PA", fpdu(send(4, b"late!"), "zero"))
    b.add(False, "R")
    b.add(True, "R")
    wrpcap(str(path), b.frames)
    return path


V2_FRAMES = {"rtr": 7, "send": 8, "terminate": 9}


def v2_crc_errors(path: Path) -> Path:
    """The second capture of the module docstring (checksums all correct)."""
    b = _Builder(offload_client=False)
    irdma_syn = [("MSS", 1460), ("WScale", 2), ("EOL", None)]
    b.add(True, "S", options=irdma_syn, window=65535)
    b.add(False, "SA", options=irdma_syn, window=65535)
    b.add(True, "A", window=65535)
    # Rev 2, flags C|S (0x50), PD_Length 4: P2P IRD 16, Write+Read RTR ORD 16.
    b.add(True, "PA", KEY_REQ + bytes.fromhex("50020004" "8010c010"), window=65535)
    b.add(False, "A", window=65535)
    # Reply: P2P IRD 16, Read RTR ORD 16.
    b.add(False, "PA", KEY_REP + bytes.fromhex("50020004" "80104010"), window=65535)
    rtr = read_request(1, 0xABCD, 0)
    b.add(True, "PA", fpdu(rtr, "zero"), window=65535)
    b.add(True, "PA", fpdu(send(1, b"payload"), "wrong"), window=65535)
    b.add(False, "PA", fpdu(terminate_crc_error()), window=65535)
    wrpcap(str(path), b.frames)
    return path
