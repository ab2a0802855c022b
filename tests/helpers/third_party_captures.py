"""Captures shaped like third-party iWARP traffic, written byte by byte with scapy.

Every DDP/RDMAP header is packed here from RFC 5040 section 4 and RFC 5041 section 4, every
FPDU from RFC 5044 section 4.1 (``real_like_captures.fpdu``); nothing comes from mpa_emu.

``smb_direct_siw``: SMB Direct between two siw hosts. siw's defaults (``siw_cm.c``:
``mpa_version`` 2, ``peer_to_peer`` false, ``mpa_crc_required`` false) give an MPA v2
request and reply with the S flag and the RFC 6581 block but neither P2P nor an RTR bit,
and C clear. The client sends the SMB Direct Negotiate Request (a Send), the server its
Negotiate Response (a Send); the client sends one more Send (an SMB2 WRITE asking the
server to pull the data); the server then reads 12,000 bytes of the client's buffer with
one RDMA Read Request (QN 1, MSN 1, sink STag 0x00005a5a, sink TO 0x10000, source STag
0x77, TO 0x2000), which the client answers with twelve Read Response segments of 1,000
bytes (tagged, STag 0x5a5a, TO 0x10000 + 1000 * i, L on the last); the server's final
Send (the WRITE response) closes the exchange. Frame numbers are in ``SMB_FRAMES``.

``siw_terminate``: MPA v1, C clear, one client Send, then a server Terminate whose
control word is laid out as siw's ``struct iwarp_terminate`` bit-fields land on a
little-endian host (layer in the low nibble of the first byte, EType in the high nibble,
code in the second byte, M/D/R in bits 0/1/2 of the third byte), followed by the DDP
Segment Length and the 18-byte untagged DDP header of the Send it terminates, as
``siw_send_terminate`` copies them.

``ddp_version_zero``: MPA v1, C clear, a client Send whose DDP control byte has DV 0 and
one with RDMAP version 0, then a well-formed Send.
"""

from __future__ import annotations

import struct
from pathlib import Path

from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw
from scapy.utils import wrpcap

from helpers.real_like_captures import LINUX_SYN_OPTIONS, fpdu

CLIENT, SERVER = "198.51.100.10", "198.51.100.20"
CPORT, SPORT = 50123, 5445  # SMB Direct's iWARP port
KEY_REQ, KEY_REP = b"MPA ID Req Frame", b"MPA ID Rep Frame"

DDP_UNTAGGED_LAST = 0x41  # L set, DV 1 (RFC 5041 section 4.2)
DDP_TAGGED = 0x81  # T set, DV 1
RDMAP_V1 = 0x40  # RV 1 (RFC 5040 section 4.2)


def untagged(opcode: int, qn: int, msn: int, body: bytes, *, ddp: int = DDP_UNTAGGED_LAST,
             rdmap: int = RDMAP_V1) -> bytes:
    """An untagged DDP segment: control, RsvdULP, QN, MSN, MO 0 (RFC 5041 section 4.4)."""
    return bytes([ddp, rdmap | opcode]) + struct.pack("!IIII", 0, qn, msn, 0) + body


def tagged(opcode: int, stag: int, to: int, body: bytes, *, last: bool) -> bytes:
    """A tagged DDP segment: control, STag, TO (RFC 5041 section 4.3)."""
    return bytes([DDP_TAGGED | (0x40 if last else 0), RDMAP_V1 | opcode]) \
        + struct.pack("!IQ", stag, to) + body


def read_request_body(sink_stag: int, sink_to: int, size: int, src_stag: int,
                      src_to: int) -> bytes:
    """RDMA Read Request header (RFC 5040 section 4.4)."""
    return struct.pack("!IQIIQ", sink_stag, sink_to, size, src_stag, src_to)


def mpa_frame(key: bytes, flags: int, rev: int, block: tuple[int, int] | None,
              pdata: bytes = b"") -> bytes:
    """An MPA request or reply (RFC 5044 section 7.1; RFC 6581 section 5 block)."""
    body = (struct.pack("!HH", *block) if block is not None else b"") + pdata
    return key + bytes([flags, rev]) + struct.pack("!H", len(body)) + body


