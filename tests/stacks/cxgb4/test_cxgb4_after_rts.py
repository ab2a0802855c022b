"""The offloaded QP after FPDU mode: FPDUs a raw peer writes after the MPA exchange, the
error CQE the adapter raises (t4.h T4_ERR_* as RFC 5040/5041 name the error), what
c4iw_ev_dispatch and c4iw_modify_qp do with it (QP to TERMINATE, post_terminate, a
graceful close), and a received Terminate (``terminate``: an abortive close).

The expected Terminate is written here from qp.c: ``post_terminate`` is called with a
NULL CQE by ``c4iw_modify_qp``, so ``build_term_codes`` gives LAYER_RDMAP|DDP_LOCAL_CATA
(0x00) and ecode 0 whatever the CQE said; the firmware frames it untagged on QN 2, MSN
1, MO 0 with the RFC 5040 control word (``struct terminate_message``, hdrct 0).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.cxgb4_lab import (
    IP_B,
    IP_RAW,
    KEY_REQ,
    PORT,
    RawPeer,
    cxgb4,
    kernel_log,
    make_net,
    mpa_frame,
    raw_close,
    raw_send,
    v2_words,
)
from mpa_emu.stacks.contract.errors import CmError

from mpa_emu.net.network import Network
from mpa_emu.net.policy import Accept
from mpa_emu.stacks.cxgb4 import fpdu_rx
from mpa_emu.wire import ddp, mpa

MS = 1_000_000
C_S = mpa.FLAG_CRC | mpa.FLAG_ENHANCED
REPLY_LEN = 24  # the MPA reply with the RFC 6581 block, no private data
TERM_LOCAL_CATA = mpa.frame_fpdu(
    bytes([0x41, 0x47]) + (0).to_bytes(4, "big") + (2).to_bytes(4, "big")
    + (1).to_bytes(4, "big") + (0).to_bytes(4, "big") + bytes([0x00, 0x00, 0x00, 0x00]))


def established(recvs: tuple[int, ...] = ()):
    """A cxgb4 responder (default parameters: CRC, peer2peer, Read RTR) that accepted a
    raw peer's v2 request; receive buffers of ``recvs`` bytes posted."""
    net = make_net()
    b = cxgb4(net, "b", IP_B)
    raw = net.add_host("raw", IP_RAW)
    b.listen(PORT, policy=Accept())
    sock = raw.connect(IP_B, PORT)
    net.run_for(MS)
    raw_send(net, raw, sock, mpa_frame(KEY_REQ, C_S, 2, v2_words(4, 4)))
    net.run_for(MS)
    conn = b.upcalls[0].conn
    for length in recvs:
        b.core.post_recv(conn, length)
    return net, b, raw, sock, conn


def received(raw) -> bytes:
    core = raw.core
    assert isinstance(core, RawPeer)
    return b"".join(core.received.values())[REPLY_LEN:]


def records(net: Network, kind: str) -> list[dict[str, object]]:
    assert net.trace is not None
    return [r.fields for r in net.trace.records if r.kind == kind and r.host == "b"]


def upcalls(host) -> list[tuple[str, int]]:
    return [(u.event.name, u.status) for u in host.upcalls]


def test_write_to_an_invalid_stag_terminates_and_closes_gracefully() -> None:
    net, b, raw, sock, conn = established()
    raw_send(net, raw, sock, mpa.frame_fpdu(ddp.rdma_write(b"12345678", 0x1234, 0)))
    net.run_for(MS)
    # the adapter's error CQE: T4_ERR_STAG on an inbound Write, IB_EVENT_QP_REQ_ERR
    (cqe,) = records(net, "err_cqe")
    assert (cqe["status"], cqe["term_codes_for_status"]) == ("T4_ERR_STAG", [0x01, 0x00])
    assert [r["event"] for r in records(net, "qp_event")] == ["IB_EVENT_QP_REQ_ERR"]
    assert ("err", "dump_err_cqe",
            f"AE qpid {conn} opcode 0 status 0x1 type 0 len 0x8 wrid.hi 0x0 wrid.lo 0x0") \
        in kernel_log(net, "b")
    # post_terminate(NULL): 0x00 / 0x00, then c4iw_ep_disconnect(abrupt=0): a FIN
    assert received(raw) == TERM_LOCAL_CATA
    assert b.qp_state(conn).iwarp_state == "TERMINATE"
    assert b.node(conn).state == "CLOSING"
    core = raw.core
    assert isinstance(core, RawPeer)
    assert core.socks("peer_fin") == [sock]
    assert upcalls(b) == [("CONNECT_REQUEST", 0), ("ESTABLISHED", 0)]
    # the peer closes too: MORIBUND, our FIN acknowledged: CLOSE(0); TERMINATE -> ERROR
    raw_close(net, raw, sock)
    net.run_for(MS)
    assert upcalls(b)[-1] == ("CLOSE", 0)
    assert b.node(conn) is None


