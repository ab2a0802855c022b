"""qedr's data phase as far as Sends go: the firmware's FPDUs checked byte by byte
against RFC 5044 section 4.1 (ULPDU_Length, pad to 4, CRC32c little-endian when
crc_needed), RFC 5041 section 4.4 (untagged DDP header: T 0, L on the last segment, DV 1,
QN 0, MSN from 1, MO) and RFC 5040 section 4.2 (RDMAP control: RV 1, opcode 3 Send); each
FPDU in one TCP segment of the MSS; the peer's receive buffers filled in MSN order; and
tshark reading the Sends as iWARP DDP/RDMAP Sends with good CRCs and nothing malformed."""

from __future__ import annotations

import errno
import struct
from pathlib import Path

import crc32c as crc32c_lib
import pytest
from helpers.cxgb4_lab import make_net

from mpa_emu.capture.tshark import Tshark
from mpa_emu.net.host import Host
from mpa_emu.net.network import Network
from mpa_emu.stacks.contract.api import PostsSends
from mpa_emu.stacks.contract.errors import CmError

MS = 1_000_000
PORT = 5445
MSS = 1500 - 40 - 12
"""The firmware's MSS less the timestamp option (TS_EN): payload bytes per segment."""


def _pair(client: str = "qedr", server: str = "qedr", *,
          client_params: dict[str, int | bool] | None = None,
          server_params: dict[str, int | bool] | None = None,
          recv: int | None = 1 << 16) -> tuple[Network, Host, Host, int, int]:
    net = make_net()
    a = net.add_host("a", "192.0.2.1", stack=client, params=client_params)
    b = net.add_host("b", "192.0.2.2", stack=server, params=server_params)
    b.listen(PORT)
    conn = a.connect("192.0.2.2", PORT, ird=2, ord=2)
    net.run_for(MS)
    (peer,) = b.conns()
    if recv is not None:
        b.post_recv(peer, recv)
    return net, a, b, conn, peer


def _payloads(net: Network, sender: str, since: int) -> list[bytes]:
    return [f.segment.payload for f in net.frames[since:]
            if f.sender == sender and f.segment is not None and f.segment.payload]


def _check_fpdu(raw: bytes, *, msn: int, mo: int, last: bool, crc: bool) -> bytes:
    """One whole FPDU read as the RFCs lay it out; returns the Send's data."""
    (ulen,) = struct.unpack_from("!H", raw)
    pad = (-(2 + ulen)) % 4
    assert len(raw) == 2 + ulen + pad + 4
    ddp_ctl, rdmap_ctl = raw[2], raw[3]
    assert ddp_ctl == (0x41 if last else 0x01)  # T 0, L, reserved 0, DV 01b
    assert rdmap_ctl == 0x43  # RV 01b, reserved 0, opcode 0011b Send
    rsvd, qn, got_msn, got_mo = struct.unpack_from("!IIII", raw, 4)
    assert (rsvd, qn, got_msn, got_mo) == (0, 0, msn, mo)
    assert raw[2 + ulen:2 + ulen + pad] == bytes(pad)
    (value,) = struct.unpack_from("<I", raw, 2 + ulen + pad)
    assert value == (crc32c_lib.crc32c(raw[:2 + ulen + pad]) if crc else 0)
    return raw[20:2 + ulen]


def test_the_crc_library_gives_the_castagnoli_check_value() -> None:
    # CRC-32C of "123456789" is 0xE3069283 (RFC 3720 section B.4's polynomial).
    assert crc32c_lib.crc32c(b"123456789") == 0xE3069283


def test_qedr_cores_post_sends() -> None:
    _net, a, _b, _conn, _peer = _pair()
    assert isinstance(a.core, PostsSends)


def test_a_send_larger_than_the_mss_is_cut_into_fpdus_that_fit() -> None:
    net, a, b, conn, peer = _pair()
    payload = bytes(range(256)) * 12  # 3072 bytes
    start = len(net.frames)
    a.post_send(conn, payload)
    net.run_for(MS)
    segs = _payloads(net, "a", start)
    room = MSS - 24  # 2 + 18 header bytes + 4 CRC bytes: 1424, a multiple of 4
    assert [len(s) for s in segs] == [MSS, MSS, 24 + len(payload) - 2 * room]
    data = b"".join(_check_fpdu(s, msn=1, mo=i * room, last=i == 2, crc=True)
                    for i, s in enumerate(segs))
    assert data == payload
    assert b.received_sends(peer) == [payload]


def test_msns_count_from_one_and_pad_fills_to_four() -> None:
    net, a, b, conn, peer = _pair()
    b.post_recv(peer, 64)
    start = len(net.frames)
    a.post_send(conn, b"abc")  # ULPDU 21 bytes: 3 bytes of pad
    a.post_send(conn, b"")
    net.run_for(MS)
    first, second = _payloads(net, "a", start)
    assert first[:2] == b"\x00\x15" and len(first) == 2 + 21 + 1 + 4
    assert _check_fpdu(first, msn=1, mo=0, last=True, crc=True) == b"abc"
    assert _check_fpdu(second, msn=2, mo=0, last=True, crc=True) == b""
    assert b.received_sends(peer) == [b"abc", b""]


