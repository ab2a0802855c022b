"""Captures of the four upper protocols over iWARP, every byte packed here by hand from
the specifications' field tables ([MS-SMBD] 2.2.1-2.2.3 and [MS-SMB2] 2.2.1.2, all
little-endian; include/linux/nvme-rdma.h and the NVMe SQE/CQE layouts, little-endian;
iscsi_iser.h and RFC 7143 section 11, big-endian; RFC 8797 / rpc_rdma.h and RFC 8166
section 4.2, XDR), and DDP/RDMAP from RFC 5040/5041 as ``third_party_captures`` does;
nothing comes from mpa_emu's encoders. Frame numbers are in each builder's ``FRAMES``.

``smbd_falloc``: cifs.ko to ksmbd over siw (MPA v2 without P2P, the legacy IRD/ORD
private data): the Negotiate Request (client MaxReceiveSize 8,192), the Negotiate
Response granting 255 credits and a MaxReceiveSize of 1,364, an SMB2 NEGOTIATE and its
response as data transfers, then one 16,520-byte Send (an SMB2 WRITE of 16 KiB, MSN 3)
in twelve segments of 1,424 bytes (the last 856); the server's 8,192-byte receive buffer
overflows at the segment with MO 7120, so it sends a Terminate (DDP, untagged buffer,
0x02 no buffer available, siw's layout) quoting that segment's header, then a RST.
``smbd_healthy`` is the same negotiate and a WRITE sent as fragments within 1,364 bytes.
"""

from __future__ import annotations

import struct
from pathlib import Path

from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw
from scapy.utils import wrpcap

from helpers.real_like_captures import LINUX_SYN_OPTIONS, fpdu
from helpers.third_party_captures import (
    KEY_REP,
    KEY_REQ,
    mpa_frame,
    siw_terminate_word,
    untagged,
)

CLIENT, SERVER, CPORT = "198.51.100.10", "198.51.100.20", 50124


def le16(v: int) -> bytes:
    return struct.pack("<H", v)


def le32(v: int) -> bytes:
    return struct.pack("<I", v)


class PortBuilder:
    """A TCP conversation to ``sport`` with consistent sequence numbers."""

    def __init__(self, sport: int) -> None:
        self.sport = sport
        self.seq = {True: 5_000_000, False: 7_000_000}
        self.frames: list[Packet] = []

    def add(self, from_client: bool, flags: str, payload: bytes = b"", *,
            options: list[tuple[str, object]] | None = None) -> int:
        """Append a frame; returns its 1-based number."""
        src, dst = (CLIENT, SERVER) if from_client else (SERVER, CLIENT)
        sp, dp = (CPORT, self.sport) if from_client else (self.sport, CPORT)
        ack = self.seq[not from_client] if "A" in flags else 0
        pkt = Ether(src="02:00:00:00:02:0a", dst="02:00:00:00:02:14") \
            / IP(src=src, dst=dst, id=len(self.frames) + 1) \
            / TCP(sport=sp, dport=dp, seq=self.seq[from_client], ack=ack, flags=flags,
                  window=4096, options=options or [])
        if payload:
            pkt = pkt / Raw(payload)
        out = Ether(bytes(pkt))
        out.time = 1_760_000_000 + len(self.frames) * 0.001
        self.frames.append(out)
        self.seq[from_client] = (self.seq[from_client] + len(payload) + ("S" in flags)
                                 + ("F" in flags)) & 0xFFFFFFFF
        return len(self.frames)

    def handshake(self) -> None:
        self.add(True, "S", options=LINUX_SYN_OPTIONS)
        self.add(False, "SA", options=LINUX_SYN_OPTIONS)
        self.add(True, "A")

    def send(self, from_client: bool, msn: int, body: bytes, *, opcode: int = 3) -> int:
        return self.add(from_client, "PA", fpdu(untagged(opcode, 0, msn, body), "zero"))

    def close(self) -> None:
        self.add(True, "FA")
        self.add(False, "FA")
        self.add(True, "A")

    def write(self, path: Path) -> Path:
        wrpcap(str(path), self.frames)
        return path


