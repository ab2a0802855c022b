"""A capture shaped like SMB Direct between two siw hosts in the data phase, built byte by
byte (DDP/RDMAP headers from RFC 5040 section 4 and RFC 5041 section 4, FPDUs from RFC
5044 section 4.1; nothing from mpa_emu), with two connections:

1. ``OVERFLOW``: after the SMB Direct negotiation (one Send each way), the client sends one
   16,520-byte Send (MSN 2) cut as siw cuts it for an MSS of 1448 (siw_prepare_fpdu: the
   FPDU fills the segment, 1448 - 20-byte header - 4-byte CRC = 1424 bytes of payload), so
   eleven segments of 1424 bytes and one of 856. The server's receive buffer held 8,192
   bytes: the sixth segment (MO 7120) does not fit (siw_send_check_ntoh: 8192 < 7120 +
   1424), and the server answers with siw's Terminate (DDP layer, untagged buffer error,
   code 0x02, in siw's little-endian bit-field layout with M and D set) quoting the DDP
   Segment Length (1424: siw_send_terminate subtracts the header) and the segment's
   18-byte untagged DDP header, then closes with a FIN (siw_qp_cm_drop); the client,
   told by the Terminate (siw_proc_terminate), closes too.
2. ``HEALTHY``: the negotiation, an SMB2 WRITE request in a Send, the server's RDMA Read
   Request (QN 1, MSN 1) of 6,000 bytes from the client's STag 0x1277 at TO 0x2000 into
   its own STag 0x5a5a at TO 0x10000, answered in five Read Response segments (1,200
   bytes each, L on the last), the server's Send, an RDMA Write of 2,000 bytes by the
   server into the client's STag 0x3499 (two segments), a last Send, graceful close.
   siw's STags carry the region's index above the low 8-bit key (siw_mr_add_mem:
   ``mem->stag = id << 8``), so the three STags name three different regions.
"""

from __future__ import annotations

import struct
from pathlib import Path

from helpers.inspect_builders import Conversation, write_pcap
from helpers.real_like_captures import KEY_REP, KEY_REQ, fpdu
from helpers.stack_captures import LINUX_SYN, LINUX_SYNACK, block, mpa

CLIENT, SERVER = "10.0.0.1", "10.0.0.2"
PORT = 5445
OVERFLOW_PORT, HEALTHY_PORT = 40200, 40201
SEGMENT = 1424
BIG_SEND = 16520
BUFFER = 8192
OVERFLOW_MO = 7120
READ_SINK, READ_SINK_TO, READ_SOURCE, READ_SOURCE_TO = 0x5A5A, 0x10000, 0x1277, 0x2000
READ_SIZE, READ_PIECE = 6000, 1200
WRITE_STAG, WRITE_TO, WRITE_SIZE = 0x3499, 0x4000, 2000
FRAMES: dict[str, int] = {}
"""Frame numbers (1-based, over the whole capture), filled in when it is built."""


def untagged(opcode: int, qn: int, msn: int, mo: int, body: bytes, *, last: bool = True,
             ) -> bytes:
    """Untagged DDP segment (RFC 5041 section 4.4): control (L, DV 1), RDMAP control (RV
    1, opcode), RsvdULP, QN, MSN, MO."""
    return bytes([0x41 if last else 0x01, 0x40 | opcode]) \
        + struct.pack("!IIII", 0, qn, msn, mo) + body


def tagged(opcode: int, stag: int, to: int, body: bytes, *, last: bool) -> bytes:
    """Tagged DDP segment (RFC 5041 section 4.3): control (T, L, DV 1), STag, TO."""
    return bytes([0xC1 if last else 0x81, 0x40 | opcode]) + struct.pack("!IQ", stag, to) + body


def zero(ulpdu: bytes) -> bytes:
    """An FPDU with a zero CRC field (no CRC negotiated: siw writes 0)."""
    return fpdu(ulpdu, crc="zero")