def test_without_crc_needed_the_crc_field_is_zero() -> None:
    params: dict[str, int | bool] = {"crc_needed": False}
    net, a, b, conn, peer = _pair(client_params=params, server_params=params)
    start = len(net.frames)
    a.post_send(conn, b"no crc here")
    net.run_for(MS)
    (seg,) = _payloads(net, "a", start)
    assert _check_fpdu(seg, msn=1, mo=0, last=True, crc=False) == b"no crc here"
    assert b.received_sends(peer) == [b"no crc here"]


def test_after_a_send_rtr_the_first_send_is_msn_2() -> None:
    # fw_rtr_order 2 puts the zero-length Send first (QN 0, MSN 1); the responder's
    # firmware takes it as the RTR and expects MSN 2 next.
    net, a, b, conn, peer = _pair(client_params={"fw_rtr_order": 2})
    start = len(net.frames)
    a.post_send(conn, b"after the rtr")
    net.run_for(MS)
    (seg,) = _payloads(net, "a", start)
    assert _check_fpdu(seg, msn=2, mo=0, last=True, crc=True) == b"after the rtr"
    assert b.received_sends(peer) == [b"after the rtr"]


def test_the_other_direction_and_each_stack_s_buffers() -> None:
    net, a, b, conn, peer = _pair("siw", "qedr", client_params={"peer_to_peer": True})
    a.post_recv(conn, 100)
    b.post_send(peer, b"from qedr")
    a.post_send(conn, b"to qedr")
    net.run_for(MS)
    assert a.received_sends(conn) == [b"from qedr"]
    assert b.received_sends(peer) == [b"to qedr"]


def test_a_send_with_no_buffer_or_too_long_is_not_placed() -> None:
    net, a, b, conn, peer = _pair(recv=None)
    a.post_send(conn, b"nowhere to go")
    net.run_for(MS)
    assert b.received_sends(peer) == []
    b.post_recv(peer, 4)
    a.post_send(conn, b"too long")  # MSN 2, while the receiver still expects MSN 1
    net.run_for(MS)
    reasons = [r.fields["reason"] for r in net.trace.of_kind("fpdu_not_placed")]
    assert reasons == ["RFC 5041 section 7.2: invalid MSN - no buffer available",
                       "RFC 5041 section 7.2: invalid MSN - MSN range"]
    assert b.received_sends(peer) == []


def test_a_send_longer_than_the_buffer_is_not_placed() -> None:
    net, a, b, conn, peer = _pair(recv=4)
    a.post_send(conn, b"too long")
    net.run_for(MS)
    (rec,) = net.trace.of_kind("fpdu_not_placed")
    assert rec.fields["reason"] == ("RFC 5041 section 7.2: DDP message too long for "
                                    "available buffer")
    assert b.received_sends(peer) == []


def test_post_send_needs_an_rts_qp() -> None:
    net = make_net()
    a = net.add_host("a", "192.0.2.1", stack="qedr")
    b = net.add_host("b", "192.0.2.2", stack="qedr")
    b.listen(PORT)
    conn = a.connect("192.0.2.2", PORT)
    with pytest.raises(CmError) as info:
        a.post_send(conn, b"early")  # the QP is still IDLE
    assert info.value.errno == errno.EINVAL
    net.run_for(MS)
    a.disconnect(conn, graceful=False)
    net.run_for(MS)
    with pytest.raises(CmError) as info:
        a.post_send(conn, b"late")  # the ep is gone after the close
    assert info.value.errno == errno.EINVAL


@pytest.mark.tshark
def test_tshark_reads_the_sends_as_ddp_rdmap_sends(tmp_path: Path) -> None:
    net, a, b, conn, peer = _pair()
    a.post_send(conn, b"0123456789abcdef" * 187 + b"01234567")  # 3000 bytes
    b.post_send(peer, b"hello")
    a.post_recv(conn, 64)
    net.run_for(MS)
    pcap = tmp_path / "sends.pcapng"
    net.write_pcapng(pcap)
    # The RPC-over-RDMA heuristic claims short Send payloads that are not RPC (spec
    # wireshark-mpa section 2): these Sends carry no upper protocol.
    judge = Tshark(disable_rpcrdma=True)
    rows = [{k: ",".join(v) for k, v in row.items()} for row in judge.fields(
        pcap, ["tcp.srcport", "iwarp_rdma.opcode", "iwarp_ddp.qn", "iwarp_ddp.msn",
               "iwarp_ddp.mo", "iwarp_ddp.last_flag"], "iwarp_ddp")]
    sends = [(r["iwarp_ddp.qn"], r["iwarp_ddp.msn"], r["iwarp_ddp.mo"],
              r["iwarp_ddp.last_flag"]) for r in rows if r["iwarp_rdma.opcode"] == "0x03"]
    assert sends == [("0", "1", "0", "0"), ("0", "1", "1424", "0"), ("0", "1", "2848", "1"),
                     ("0", "1", "0", "1")]
    assert judge.problems(pcap) == []
    verdicts = judge.crc_verdicts(pcap)
    assert len(verdicts) >= 5 and all(v.good for v in verdicts)