# -- SMB Direct ----------------------------------------------------------------------

SMBD_LEGACY = struct.pack(">II", 16, 16)  # [MS-SMBD] 6.1 IRD, ORD (Linux: big-endian)
# [MS-SMBD] 2.2.1 Negotiate Request: MinVersion, MaxVersion, Reserved, CreditsRequested,
# PreferredSendSize, MaxReceiveSize, MaxFragmentedSize.
SMBD_NEG_REQ = le16(0x0100) + le16(0x0100) + le16(0) + le16(255) + le32(1364) \
    + le32(8192) + le32(1048576)
# [MS-SMBD] 2.2.2 Negotiate Response: MinVersion, MaxVersion, NegotiatedVersion,
# Reserved, CreditsRequested, CreditsGranted, Status, MaxReadWriteSize,
# PreferredSendSize, MaxReceiveSize, MaxFragmentedSize.
SMBD_NEG_RESP = le16(0x0100) + le16(0x0100) + le16(0x0100) + le16(0) + le16(255) \
    + le16(255) + le32(0) + le32(8 << 20) + le32(1364) + le32(1364) + le32(1048576)
WRITE_SIZE, SEGMENT = 16520, 1424


def smb2(command: int, response: bool = False, mid: int = 1) -> bytes:
    """[MS-SMB2] 2.2.1.2 SYNC header."""
    return (b"\xfeSMB" + le16(64) + le16(1) + le32(0) + le16(command) + le16(1)
            + le32(1 if response else 0) + le32(0) + struct.pack("<Q", mid) + le32(0)
            + le32(1) + bytes(8) + bytes(16))


def data_transfer(granted: int, payload: bytes, *, requested: int = 255,
                  remaining: int = 0, flags: int = 0) -> bytes:
    """[MS-SMBD] 2.2.3: CreditsRequested, CreditsGranted, Flags, Reserved,
    RemainingDataLength, DataOffset 24, DataLength, Padding, Buffer."""
    return (le16(requested) + le16(granted) + le16(flags) + le16(0) + le32(remaining)
            + le32(24) + le32(len(payload)) + le32(0) + payload)


SMBD_FRAMES: dict[str, int] = {}


def _smbd_setup(b: PortBuilder) -> None:
    b.handshake()
    SMBD_FRAMES["request"] = b.add(True, "PA", mpa_frame(KEY_REQ, 0x10, 2, (16, 16),
                                                         SMBD_LEGACY))
    SMBD_FRAMES["reply"] = b.add(False, "PA", mpa_frame(KEY_REP, 0x10, 2, (16, 16),
                                                        SMBD_LEGACY))
    SMBD_FRAMES["negotiate"] = b.send(True, 1, SMBD_NEG_REQ)
    SMBD_FRAMES["negotiate_response"] = b.send(False, 1, SMBD_NEG_RESP)
    SMBD_FRAMES["smb2_negotiate"] = b.send(True, 2, data_transfer(
        10, smb2(0x0000) + bytes(36), flags=1))
    SMBD_FRAMES["smb2_negotiate_response"] = b.send(False, 2, data_transfer(
        10, smb2(0x0000, response=True) + bytes(64)))


def smbd_falloc(path: Path) -> Path:
    """The failing SMB Direct capture of the module docstring."""
    b = PortBuilder(5445)
    _smbd_setup(b)
    payload = smb2(0x0009, mid=2) + bytes(48) + bytes(16384)  # SMB2 WRITE, 16 KiB
    message = data_transfer(0, payload, flags=1)
    assert len(message) == WRITE_SIZE
    overflow_header = b""
    for i, mo in enumerate(range(0, WRITE_SIZE, SEGMENT)):
        chunk = message[mo:mo + SEGMENT]
        last = mo + SEGMENT >= WRITE_SIZE
        ulpdu = bytes([0x41 if last else 0x01, 0x43]) + struct.pack("!IIII", 0, 0, 3, mo) \
            + chunk
        n = b.add(True, "PA", fpdu(ulpdu, "zero"))
        SMBD_FRAMES.setdefault("write_first", n)
        SMBD_FRAMES["write_last"] = n
        if mo == 7120:
            SMBD_FRAMES["overflow_segment"] = n
            overflow_header = struct.pack("!H", len(ulpdu)) + ulpdu[:18]
        assert i < 12
    word = siw_terminate_word(1, 2, 0x02, True, True, False)
    SMBD_FRAMES["terminate"] = b.add(False, "PA", fpdu(untagged(7, 2, 1, word
                                                                + overflow_header), "zero"))
    SMBD_FRAMES["rst"] = b.add(False, "R")
    return b.write(path)


