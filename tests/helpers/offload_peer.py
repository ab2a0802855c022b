"""A peer of one offloaded QP: its addresses, the QP's init values and frames from the peer."""

from __future__ import annotations

import struct
from dataclasses import replace

from mpa_emu.stacks.irdma.offload import OffloadedQp, QpInit

from mpa_emu.wire import mpa
from mpa_emu.wire.segment import ACK, Segment

A_MAC = bytes.fromhex("020000000001")
P_MAC = bytes.fromhex("020000000002")
A_IP = bytes([192, 168, 10, 1])
P_IP = bytes([192, 168, 10, 2])
A_PORT, P_PORT = 40001, 31000
# Passive side numbers after the canonical handshake: Ip = 5000, MPA request L = 44.
P_SEQ, P_RCV = 5001, 70001 + 44
REPLY = mpa.MpaFrame(request=False, rev=2, flags=mpa.FLAG_CRC | mpa.FLAG_ENHANCED,
                     rtr=mpa.RtrBlock(ird=16, ord=16, read0=True),
                     private_data=b"welcome").to_bytes()


def crc32c(data: bytes) -> int:
    """Bitwise CRC32c (reflected polynomial 0x82F63B78, RFC 3385), independent of
    mpa_emu.wire.mpa; the FPDU carries it as in RFC 5044 appendix B (least significant byte
    first on the wire, as tshark checks it)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def qp_init(active: bool, **changes: object) -> QpInit:
    if active:
        base = QpInit(conn=1, active=True, gen=2, local_mac=A_MAC, remote_mac=P_MAC,
                      local_ip=A_IP, remote_ip=P_IP, local_port=A_PORT, remote_port=P_PORT,
                      vlan=None, pcp=0, tos=0, ttl=64, snd_nxt=P_RCV,
                      rcv_nxt=P_SEQ + len(REPLY), snd_wnd=65535 << 2, snd_wscale=2,
                      rcv_wscale=2, mss=1460, rtr_op="read", ird=16, ord=16, mpa_rev=2,
                      crc=True, snd_markers=False, rcv_markers=False)
    else:
        base = QpInit(conn=7, active=False, gen=2, local_mac=P_MAC, remote_mac=A_MAC,
                      local_ip=P_IP, remote_ip=A_IP, local_port=P_PORT, remote_port=A_PORT,
                      vlan=None, pcp=0, tos=0, ttl=64, snd_nxt=P_SEQ, rcv_nxt=P_RCV,
                      snd_wnd=65535 << 2, snd_wscale=2, rcv_wscale=2, mss=1460,
                      rtr_op="read", ird=16, ord=16, mpa_rev=2, crc=True,
                      snd_markers=False, rcv_markers=False)
    return replace(base, **changes)  # type: ignore[arg-type]


def from_peer(qp: OffloadedQp, seq: int, ack: int, flags: int = ACK, payload: bytes = b"",
              window: int = 65535) -> Segment:
    init = qp.init
    return Segment(src_mac=init.remote_mac, dst_mac=init.local_mac, src_ip=init.remote_ip,
                   dst_ip=init.local_ip, sport=init.remote_port, dport=init.local_port,
                   seq=seq, ack=ack, flags=flags, window=window, payload=payload)


def rtr_read_fpdu() -> bytes:
    # RFC 5041 section 4.3 untagged header (QN 1, MSN 1, MO 0) + RFC 5040 section 4.4
    # Read Request: sink STag 0xabcd, sink TO 0, size 0, source STag 0x1234, source TO 0.
    ulpdu = (bytes([0x41, 0x41]) + struct.pack("!IIII", 0, 1, 1, 0)
             + struct.pack("!IQIIQ", 0xABCD, 0, 0, 0x1234, 0))
    return mpa.frame_fpdu(ulpdu)