class Builder:
    """A TCP conversation with consistent sequence numbers, one frame at a time."""

    def __init__(self) -> None:
        self.seq = {True: 3_000_000, False: 9_000_000}
        self.frames: list[Packet] = []

    def add(self, from_client: bool, flags: str, payload: bytes = b"", *,
            options: list[tuple[str, object]] | None = None) -> int:
        """Append a frame; returns its 1-based number."""
        src, dst = (CLIENT, SERVER) if from_client else (SERVER, CLIENT)
        sp, dp = (CPORT, SPORT) if from_client else (SPORT, CPORT)
        ack = self.seq[not from_client] if "A" in flags else 0
        tcp = TCP(sport=sp, dport=dp, seq=self.seq[from_client], ack=ack, flags=flags,
                  window=1024, options=options or [])
        pkt = Ether(src="02:00:00:00:01:0a" if from_client else "02:00:00:00:01:14",
                    dst="02:00:00:00:01:14" if from_client else "02:00:00:00:01:0a") \
            / IP(src=src, dst=dst, id=len(self.frames) + 1) / tcp
        if payload:
            pkt = pkt / Raw(payload)
        out = Ether(bytes(pkt))
        out.time = 1_750_000_000 + len(self.frames) * 0.001
        self.frames.append(out)
        self.seq[from_client] = (self.seq[from_client] + len(payload) + ("S" in flags)
                                 + ("F" in flags)) & 0xFFFFFFFF
        return len(self.frames)

    def handshake(self) -> None:
        """SYN, SYN-ACK, ACK with Linux's options."""
        self.add(True, "S", options=LINUX_SYN_OPTIONS)
        self.add(False, "SA", options=LINUX_SYN_OPTIONS)
        self.add(True, "A")

    def write(self, path: Path) -> Path:
        """Write the frames as classic pcap."""
        wrpcap(str(path), self.frames)
        return path


READ_STAG, READ_TO, READ_SEGMENTS, READ_SEGMENT = 0x5A5A, 0x10000, 12, 1000
SMB_FRAMES: dict[str, int] = {}
"""Frame numbers of ``smb_direct_siw``, filled in when it is built."""


def smb_direct_siw(path: Path) -> Path:
    """The SMB Direct capture of the module docstring."""
    b = Builder()
    b.handshake()
    # siw with peer_to_peer off: S set, IRD/ORD in the block, no P2P and no RTR bits.
    SMB_FRAMES["request"] = b.add(True, "PA", mpa_frame(KEY_REQ, 0x10, 2, (16, 16)))
    SMB_FRAMES["reply"] = b.add(False, "PA", mpa_frame(KEY_REP, 0x10, 2, (16, 16)))
    negotiate = bytes.fromhex("01000100" "00000000" "0000ff00" "00002000" "00100000")
    SMB_FRAMES["negotiate"] = b.add(True, "PA", fpdu(untagged(3, 0, 1, negotiate)))
    SMB_FRAMES["negotiate_response"] = b.add(
        False, "PA", fpdu(untagged(3, 0, 1, b"\x01\x00" * 16)))
    SMB_FRAMES["write"] = b.add(True, "PA", fpdu(untagged(3, 0, 2, b"SMB2 WRITE" * 4)))
    size = READ_SEGMENTS * READ_SEGMENT
    SMB_FRAMES["read_request"] = b.add(False, "PA", fpdu(untagged(
        1, 1, 1, read_request_body(READ_STAG, READ_TO, size, 0x77, 0x2000))))
    for i in range(READ_SEGMENTS):
        n = b.add(True, "PA", fpdu(tagged(2, READ_STAG, READ_TO + i * READ_SEGMENT,
                                          bytes([i]) * READ_SEGMENT,
                                          last=i == READ_SEGMENTS - 1)))
        SMB_FRAMES.setdefault("first_response", n)
        SMB_FRAMES["last_response"] = n
    SMB_FRAMES["write_response"] = b.add(False, "PA", fpdu(untagged(3, 0, 2, b"done" * 5)))
    b.add(True, "A")
    return b.write(path)


def siw_terminate_word(layer: int, etype: int, code: int, m: bool, d: bool, r: bool) -> bytes:
    """The Terminate control word as siw's little-endian bit-fields put it on the wire:
    the 32-bit unit holds layer in bits 0-3, etype 4-7, ecode 8-15, flag_m 16, flag_d 17,
    flag_r 18 (``struct iwarp_terminate``), stored least significant byte first."""
    value = layer | etype << 4 | code << 8 | int(m) << 16 | int(d) << 17 | int(r) << 18
    return struct.pack("<I", value)