def smbd_healthy(path: Path) -> Path:
    """The same negotiate, then a WRITE as fragments of at most 1,364 bytes and its
    response; FINs."""
    b = PortBuilder(5445)
    _smbd_setup(b)
    payload = smb2(0x0009, mid=2) + bytes(48) + bytes(2000)
    first, rest = payload[:1340], payload[1340:]
    b.send(True, 3, data_transfer(0, first, remaining=len(rest), flags=1))
    b.send(True, 4, data_transfer(0, rest, flags=1))
    b.send(False, 3, data_transfer(2, smb2(0x0009, response=True, mid=2) + bytes(16)))
    b.close()
    return b.write(path)


# -- NVMe over Fabrics ---------------------------------------------------------------

NVME_FRAMES: dict[str, int] = {}


def nvme_cm_req(qid: int, hrqsize: int, hsqsize: int) -> bytes:
    """struct nvme_rdma_cm_req: recfmt 0, qid, hrqsize, hsqsize, rsvd[24]."""
    return le16(0) + le16(qid) + le16(hrqsize) + le16(hsqsize) + bytes(24)


def nvme_reject(path: Path, *, qid: int = 1, hrqsize: int = 1024, hsqsize: int = 1023,
                sts: int = 0x04) -> Path:
    """An NVMe-oF connect (I/O queue ``qid`` of ``hsqsize`` + 1 entries) rejected with
    status ``sts`` (struct nvme_rdma_cm_rej: recfmt 0, sts) in an MPA v2 reject."""
    b = PortBuilder(4420)
    b.handshake()
    NVME_FRAMES["request"] = b.add(True, "PA", mpa_frame(KEY_REQ, 0x10, 2, (16, 16),
                                                         nvme_cm_req(qid, hrqsize, hsqsize)))
    NVME_FRAMES["reject"] = b.add(False, "PA", mpa_frame(KEY_REP, 0x30, 2, (16, 16),
                                                         le16(0) + le16(sts)))
    b.add(False, "FA")
    b.add(True, "FA")
    b.add(False, "A")
    return b.write(path)


def nvme_admin_accept(path: Path) -> Path:
    """An admin queue connect (hrqsize 32, hsqsize 31) accepted (crqsize 32), a Fabrics
    Connect command capsule with its 1,024 bytes of data and the CQE answering it."""
    b = PortBuilder(4420)
    b.handshake()
    NVME_FRAMES["request"] = b.add(True, "PA", mpa_frame(KEY_REQ, 0x10, 2, (16, 16),
                                                         nvme_cm_req(0, 32, 31)))
    NVME_FRAMES["reply"] = b.add(False, "PA", mpa_frame(KEY_REP, 0x10, 2, (16, 16),
                                                        le16(0) + le16(32) + bytes(28)))
    sqe = bytearray(64)  # struct nvmf_connect_command
    sqe[0], sqe[2:4], sqe[4] = 0x7F, le16(1), 0x01
    sqe[40:42], sqe[42:44], sqe[44:46] = le16(0), le16(0), le16(31)
    NVME_FRAMES["connect"] = b.send(True, 1, bytes(sqe) + bytes(1024))
    cqe = bytes(8) + le16(1) + le16(0) + le16(1) + le16(0)  # result, sq_head, sq_id, cid
    NVME_FRAMES["response"] = b.send(False, 1, cqe)
    b.close()
    return b.write(path)


# -- iSER ----------------------------------------------------------------------------

ISER_FRAMES: dict[str, int] = {}