def test_zero_length_write_and_read_request_are_taken() -> None:
    net, b, raw, sock, conn = established()
    rreq = ddp.UntaggedHeader(opcode=ddp.Opcode.READ_REQUEST, qn=1, msn=1).to_bytes()
    rreq += ddp.ReadRequest(sink_stag=7, sink_to=9, size=0, src_stag=1, src_to=0).to_bytes()
    raw_send(net, raw, sock, mpa.frame_fpdu(ddp.rdma_write(b"", 0x1234, 0))
             + mpa.frame_fpdu(rreq))
    net.run_for(MS)
    # RFC 5040 section 5.3: every Read Request is answered, here with no data
    assert received(raw) == mpa.frame_fpdu(ddp.read_response(b"", 7, 9))
    assert b.qp_state(conn).iwarp_state == "RTS"


def test_send_without_a_receive_buffer_is_out_of_rqe() -> None:
    net, b, raw, sock, conn = established()
    raw_send(net, raw, sock, mpa.frame_fpdu(ddp.send(b"negotiate", 1)))
    net.run_for(MS)
    (cqe,) = records(net, "err_cqe")
    # build_term_codes would say LAYER_DDP|DDP_UNTAGGED_ERR, DDPU_INV_MSN_NOBUF
    assert (cqe["status"], cqe["term_codes_for_status"]) == ("T4_ERR_OUT_OF_RQE", [0x12, 0x02])
    assert [r["event"] for r in records(net, "qp_event")] == ["IB_EVENT_QP_FATAL"]
    assert received(raw) == TERM_LOCAL_CATA
    assert b.qp_state(conn).iwarp_state == "TERMINATE"


def test_posted_buffer_takes_the_send() -> None:
    net, b, raw, sock, conn = established(recvs=(64,))
    raw_send(net, raw, sock, mpa.frame_fpdu(ddp.send(b"hello", 1)))
    net.run_for(MS)
    assert b.core.completions(conn) == [("SUCCESS", b"hello")]
    assert received(raw) == b""
    raw_send(net, raw, sock, mpa.frame_fpdu(ddp.send(b"again", 2)))
    net.run_for(MS)
    assert [r["status"] for r in records(net, "err_cqe")] == ["T4_ERR_OUT_OF_RQE"]


@pytest.mark.parametrize(("ulpdu", "status", "codes"), [
    (ddp.UntaggedHeader(opcode=3, qn=0, msn=1, ddp_version=2).to_bytes() + b"x",
     "T4_ERR_DDP_VERSION", [0x12, 0x06]),
    (ddp.TaggedHeader(opcode=0, stag=1, to=0, ddp_version=0).to_bytes() + b"x",
     "T4_ERR_DDP_VERSION", [0x11, 0x04]),
    (ddp.UntaggedHeader(opcode=3, qn=0, msn=1, rdmap_version=2).to_bytes() + b"x",
     "T4_ERR_RDMA_VERSION", [0x02, 0x05]),
], ids=["ddp-untagged", "ddp-tagged", "rdmap"])
def test_version_not_1_is_a_fatal_error(ulpdu: bytes, status: str, codes: list[int]) -> None:
    net, b, raw, sock, conn = established(recvs=(64,))
    raw_send(net, raw, sock, mpa.frame_fpdu(ulpdu))
    net.run_for(MS)
    (cqe,) = records(net, "err_cqe")
    assert (cqe["status"], cqe["term_codes_for_status"]) == (status, codes)
    assert received(raw) == TERM_LOCAL_CATA
    assert b.qp_state(conn).iwarp_state == "TERMINATE"


def test_bad_crc_is_an_mpa_error() -> None:
    net, _, raw, sock, _ = established(recvs=(64,))
    raw_send(net, raw, sock, mpa.frame_fpdu(ddp.send(b"x", 1), crc=0xBAD))
    net.run_for(MS)
    (cqe,) = records(net, "err_cqe")
    assert (cqe["status"], cqe["term_codes_for_status"]) == ("T4_ERR_CRC", [0x23, 0x02])


