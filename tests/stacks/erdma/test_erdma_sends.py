"""erdma's data phase as far as Sends go. erdma_cm never negotiates CRC (a request or
reply with C is refused: erdma_proc_mpareq, erdma_proc_mpareply), and the driver shows
no more of the wire than that; the model's device sends RFC 5044 FPDUs (section 4.1:
ULPDU_Length, pad to 4, a CRC field of zero since no CRC was negotiated) around RFC 5041
untagged Send segments (section 4.4: T 0, L on the last, DV 1, QN 0, MSN from 1, MO) with
RFC 5040's control byte (section 4.2: RV 1, opcode 3), one per TCP segment of the
socket's MSS, on the connection erdma_modify_qp_state_to_rts handed over. These tests
read the bytes as the RFCs lay them out, and tshark reads them as DDP/RDMAP Sends."""

from __future__ import annotations

import errno
import struct
from pathlib import Path

import pytest

from mpa_emu.capture.tshark import Tshark
from mpa_emu.net.host import Host
from mpa_emu.net.network import Network
from mpa_emu.net.policy import Accept
from mpa_emu.stacks.contract.api import PostsSends
from mpa_emu.stacks.contract.errors import CmError

MS = 1_000_000
PORT = 5445
MSS = 1500 - 40 - 12
"""Linux's mss_cache with timestamps: payload bytes per segment."""
TSHARK_SAFE_PD = b"erdma pd" + bytes(8)
"""tshark takes PD_Length bytes after the 20-byte header as the private data, without
erdma's 8-byte extension (docs/stacks/erdma.md): the frame's last 8 bytes are then, to
tshark, the first FPDU. Eight zero bytes read as a zero-length FPDU (ULPDU_Length 0, pad
2, CRC field 4), so tshark's framing lands where the device's first FPDU starts."""


def _pair(*, pd: bytes = b"", recv: int | None = 1 << 16) -> tuple[Network, Host, Host, int,
                                                                    int]:
    net = Network(seed=5)
    a = net.add_host("a", "192.0.2.1", stack="erdma")
    b = net.add_host("b", "192.0.2.2", stack="erdma")
    b.listen(PORT, policy=Accept(private_data=pd))
    conn = a.connect(b, PORT, private_data=pd)
    net.run_for(MS)
    (peer,) = b.conns()
    if recv is not None:
        b.post_recv(peer, recv)
    return net, a, b, conn, peer


def _payloads(net: Network, sender: str, since: int) -> list[bytes]:
    return [f.segment.payload for f in net.frames[since:]
            if f.sender == sender and f.segment is not None and f.segment.payload]


def _check_fpdu(raw: bytes, *, msn: int, mo: int, last: bool) -> bytes:
    (ulen,) = struct.unpack_from("!H", raw)
    pad = (-(2 + ulen)) % 4
    assert len(raw) == 2 + ulen + pad + 4
    assert raw[2] == (0x41 if last else 0x01)  # T 0, L, reserved 0, DV 01b
    assert raw[3] == 0x43  # RV 01b, opcode 0011b Send
    assert struct.unpack_from("!IIII", raw, 4) == (0, 0, msn, mo)
    assert raw[2 + ulen:] == bytes(pad + 4)  # pad, then the CRC field: no CRC
    return raw[20:2 + ulen]


def test_erdma_cores_post_sends() -> None:
    _net, a, _b, _conn, _peer = _pair()
    assert isinstance(a.core, PostsSends)


def test_no_crc_is_negotiated() -> None:
    net = Network(seed=5)
    a = net.add_host("a", "192.0.2.1", stack="erdma")
    b = net.add_host("b", "192.0.2.2", stack="erdma")
    b.listen(PORT)
    a.connect(b, PORT)
    net.run_for(MS)
    frames = [p for p in _payloads(net, "a", 0) + _payloads(net, "b", 0)
              if p.startswith(b"MPA ID R")]
    assert len(frames) == 2 and all(not p[16] & 0x40 for p in frames)  # C clear