def iser_login(path: Path, *, target_invalidates: bool = False) -> Path:
    """iscsi_iser to isert: CM headers 0xC0 (ZBVA and Send with Invalidate not
    supported) both ways; the Login Request and Login Response as iSER-framed Sends;
    ``target_invalidates`` adds a target Send with Invalidate (RDMAP opcode 4)."""
    b = PortBuilder(3260)
    b.handshake()
    ISER_FRAMES["request"] = b.add(True, "PA", mpa_frame(KEY_REQ, 0x10, 2, (16, 16),
                                                         bytes([0xC0, 0, 0, 0])))
    ISER_FRAMES["reply"] = b.add(False, "PA", mpa_frame(KEY_REP, 0x10, 2, (16, 16),
                                                        bytes([0xC0, 0, 0, 0])))
    text = b"InitiatorName=iqn.2004-10.com.example:host\0SessionType=Normal\0"
    pad = bytes(-len(text) % 4)
    bhs = bytearray(48)  # RFC 7143 11.12 Login Request: immediate bit, opcode 0x03
    bhs[0], bhs[5:8] = 0x43, len(text).to_bytes(3, "big")
    ctrl = bytes([0x10, 0, 0, 0]) + bytes(24)  # struct iser_ctrl: ISCSI_CTRL, no STags
    ISER_FRAMES["login"] = b.send(True, 1, ctrl + bytes(bhs) + text + pad)
    rsp = bytearray(48)  # Login Response, opcode 0x23, status 0/0
    rsp[0] = 0x23
    ISER_FRAMES["login_response"] = b.send(False, 1, ctrl + bytes(rsp))
    if target_invalidates:
        ISER_FRAMES["invalidate"] = b.send(False, 2, ctrl + bytes(48), opcode=4)
    b.close()
    return b.write(path)


# -- RPC-over-RDMA -------------------------------------------------------------------

RPC_FRAMES: dict[str, int] = {}


def rpc_private(send_kib: int, recv_kib: int) -> bytes:
    """RFC 8797 / struct rpcrdma_connect_private: magic, version 1, flags 0, send and
    receive sizes in KiB minus one."""
    return bytes.fromhex("f6ab0e18") + bytes([1, 0, send_kib - 1, recv_kib - 1])


def rpc_call(xid: int, size: int) -> bytes:
    """RFC 8166 4.2 RDMA_MSG header with empty read list, write list and reply chunk,
    then an RPC call (RFC 5531: xid, CALL, rpcvers 2, NFS 100003, vers 3) padded to
    ``size`` bytes."""
    head = struct.pack(">IIII", xid, 1, 32, 0) + struct.pack(">III", 0, 0, 0) \
        + struct.pack(">IIIII", xid, 0, 2, 100003, 3)
    return head + bytes(size - len(head))


def rpcrdma_inline(path: Path, *, call_size: int = 2000) -> Path:
    """An NFS/RDMA client and server both announcing 1 KiB inline sizes; the client then
    sends a ``call_size``-byte call with no chunk."""
    b = PortBuilder(20049)
    b.handshake()
    RPC_FRAMES["request"] = b.add(True, "PA", mpa_frame(KEY_REQ, 0x10, 2, (16, 16),
                                                        rpc_private(1, 1)))
    RPC_FRAMES["reply"] = b.add(False, "PA", mpa_frame(KEY_REP, 0x10, 2, (16, 16),
                                                       rpc_private(1, 1)))
    RPC_FRAMES["call"] = b.send(True, 1, rpc_call(0x1234, call_size))
    b.close()
    return b.write(path)


def unknown_pd(path: Path) -> Path:
    """A connection to port 31000 whose request carries private data of no known
    format."""
    b = PortBuilder(31000)
    b.handshake()
    b.add(True, "PA", mpa_frame(KEY_REQ, 0x10, 2, (16, 16), b"\x01\x02app-hello"))
    b.add(False, "PA", mpa_frame(KEY_REP, 0x10, 2, (16, 16)))
    b.send(True, 1, b"payload!")
    b.close()
    return b.write(path)
