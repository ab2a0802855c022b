"""A capture shaped like SMB Direct between cifs.ko and ksmbd over siw (a fallocate test
run): two connections, written byte by byte with scapy from RFC 5040/5041/5044.

Every TCP segment carries Linux's timestamp option (32-byte TCP header), so an MSS of 1448
bytes holds one FPDU: siw fills each segment, a Send's DDP segments carrying 1,424 bytes
of payload each (2 + 18 + 1424 + 4 = 1448), a Read Response's 1,428 (2 + 14 + 1428 + 4).

Connection 1 (frames in ``FALLOC``): MPA v2 with S and the RFC 6581 block (siw's
defaults: no P2P, no RTR, C clear), then client Sends MSN 1, 2, ... with a server Send
after each; MSN 22 is one 7,736-byte Send in six DDP segments (5 x 1424 + 616); MSN 25 a
16,520-byte Send in twelve segments (11 x 1424 + 856) starting at frame 77, so its sixth
segment (MO 7120) is frame 82. The server answers that segment with a Terminate (frame
90): siw's little-endian control word, layer DDP, untagged buffer error, code 0x05 "DDP
Message too long for available buffer" (RFC 5041 section 7.2), then the DDP segment
length and the 18-byte untagged header of frame 82 (siw_send_terminate copies
``struct iwarp_ctrl_untagged``). The client then resets.

Connection 2 (``FALLOC2``): the same set-up, a few Sends, one 16 KiB RDMA Read Request
from the server (QN 1, MSN 1, sink STag 0x7000) answered by twelve Read Response segments
(11 x 1428 + 676, L on the last), the server's last Send, then FIN both ways.
"""

from __future__ import annotations

import struct
from pathlib import Path

from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw
from scapy.utils import wrpcap

from helpers.real_like_captures import fpdu
from helpers.third_party_captures import (
    KEY_REP,
    KEY_REQ,
    mpa_frame,
    read_request_body,
    siw_terminate_word,
    tagged,
    untagged,
)

CLIENT, SERVER, SPORT = "10.0.0.1", "10.0.0.2", 5445
SEND_SEGMENT, READ_SEGMENT = 1424, 1428
BIG_SEND, BIG_MSN = 16_520, 25
SPLIT_SEND, SPLIT_MSN = 7_736, 22
READ_SIZE, READ_STAG = 16_384, 0x7000
FALLOC: dict[str, int] = {}
FALLOC2: dict[str, int] = {}
"""Frame numbers, filled in when the capture is built."""


class _Conn:
    def __init__(self, frames: list[Packet], cport: int) -> None:
        self.frames = frames
        self.cport = cport
        self.seq = {True: 1_000_000 + cport, False: 5_000_000 + cport}
        self.ts = 100

    def add(self, from_client: bool, flags: str, payload: bytes = b"") -> int:
        src, dst = (CLIENT, SERVER) if from_client else (SERVER, CLIENT)
        sp, dp = (self.cport, SPORT) if from_client else (SPORT, self.cport)
        self.ts += 1
        opts: list[tuple[str, object]] = (
            [("MSS", 1460), ("SAckOK", b""), ("Timestamp", (self.ts, 0)), ("NOP", None),
             ("WScale", 7)] if "S" in flags else
            [("NOP", None), ("NOP", None), ("Timestamp", (self.ts, self.ts))])
        ack = self.seq[not from_client] if "A" in flags else 0
        pkt = Ether(src="02:00:00:00:0a:01" if from_client else "02:00:00:00:0a:02",
                    dst="02:00:00:00:0a:02" if from_client else "02:00:00:00:0a:01") \
            / IP(src=src, dst=dst, id=len(self.frames) + 1) \
            / TCP(sport=sp, dport=dp, seq=self.seq[from_client], ack=ack, flags=flags,
                  window=4096, options=opts)
        if payload:
            pkt = pkt / Raw(payload)
        out = Ether(bytes(pkt))
        out.time = 1_760_000_000 + len(self.frames) * 0.0005
        self.frames.append(out)
        self.seq[from_client] = (self.seq[from_client] + len(payload) + ("S" in flags)
                                 + ("F" in flags)) & 0xFFFFFFFF
        return len(self.frames)

    def setup(self) -> None:
        self.add(True, "S")
        self.add(False, "SA")
        self.add(True, "A")
        self.add(True, "PA", mpa_frame(KEY_REQ, 0x10, 2, (16, 16)))
        self.add(False, "PA", mpa_frame(KEY_REP, 0x10, 2, (16, 16)))

    def send(self, from_client: bool, msn: int, size: int) -> list[int]:
        """A Send of ``size`` bytes in DDP segments of at most 1,424 bytes; its frames."""
        out = []
        for mo in range(0, max(size, 1), SEND_SEGMENT):
            chunk = min(SEND_SEGMENT, size - mo)
            last = mo + chunk >= size
            body = bytes([msn & 0xFF]) * chunk
            ulpdu = bytes([0x41 if last else 0x01, 0x43]) \
                + struct.pack("!IIII", 0, 0, msn, mo) + body
            out.append(self.add(from_client, "PA", fpdu(ulpdu, "zero")))
        return out


def falloc(path: Path) -> Path:
    """The capture of the module docstring."""
    frames: list[Packet] = []
    c = _Conn(frames, 40001)
    c.setup()
    msn = 1
    while True:
        size = SPLIT_SEND if msn == SPLIT_MSN else 120
        sent = c.send(True, msn, size)
        if msn == SPLIT_MSN:
            FALLOC["split_first"], FALLOC["split_last"] = sent[0], sent[-1]
        c.send(False, msn, 40)
        msn += 1
        if msn == BIG_MSN:
            break
    while len(frames) < 76:
        c.add(False, "A")
    big = c.send(True, BIG_MSN, BIG_SEND)
    FALLOC["big_first"], FALLOC["big_sixth"], FALLOC["big_last"] = big[0], big[5], big[-1]
    c.add(False, "A")
    sixth_mo = 5 * SEND_SEGMENT
    quoted_ddp = bytes([0x01, 0x43]) + struct.pack("!IIII", 0, 0, BIG_MSN, sixth_mo)
    word = siw_terminate_word(1, 2, 0x05, True, True, False)
    body = word + struct.pack("!H", 2 + 18 + SEND_SEGMENT) + quoted_ddp
    FALLOC["terminate"] = c.add(False, "PA", fpdu(untagged(7, 2, 1, body), "zero"))
    FALLOC["rst"] = c.add(True, "R")
    d = _Conn(frames, 40002)
    FALLOC2["first"] = len(frames) + 1
    d.setup()
    for m in (1, 2):
        d.send(True, m, 100)
        d.send(False, m, 60)
    FALLOC2["read_request"] = d.add(False, "PA", fpdu(untagged(
        1, 1, 1, read_request_body(READ_STAG, 0, READ_SIZE, 0x99, 0x4000)), "zero"))
    responses = []
    for to in range(0, READ_SIZE, READ_SEGMENT):
        chunk = min(READ_SEGMENT, READ_SIZE - to)
        responses.append(d.add(True, "PA", fpdu(tagged(
            2, READ_STAG, to, b"r" * chunk, last=to + chunk >= READ_SIZE), "zero")))
    FALLOC2["response_first"], FALLOC2["response_last"] = responses[0], responses[-1]
    d.send(False, 3, 60)
    d.add(True, "FA")
    d.add(False, "FA")
    d.add(True, "A")
    wrpcap(str(path), frames)
    return path