def siw_terminate_word(layer: int, etype: int, code: int, *, m: bool, d: bool) -> bytes:
    """``struct iwarp_terminate`` bit-fields from a little-endian host: layer bits 0-3,
    etype 4-7, ecode 8-15, flag_m 16, flag_d 17, stored least significant byte first."""
    return struct.pack("<I", layer | etype << 4 | code << 8 | int(m) << 16 | int(d) << 17)


def _open(conv: Conversation) -> None:
    conv.handshake(LINUX_SYN, LINUX_SYNACK)
    conv.client_sends(mpa(KEY_REQ, 0x10, 2, block(16, 16)))
    conv.server_sends(mpa(KEY_REP, 0x10, 2, block(16, 16)))
    conv.client_sends(zero(untagged(3, 0, 1, 0, b"NEGOTIATE-REQ" + bytes(7))))
    conv.server_sends(zero(untagged(3, 0, 1, 0, b"NEGOTIATE-RSP" + bytes(19))))


def _number(convs: list[Conversation]) -> int:
    return sum(len(c.frames) for c in convs)


def data_phase(path: Path) -> Path:
    """The two-connection capture of the module docstring."""
    before: list[Conversation] = []
    one = Conversation(client=CLIENT, server=SERVER, cport=OVERFLOW_PORT, sport=PORT,
                       client_isn=100_000, server_isn=500_000)
    _open(one)
    payload = bytes(range(256)) * (BIG_SEND // 256) + bytes(BIG_SEND % 256)
    pieces = [payload[i:i + SEGMENT] for i in range(0, BIG_SEND, SEGMENT)]
    assert len(pieces) == 12
    for i, piece in enumerate(pieces[:6]):
        one.client_sends(zero(untagged(3, 0, 2, i * SEGMENT, piece,
                                       last=i == len(pieces) - 1)))
    FRAMES["overflow_segment"] = _number([one])
    overflowed = untagged(3, 0, 2, OVERFLOW_MO, pieces[5], last=False)
    quoted = struct.pack("!H", SEGMENT) + overflowed[:18]
    word = siw_terminate_word(1, 2, 0x02, m=True, d=True)
    one.server_sends(zero(untagged(7, 2, 1, 0, word + quoted)))
    FRAMES["terminate"] = _number([one])
    one.server_sends(b"", flags="FA")
    one.client_sends(b"", flags="FA")
    one.ack_from_server()
    before.append(one)

    two = Conversation(client=CLIENT, server=SERVER, cport=HEALTHY_PORT, sport=PORT,
                       client_isn=200_000, server_isn=600_000)
    _open(two)
    two.client_sends(zero(untagged(3, 0, 2, 0, b"SMB2 WRITE 6000 bytes" + bytes(3))))
    rreq = struct.pack("!IQIIQ", READ_SINK, READ_SINK_TO, READ_SIZE, READ_SOURCE,
                       READ_SOURCE_TO)
    two.server_sends(zero(untagged(1, 1, 1, 0, rreq)))
    FRAMES["read_request"] = _number(before) + len(two.frames)
    for i in range(READ_SIZE // READ_PIECE):
        two.client_sends(zero(tagged(2, READ_SINK, READ_SINK_TO + i * READ_PIECE,
                                     bytes([i + 1]) * READ_PIECE,
                                     last=i == READ_SIZE // READ_PIECE - 1)))
    two.server_sends(zero(untagged(3, 0, 2, 0, b"SMB2 WRITE done" + bytes(1))))
    half = WRITE_SIZE // 2
    two.server_sends(zero(tagged(0, WRITE_STAG, WRITE_TO, b"r" * half, last=False)))
    two.server_sends(zero(tagged(0, WRITE_STAG, WRITE_TO + half, b"s" * half, last=True)))
    two.server_sends(zero(untagged(3, 0, 3, 0, b"SMB2 READ done" + bytes(2))))
    two.ack_from_client()
    two.graceful_close()
    FRAMES["healthy_first"] = _number(before) + 1
    return write_pcap(path, one, two)