def test_received_terminate_aborts_without_a_terminate_back() -> None:
    net, b, raw, sock, conn = established()
    raw_send(net, raw, sock, mpa.frame_fpdu(ddp.terminate(1, 2, 2)))
    net.run_for(MS)
    # terminate(): QP to TERMINATE (internal, send_term 0), c4iw_ep_disconnect(abrupt=1)
    assert received(raw) == b""
    core = raw.core
    assert isinstance(core, RawPeer)
    assert core.socks("reset") == [sock]
    assert upcalls(b)[-1] == ("CLOSE", -104)  # abort_rpl: close_complete_upcall -ECONNRESET
    assert ("warn", "terminate", f"TERM received tid {conn} qpid {conn}") \
        in kernel_log(net, "b")


def test_post_send_is_framed_with_crc_and_msn_from_1() -> None:
    net, b, raw, _, conn = established()
    b.core.post_send(conn, b"ping", now_ns=net.now_ns)
    net.run_for(MS)
    assert received(raw) == mpa.frame_fpdu(ddp.send(b"ping", 1))
    with pytest.raises(CmError):
        b.core.post_send(999, b"x", now_ns=net.now_ns)


def test_build_term_codes_follows_qp_c() -> None:
    cqe = fpdu_rx.ErrCqe
    assert fpdu_rx.build_term_codes(None) == (0x00, 0)
    assert fpdu_rx.build_term_codes(cqe(fpdu_rx.T4_ERR_STAG, 0)) == (0x01, 0x00)
    assert fpdu_rx.build_term_codes(cqe(fpdu_rx.T4_ERR_STAG, 4)) == (0x02, 0x09)
    assert fpdu_rx.build_term_codes(cqe(fpdu_rx.T4_ERR_OUT_OF_RQE, 3)) == (0x12, 0x02)
    assert fpdu_rx.build_term_codes(cqe(fpdu_rx.T4_ERR_PDU_LEN_ERR, 3)) == (0x12, 0x05)
    assert fpdu_rx.build_term_codes(cqe(fpdu_rx.T4_ERR_DDP_QUEUE_NUM, 3)) == (0x12, 0x01)
    assert fpdu_rx.build_term_codes(cqe(fpdu_rx.T4_ERR_MSN_RANGE, 3)) == (0x12, 0x03)
    assert fpdu_rx.build_term_codes(cqe(fpdu_rx.T4_ERR_OPCODE, 9)) == (0x02, 0x06)


@pytest.mark.tshark
def test_tshark_reads_the_terminate_as_rdmap_local_catastrophic(tmp_path: Path) -> None:
    if shutil.which("tshark") is None:
        pytest.fail("tshark is required (tools/test.sh installs it)")
    net, _, raw, sock, _ = established()
    raw_send(net, raw, sock, mpa.frame_fpdu(ddp.send(b"x", 1)))
    net.run_for(MS)
    cap = tmp_path / "term.pcapng"
    net.write_pcapng(cap)
    out = subprocess.run(
        ["tshark", "-r", str(cap), "-o", "tcp.try_heuristic_first:TRUE", "--enable-heuristic",
         "iwarp_mpa_tcp", "-T", "fields", "-E", "occurrence=f", "-Y",
         "iwarp_rdma.opcode == 7", "-e", "iwarp_rdma.term_layer",
         "-e", "iwarp_rdma.term_etype_rdma", "-e", "iwarp_rdma.term_errcode",
         "-e", "iwarp_ddp.qn", "-e", "iwarp_ddp.msn"],
        capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["0x00\t0x00\t0x00\t2\t1"]


def test_send_in_two_segments_fills_one_buffer() -> None:
    net, b, raw, sock, conn = established(recvs=(16, 16))
    raw_send(net, raw, sock, mpa.frame_fpdu(ddp.send(b"abcd", 1, 0, last=False))
             + mpa.frame_fpdu(ddp.send(b"efgh", 1, 4)))
    net.run_for(MS)
    assert b.core.completions(conn) == [("SUCCESS", b"abcdefgh")]
    raw_send(net, raw, sock, mpa.frame_fpdu(ddp.send(b"x", 2, 3)))
    net.run_for(MS)
    # RFC 5041 section 7.2: a wrong MO; build_term_codes names DDPU_INV_MO
    (cqe,) = records(net, "err_cqe")
    assert (cqe["status"], cqe["term_codes_for_status"]) == ("T4_ERR_MO", [0x12, 0x04])
