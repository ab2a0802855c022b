"""siw's QP after RDMA mode (siw_qp_rx.c, siw_qp.c, siw_cm.c): FPDUs a raw peer writes
after the MPA exchange, and what siw answers.

The expected Terminates are written here from siw_send_terminate and iwarp.h: the
untagged header (QN 2, MSN 1, MO 0), the control word as siw's little-endian bit-fields
put it (byte 0 ``etype << 4 | layer``, byte 1 the ecode, byte 2 ``R << 2 | D << 1 | M``),
then the offending header siw attaches, its MPA length replaced by the payload length.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from helpers.siw_pair import KEY_REP, KEY_REQ, PEER_IP, SIW_IP, Pair, frame
from mpa_emu.stacks.contract.errors import CmError

from mpa_emu.capture.pcap import CaptureRecord, write_pcapng
from mpa_emu.wire import codec, ddp, mpa

REPLY_LEN = 24  # the MPA reply: 20-byte header and the RFC 6581 block, no private data
M, D, R = 0x01, 0x02, 0x04


def siw_term(layer: int, etype: int, ecode: int, flags: int = 0, attached: bytes = b"",
             *, crc: bool = False) -> bytes:
    """A Terminate FPDU as siw_send_terminate writes it on a little-endian host."""
    ulpdu = bytes([0x41, 0x47]) + struct.pack("!IIII", 0, 2, 1, 0)
    ulpdu += bytes([etype << 4 | layer, ecode, flags, 0]) + attached
    body = struct.pack("!H", len(ulpdu)) + ulpdu
    assert len(body) % 4 == 0  # siw's Terminates never need a pad
    return body + (struct.pack("<I", mpa.crc32c(body)) if crc else bytes(4))


def fpdu(ulpdu: bytes, *, crc: bool = False) -> bytes:
    """MPA framing (RFC 5044 section 4); without CRC the field is zero."""
    return mpa.frame_fpdu(ulpdu, crc=None if crc else 0)


def responder(*, crc: bool = False, p2p: bool = False,
              recvs: tuple[int, ...] = ()) -> tuple[Pair, int, int]:
    """A siw responder that accepted a v2 request from the raw peer (IRD/ORD 8; with
    ``p2p`` the Write RTR offered, so siw waits for it); receive buffers of ``recvs``
    bytes posted before the accept."""
    p = Pair()
    p.siw.create_listen(SIW_IP, 31000, now_ns=0)
    sock = p.peer.connect(PEER_IP, SIW_IP, 31000, None, 0)
    p.run(1_000_000)
    bits = 0x8000 if p2p else 0
    p.peer.send(sock, frame(KEY_REQ, 0x10 | (0x40 if crc else 0), 2, b"",
                            struct.pack("!HH", 8 | bits, 8 | bits)), p.now)
    p.run(p.now + 1_000_000)
    conn = p.upcalls[-1].conn
    for length in recvs:
        p.siw.post_recv(conn, length)
    p.siw.accept(conn, now_ns=p.now)
    p.run(p.now + 1_000_000)
    return p, sock, conn


def inject(p: Pair, sock: int, *pieces: bytes) -> None:
    """The peer writes each piece as its own TCP segment."""
    for piece in pieces:
        p.peer.send(sock, piece, p.now)
        p.run(p.now + 1_000_000)


def after_reply(p: Pair) -> bytes:
    return p.peer_data()[REPLY_LEN:]


def events(p: Pair) -> list[tuple[str, int]]:
    return [(u.event.name, u.status) for u in p.upcalls]


def peer_saw(p: Pair, kind: str) -> bool:
    return any(e.kind == kind for e in p.peer_events)


def test_rdma_write_to_an_unregistered_stag_gets_a_ddp_invalid_stag_terminate() -> None:
    p, sock, conn = responder()
    inject(p, sock, fpdu(ddp.rdma_write(b"12345678", 0x1234, 0x40)))
    # siw_proc_write: siw_mem_id2obj finds no memory for the STag: siw_init_terminate
    # (TERM_ERROR_LAYER_DDP, DDP_ETYPE_TAGGED_BUF, DDP_ECODE_T_INVALID_STAG); siw_send_terminate
    # attaches the iwarp_ctrl_tagged header (M, D) with the payload length (8).
    attached = struct.pack("!HBBIQ", 8, 0xC1, 0x40, 0x1234, 0x40)
    assert after_reply(p) == siw_term(1, 1, 0x00, M | D, attached)
    # SIW_CM_WORK_CLOSE_LLP: CLOSE(0), then sock_release: a FIN, no RST
    assert events(p) == [("CONNECT_REQUEST", 0), ("ESTABLISHED", 0), ("CLOSE", 0)]
    assert peer_saw(p, "peer_fin") and not peer_saw(p, "reset")
    assert p.siw.node(conn) is None
    assert "sink stag not found/invalid, stag 0x00001234" in " ".join(p.kernel_log())


def test_zero_length_write_is_taken_without_a_look_at_its_stag() -> None:
    p, sock, _ = responder()
    inject(p, sock, fpdu(ddp.rdma_write(b"", 0xDEAD, 0)))
    assert after_reply(p) == b""  # siw_proc_write: "zero length WRITE" returns 0 at once
    assert events(p)[-1] == ("ESTABLISHED", 0)


def test_write_lands_in_a_registered_region_and_bounds_are_checked() -> None:
    p, sock, _ = responder()
    p.siw.register_mr(0x2201, 16, va=0x1000)
    inject(p, sock, fpdu(ddp.rdma_write(b"abcd", 0x2201, 0x1004)))
    assert p.siw.mr_data(0x2201) == bytes(4) + b"abcd" + bytes(8)
    assert after_reply(p) == b""
    inject(p, sock, fpdu(ddp.rdma_write(b"x" * 8, 0x2201, 0x100C)))
    # siw_check_mem: past the end is E_BASE_BOUNDS -> DDP_ECODE_T_BASE_BOUNDS (siw_tagged_error)
    attached = struct.pack("!HBBIQ", 8, 0xC1, 0x40, 0x2201, 0x100C)
    assert after_reply(p) == siw_term(1, 1, 0x01, M | D, attached)


def test_write_without_remote_write_access_is_an_invalid_stag() -> None:
    p, sock, _ = responder()
    p.siw.register_mr(0x3301, 16, remote_write=False)
    inject(p, sock, fpdu(ddp.rdma_write(b"abcd", 0x3301, 0)))
    # E_ACCESS_PERM: "RFC 5041 (DDP) lacks an ecode ... 'Invalid STag'" (siw_tagged_error)
    attached = struct.pack("!HBBIQ", 4, 0xC1, 0x40, 0x3301, 0)
    assert after_reply(p) == siw_term(1, 1, 0x00, M | D, attached)


def test_send_without_a_receive_buffer_is_the_receive_buffer_overflow_terminate() -> None:
    p, sock, conn = responder()
    inject(p, sock, fpdu(ddp.send(b"negotiate", 1)))
    # siw_proc_send: siw_rqe_get finds nothing: DDP_ETYPE_UNTAGGED_BUF,
    # DDP_ECODE_UT_INVALID_MSN_NOBUF (2); the iwarp_ctrl_untagged header is attached.
    attached = struct.pack("!HBBIIII", 9, 0x41, 0x43, 0, 0, 1, 0)
    assert after_reply(p) == siw_term(1, 2, 0x02, M | D, attached)
    assert events(p)[-1] == ("CLOSE", 0)
    assert peer_saw(p, "peer_fin")
    assert p.siw.completions(conn) == []


def test_posted_buffers_take_sends_then_the_next_send_overflows() -> None:
    p, sock, conn = responder(recvs=(64,))
    inject(p, sock, fpdu(ddp.send(b"hello", 1)))
    assert after_reply(p) == b""
    (done,) = p.siw.completions(conn)
    assert (done.status, done.data) == ("SUCCESS", b"hello")
    inject(p, sock, fpdu(ddp.send(b"again", 2)))
    attached = struct.pack("!HBBIIII", 5, 0x41, 0x43, 0, 0, 2, 0)
    assert after_reply(p) == siw_term(1, 2, 0x02, M | D, attached)


def test_send_longer_than_the_buffer_is_nobuf_and_completes_in_error() -> None:
    p, sock, conn = responder(recvs=(4, 32))
    inject(p, sock, fpdu(ddp.send(b"too long", 1)))
    # siw_send_check_ntoh: "receive space short": SIW_WC_LOC_LEN_ERR, MSN_NOBUF
    attached = struct.pack("!HBBIIII", 8, 0x41, 0x43, 0, 0, 1, 0)
    assert after_reply(p) == siw_term(1, 2, 0x02, M | D, attached)
    # siw_rdmap_complete completes the WQE in error; siw_qp_llp_close flushes the rest
    assert [(c.status, c.length) for c in p.siw.completions(conn)] == [
        ("LOC_LEN_ERR", 0), ("WR_FLUSH_ERR", 32)]


def test_send_with_a_wrong_msn_is_msn_range() -> None:
    p, sock, _ = responder(recvs=(16,))
    inject(p, sock, fpdu(ddp.send(b"x", 5)))
    attached = struct.pack("!HBBIIII", 1, 0x41, 0x43, 0, 0, 5, 0)
    assert after_reply(p) == siw_term(1, 2, 0x03, M | D, attached)


def test_an_fpdu_split_over_three_segments_is_read_whole() -> None:
    p, sock, conn = responder(recvs=(64,))
    wire = fpdu(ddp.send(b"split across segments", 1))
    inject(p, sock, wire[:5], wire[5:23], wire[23:])
    assert [c.data for c in p.siw.completions(conn)] == [b"split across segments"]
    assert after_reply(p) == b""


def test_zero_length_read_request_gets_a_zero_length_read_response() -> None:
    p, sock, _ = responder()
    head = ddp.UntaggedHeader(opcode=ddp.Opcode.READ_REQUEST, qn=1, msn=1)
    body = ddp.ReadRequest(sink_stag=0x77, sink_to=0x10, size=0, src_stag=0x55, src_to=0)
    inject(p, sock, fpdu(head.to_bytes() + body.to_bytes()))
    # siw_init_rresp: a Read Response WQE with no SGE; siw_qp_prepare_tx: tagged, sink STag/TO
    assert after_reply(p) == fpdu(ddp.read_response(b"", 0x77, 0x10))


def test_read_request_is_answered_with_read_responses_from_the_region() -> None:
    p, sock, _ = responder()
    p.siw.register_mr(0x4401, 32, va=0x8000, data=bytes(range(32)))
    head = ddp.UntaggedHeader(opcode=ddp.Opcode.READ_REQUEST, qn=1, msn=1)
    body = ddp.ReadRequest(sink_stag=0x99, sink_to=0x500, size=12, src_stag=0x4401,
                           src_to=0x8004)
    inject(p, sock, fpdu(head.to_bytes() + body.to_bytes()))
    assert after_reply(p) == fpdu(ddp.read_response(bytes(range(4, 16)), 0x99, 0x500))


def test_read_request_from_an_unknown_source_stag_is_a_remote_protection_terminate() -> None:
    p, sock, _ = responder()
    head = ddp.UntaggedHeader(opcode=ddp.Opcode.READ_REQUEST, qn=1, msn=1)
    body = ddp.ReadRequest(sink_stag=0x99, sink_to=0x500, size=16, src_stag=0x6601,
                           src_to=0x20)
    inject(p, sock, fpdu(head.to_bytes() + body.to_bytes()))
    # siw_qp_sq_proc_tx: siw_check_sgl_tx fails: RDMAP layer, REMOTE_PROTECTION,
    # siw_rdmap_error(E_STAG_INVALID) = INVALID_STAG, in_tx; siw_send_terminate rebuilds the
    # Read Request (M, D, R) with its MPA length made 0 and, as the kernel does, the read
    # size (16) where the MSN belongs; siw_qp_cm_drop(qp, 0) closes at once.
    rreq = struct.pack("!HBBIIII", 0, 0x41, 0x41, 0, 1, 16, 0)
    rreq += struct.pack("!IQIIQ", 0x99, 0x500, 16, 0x6601, 0x20)
    assert after_reply(p) == siw_term(0, 1, 0x00, M | D | R, rreq)
    assert events(p)[-1] == ("CLOSE", 0)
    assert peer_saw(p, "peer_fin")


def test_read_request_with_the_wrong_msn_is_msn_range() -> None:
    p, sock, _ = responder()
    head = ddp.UntaggedHeader(opcode=ddp.Opcode.READ_REQUEST, qn=1, msn=3)
    body = ddp.ReadRequest(sink_stag=1, sink_to=0, size=0, src_stag=1, src_to=0)
    inject(p, sock, fpdu(head.to_bytes() + body.to_bytes()))
    # siw_init_rresp: DDP_ETYPE_UNTAGGED_BUF, DDP_ECODE_UT_INVALID_MSN_RANGE; the header
    # attached is iwarp_ctrl_untagged, its length less the Read Request header (46) = 0
    attached = struct.pack("!HBBIIII", 0, 0x41, 0x41, 0, 1, 3, 0)
    assert after_reply(p) == siw_term(1, 2, 0x03, M | D, attached)


def test_received_terminate_closes_without_a_terminate_back() -> None:
    p, sock, conn = responder(recvs=(8,))
    inject(p, sock, fpdu(ddp.terminate(2, 0, 2)))
    # siw_proc_terminate: -ECONNRESET, no siw_init_terminate; SIW_CM_WORK_CLOSE_LLP: CLOSE
    assert after_reply(p) == b""
    assert events(p)[-1] == ("CLOSE", 0)
    assert peer_saw(p, "peer_fin")
    # the RFC layout (Layer 2 in the high nibble) read through siw's bit-fields
    assert "siw: got TERMINATE. layer 0, type 2, code 2" in p.kernel_log()
    assert [(c.status, c.length) for c in p.siw.completions(conn)] == [("WR_FLUSH_ERR", 8)]


@pytest.mark.parametrize(("ulpdu", "term"), [
    # DDP version 2 on a Send: DDP_ETYPE_UNTAGGED_BUF, DDP_ECODE_UT_VERSION, no header
    (ddp.UntaggedHeader(opcode=3, qn=0, msn=1, ddp_version=2).to_bytes() + b"data",
     siw_term(1, 2, 0x06)),
    # DDP version 0 on a Write: DDP_ETYPE_TAGGED_BUF, DDP_ECODE_T_VERSION, no header
    (ddp.TaggedHeader(opcode=0, stag=1, to=0, ddp_version=0).to_bytes() + b"data",
     siw_term(1, 1, 0x04)),
    # RDMAP version 2: RDMAP layer, RDMAP_ETYPE_REMOTE_OPERATION, RDMAP_ECODE_VERSION;
    # "Do not report DDP hdr information if packet layout is unknown"
    (ddp.UntaggedHeader(opcode=3, qn=0, msn=1, rdmap_version=2).to_bytes() + b"data",
     siw_term(0, 2, 0x05)),
], ids=["ddp-untagged", "ddp-tagged", "rdmap"])
def test_version_not_1_is_a_terminate_without_headers(ulpdu: bytes, term: bytes) -> None:
    p, sock, _ = responder(recvs=(64,))
    inject(p, sock, fpdu(ulpdu))
    assert after_reply(p) == term
    assert events(p)[-1] == ("CLOSE", 0)


def test_crc_is_checked_only_when_negotiated() -> None:
    p, sock, conn = responder(recvs=(16, 16))
    inject(p, sock, mpa.frame_fpdu(ddp.send(b"ok", 1), crc=0xBAD))
    assert [c.data for c in p.siw.completions(conn)] == [b"ok"]  # no CRC: field ignored
    q, qsock, _ = responder(crc=True, recvs=(16,))
    inject(q, qsock, mpa.frame_fpdu(ddp.send(b"ok", 1), crc=0xBAD))
    # siw_get_trailer: LLP layer, LLP_ETYPE_MPA, LLP_ECODE_RECEIVED_CRC; the Terminate
    # carries a CRC of its own
    assert after_reply(q) == siw_term(2, 0, 0x02, crc=True)


def test_bad_first_fpdu_while_waiting_for_the_rtr_means_no_established() -> None:
    p, sock, _ = responder(p2p=True)
    assert events(p) == [("CONNECT_REQUEST", 0)]  # the reply picked Write: wait for it
    inject(p, sock, fpdu(ddp.rdma_write(b"abcd", 0x1234, 0)))
    # siw_rtr_data_ready: rx_suspend is set, so no ESTABLISHED; CLOSE_LLP gives CLOSE
    assert events(p) == [("CONNECT_REQUEST", 0), ("CLOSE", 0)]
    attached = struct.pack("!HBBIQ", 4, 0xC1, 0x40, 0x1234, 0)
    assert after_reply(p) == siw_term(1, 1, 0x00, M | D, attached)


def test_post_send_writes_sends_with_increasing_msn() -> None:
    p, _, conn = responder()
    p.siw.post_send(conn, b"first", now_ns=p.now)
    p.siw.post_send(conn, b"second", now_ns=p.now)
    p.run(p.now + 1_000_000)
    assert after_reply(p) == fpdu(ddp.send(b"first", 1)) + fpdu(ddp.send(b"second", 2))


def test_verbs_refuse_what_the_qp_cannot_do() -> None:
    p, sock, conn = responder()
    with pytest.raises(CmError):
        p.siw.post_recv(conn, -1)
    with pytest.raises(CmError):
        p.siw.post_send(999, b"x")
    with pytest.raises(CmError):
        p.siw.register_mr(0, 16)
    inject(p, sock, fpdu(ddp.terminate(0, 0, 0)))
    with pytest.raises(CmError):
        p.siw.post_send(conn, b"late")


@pytest.mark.tshark
def test_tshark_reads_siw_terminates_with_layer_and_etype_swapped(tmp_path: Path) -> None:
    if shutil.which("tshark") is None:
        pytest.fail("tshark is required (tools/test.sh installs it)")
    rows = []
    for ulpdu in (ddp.rdma_write(b"12345678", 0x1234, 0), ddp.send(b"negotiate", 1)):
        p, sock, _ = responder()
        inject(p, sock, fpdu(ulpdu))
        cap = tmp_path / "term.pcapng"
        write_pcapng(cap, [CaptureRecord(t, 0, "wire", 1, raw, len(raw))
                           for t, raw in ((t, codec.encode(seg)) for t, _, seg, _ in p.wire)])
        out = subprocess.run(
            ["tshark", "-r", str(cap), "-o", "tcp.try_heuristic_first:TRUE",
             "--enable-heuristic", "iwarp_mpa_tcp", "-T", "fields", "-E", "occurrence=f",
             "-Y", "iwarp_rdma.opcode == 7", "-e", "iwarp_rdma.term_layer",
             "-e", "iwarp_rdma.term_etype_ddp", "-e", "iwarp_rdma.term_errcode_ddp_tagged",
             "-e", "iwarp_rdma.term_etype_llp", "-e", "iwarp_rdma.term_errcode",
             "-e", "iwarp_rdma.term_hdrct_m"],
            capture_output=True, text=True, check=True).stdout
        rows.append(out.rstrip("\n").split("\t"))
    # invalid STag: byte 0 is 0x11 (etype 1 << 4 | layer 1), the same read either way;
    # byte 2 is 0x03 (siw's M and D in the low bits), which RFC 5040 reads as no M, D, R.
    # no receive buffer: byte 0 is 0x21 (etype 2 << 4 | layer 1): tshark reads layer 2
    # (LLP) and etype 1; the ecode 0x02 sits where RFC 5040 puts it.
    assert rows == [["0x01", "0x01", "0x00", "", "", "0"],
                    ["0x02", "", "", "0x01", "0x02", "0"]]


def initiator_after_read_rtr() -> tuple[Pair, int]:
    """A siw initiator (P2P, Read RTR only) whose reply picked Read: its ORQ holds the
    zero-length Read RTR (siw_qp_mpa_rts: sink lkey 0, laddr 0, length 0)."""
    p = Pair({"peer_to_peer": True, "rtr_type": 2})
    p.peer.listen(PEER_IP, 31000, 16)
    p.siw.connect(SIW_IP, PEER_IP, 31000, now_ns=0)
    p.run(1_000_000)
    sock = next(e.sock for e in p.peer_events if e.kind == "accepted")
    p.peer.send(sock, frame(KEY_REP, 0x10, 2, b"", struct.pack("!HH", 0x8008, 0x4008)),
                p.now)
    p.run(p.now + 1_000_000)
    assert events(p) == [("CONNECT_REPLY", 0)]
    return p, sock


def initiator_sent(p: Pair) -> bytes:
    """What siw wrote after its request (20 + 4 bytes) and its Read RTR FPDU."""
    rtr = ddp.UntaggedHeader(opcode=ddp.Opcode.READ_REQUEST, qn=1, msn=1).to_bytes()
    rtr += ddp.ReadRequest(sink_stag=0, sink_to=0, size=0, src_stag=1, src_to=0).to_bytes()
    data = b"".join(seg.payload for seg in p.sent_by("siw"))
    assert data[24:24 + len(fpdu(rtr))] == fpdu(rtr)
    return data[24 + len(fpdu(rtr)):]


def test_read_response_answering_the_read_rtr_is_taken() -> None:
    p, sock = initiator_after_read_rtr()
    inject(p, sock, fpdu(ddp.read_response(b"", 0, 0)))
    assert initiator_sent(p) == b""
    assert events(p) == [("CONNECT_REPLY", 0)]


def test_read_response_to_another_sink_stag_is_invalid_stag() -> None:
    p, sock = initiator_after_read_rtr()
    inject(p, sock, fpdu(ddp.read_response(b"", 5, 0)))
    # siw_rresp_check_ntoh: the sink STag is not the ORQ head's lkey (0)
    attached = struct.pack("!HBBIQ", 0, 0xC1, 0x42, 5, 0)
    assert initiator_sent(p) == siw_term(1, 1, 0x00, M | D, attached)
    assert events(p) == [("CONNECT_REPLY", 0), ("CLOSE", 0)]


def test_second_read_response_finds_the_orq_empty() -> None:
    p, sock = initiator_after_read_rtr()
    inject(p, sock, fpdu(ddp.read_response(b"", 0, 0)), fpdu(ddp.read_response(b"", 0, 0)))
    # siw_proc_rresp: "ORQ empty": DDP layer, DDP_ETYPE_CATASTROPHIC, code 0
    attached = struct.pack("!HBBIQ", 0, 0xC1, 0x42, 0, 0)
    assert initiator_sent(p) == siw_term(1, 0, 0x00, M | D, attached)


def test_terminate_then_fin_gives_close_only() -> None:
    p, sock, _ = responder()
    p.peer.send(sock, fpdu(ddp.terminate(0, 0, 0)), p.now)
    p.peer.shutdown(sock, p.now)
    p.run(p.now + 1_000_000)
    # SIW_CM_WORK_CLOSE_LLP runs first and releases the endpoint: CLOSE(0); the
    # SIW_CM_WORK_PEER_CLOSE after it finds no cm_id, so no DISCONNECT
    assert events(p) == [("CONNECT_REQUEST", 0), ("ESTABLISHED", 0), ("CLOSE", 0)]