def rfc_terminate_word(layer: int, etype: int, code: int, m: bool, d: bool, r: bool) -> bytes:
    """The Terminate control word of RFC 5040 section 4.8 (big-endian fields)."""
    return bytes([layer << 4 | etype, code, int(m) << 7 | int(d) << 6 | int(r) << 5, 0])


TERM_FRAMES = {"send": 6, "terminate": 7}


def siw_terminate(path: Path, *, layout: str = "siw", layer: int = 1, etype: int = 2,
                  code: int = 0x02) -> Path:
    """The Terminate capture of the module docstring; ``layout`` ``rfc`` writes the same
    Terminate with the RFC 5040 control word. The default error is DDP (1), untagged
    buffer (2), code 0x02 "Invalid MSN - no buffer available" (RFC 5041 section 7.2)."""
    b = Builder()
    b.handshake()
    b.add(True, "PA", mpa_frame(KEY_REQ, 0x00, 1, None))
    b.add(False, "PA", mpa_frame(KEY_REP, 0x00, 1, None))
    send = untagged(3, 0, 1, b"unexpected")
    b.add(True, "PA", fpdu(send, "zero"))
    word = (siw_terminate_word if layout == "siw" else rfc_terminate_word)(
        layer, etype, code, True, True, False)
    # DDP Segment Length then the terminated untagged DDP header (siw_send_terminate
    # copies struct iwarp_ctrl_untagged: mpa_len, then the 18 header bytes).
    quoted = struct.pack("!H", len(send)) + send[:18]
    b.add(False, "PA", fpdu(untagged(7, 2, 1, word + quoted), "zero"))
    return b.write(path)


VERSION_FRAMES = {"dv0": 6, "rv0": 7, "good": 8}


def ddp_version_zero(path: Path) -> Path:
    """The DDP version 0 capture of the module docstring."""
    b = Builder()
    b.handshake()
    b.add(True, "PA", mpa_frame(KEY_REQ, 0x00, 1, None))
    b.add(False, "PA", mpa_frame(KEY_REP, 0x00, 1, None))
    b.add(True, "PA", fpdu(untagged(3, 0, 1, b"dv zero", ddp=0x40), "zero"))
    b.add(True, "PA", fpdu(untagged(3, 0, 2, b"rv zero", rdmap=0x00), "zero"))
    b.add(True, "PA", fpdu(untagged(3, 0, 3, b"fine"), "zero"))
    b.add(False, "A")
    return b.write(path)


def write_snapped(path: Path, frames: list[Packet], snaplen: int) -> Path:
    """Classic pcap as ``tcpdump -s SNAPLEN`` writes it: each record holds at most
    ``snaplen`` bytes (caplen) and the frame's length on the wire (len)."""
    out = bytearray(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, snaplen, 1))
    for i, frame in enumerate(frames):
        raw = bytes(frame)
        kept = raw[:snaplen]
        out += struct.pack("<IIII", 1_750_000_000 + i, i * 1000, len(kept), len(raw)) + kept
    path.write_bytes(bytes(out))
    return path


SNAP_FRAMES = {"request": 4, "reply": 5, "send": 6, "fin": 7}


def snapped_v1(path: Path, snaplen: int = 80) -> Path:
    """A whole MPA v1 exchange (request and reply with 16 bytes of private data each, a
    Send, FINs) captured with ``tcpdump -s 80``: with Linux's SYN options and timestamps on
    every segment (TCP header 32 bytes), each frame keeps 14 bytes of TCP payload."""
    b = Builder()
    ts = [("NOP", None), ("NOP", None), ("Timestamp", (1, 1))]
    b.add(True, "S", options=LINUX_SYN_OPTIONS)
    b.add(False, "SA", options=LINUX_SYN_OPTIONS)
    b.add(True, "A", options=ts)
    b.add(True, "PA", mpa_frame(KEY_REQ, 0x00, 1, None, b"client-hello-pd!"), options=ts)
    b.add(False, "PA", mpa_frame(KEY_REP, 0x00, 1, None, b"server-hello-pd!"), options=ts)
    b.add(True, "PA", fpdu(untagged(3, 0, 1, b"x" * 40), "zero"), options=ts)
    b.add(True, "FA", options=ts)
    b.add(False, "FA", options=ts)
    b.add(True, "A", options=ts)
    return write_snapped(path, b.frames, snaplen)