def test_a_send_larger_than_the_mss_is_cut_into_fpdus_that_fit() -> None:
    net, a, b, conn, peer = _pair()
    payload = bytes(range(256)) * 12
    start = len(net.frames)
    a.post_send(conn, payload)
    net.run_for(MS)
    segs = _payloads(net, "a", start)
    room = MSS - 24
    assert [len(s) for s in segs] == [MSS, MSS, 24 + len(payload) - 2 * room]
    data = b"".join(_check_fpdu(s, msn=1, mo=i * room, last=i == 2)
                    for i, s in enumerate(segs))
    assert data == payload
    assert b.received_sends(peer) == [payload]


def test_both_ways_msns_from_one() -> None:
    net, a, b, conn, peer = _pair()
    a.post_recv(conn, 32)
    b.post_recv(peer, 32)
    start = len(net.frames)
    a.post_send(conn, b"one")
    a.post_send(conn, b"two!")
    b.post_send(peer, b"back")
    net.run_for(MS)
    first, second = _payloads(net, "a", start)
    assert _check_fpdu(first, msn=1, mo=0, last=True) == b"one"
    assert _check_fpdu(second, msn=2, mo=0, last=True) == b"two!"
    (back,) = _payloads(net, "b", start)
    assert _check_fpdu(back, msn=1, mo=0, last=True) == b"back"
    assert b.received_sends(peer) == [b"one", b"two!"]
    assert a.received_sends(conn) == [b"back"]


def test_a_send_with_no_buffer_is_not_placed() -> None:
    net, a, b, conn, peer = _pair(recv=None)
    a.post_send(conn, b"nowhere")
    net.run_for(MS)
    (rec,) = net.trace.of_kind("fpdu_not_placed")
    assert rec.fields["reason"] == "RFC 5041 section 7.2: invalid MSN - no buffer available"
    assert b.received_sends(peer) == []


def test_post_send_needs_an_rts_qp() -> None:
    net = Network(seed=5)
    a = net.add_host("a", "192.0.2.1", stack="erdma")
    b = net.add_host("b", "192.0.2.2", stack="erdma")
    b.listen(PORT)
    conn = a.connect(b, PORT)
    with pytest.raises(CmError) as info:
        a.post_send(conn, b"early")  # CONNECTING: the QP is not in RTS
    assert info.value.errno == errno.EINVAL


@pytest.mark.tshark
def test_tshark_reads_the_sends_as_ddp_rdmap_sends(tmp_path: Path) -> None:
    net, a, b, conn, peer = _pair(pd=TSHARK_SAFE_PD)  # in the request and the reply
    a.post_recv(conn, 64)
    a.post_send(conn, b"0123456789abcdef" * 187 + b"01234567")  # 3000 bytes
    b.post_send(peer, b"hello")
    net.run_for(MS)
    pcap = tmp_path / "sends.pcapng"
    net.write_pcapng(pcap)
    # The RPC-over-RDMA heuristic claims short Send payloads that are not RPC (spec
    # wireshark-mpa section 2): these Sends carry no upper protocol.
    judge = Tshark(disable_rpcrdma=True)
    rows = [{k: ",".join(v) for k, v in row.items()} for row in judge.fields(
        pcap, ["iwarp_rdma.opcode", "iwarp_ddp.qn", "iwarp_ddp.msn", "iwarp_ddp.mo",
               "iwarp_ddp.last_flag", "iwarp_mpa.crc_flag"], "iwarp_mpa")]
    sends = [(r["iwarp_ddp.qn"], r["iwarp_ddp.msn"], r["iwarp_ddp.mo"],
              r["iwarp_ddp.last_flag"]) for r in rows if r.get("iwarp_rdma.opcode") == "0x03"]
    assert sends == [("0", "1", "0", "0"), ("0", "1", "1424", "0"), ("0", "1", "2848", "1"),
                     ("0", "1", "0", "1")]
    assert [r["iwarp_mpa.crc_flag"] for r in rows if r.get("iwarp_mpa.crc_flag")] == ["0", "0"]
    assert judge.problems(pcap) == []
    assert a.received_sends(conn) == [b"hello"]
