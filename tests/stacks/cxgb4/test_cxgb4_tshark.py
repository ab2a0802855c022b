"""tshark decodes what the cxgb4 model puts on the wire as iWARP: MPA v2 and v1
requests and replies, a reject, the read and write RTRs of build_rtr_msg, the firmware's
Read Response and the RTR-mismatch Terminate, with every CRC good and nothing malformed.
The expected values are the fields of the frames as cm.c builds them."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.cxgb4_lab import PORT, cxgb4, make_net

from mpa_emu.capture.tshark import Tshark
from mpa_emu.net.policy import Reject

pytestmark = pytest.mark.tshark

MS = 1_000_000
CLIENT_PORTS = range(40001, 40006)
Rows = dict[int, list[dict[str, str]]]
FIELDS = ["tcp.srcport", "tcp.dstport", "iwarp_mpa.key.req", "iwarp_mpa.key.rep",
          "iwarp_mpa.crc_flag", "iwarp_mpa.rej_flag", "iwarp_mpa.res", "iwarp_mpa.rev",
          "iwarp_mpa.pdlength", "iwarp_mpa.privatedata", "iwarp_ddp.tagged_flag",
          "iwarp_ddp.stag", "iwarp_ddp.tagged_offset", "iwarp_ddp.qn", "iwarp_ddp.msn",
          "iwarp_rdma.opcode", "iwarp_rdma.sinkstag", "iwarp_rdma.sinkto",
          "iwarp_rdma.rdmardsz", "iwarp_rdma.srcstag", "iwarp_rdma.srcto",
          "iwarp_rdma.term_layer", "iwarp_rdma.term_etype_llp", "iwarp_rdma.term_errcode"]


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    net = make_net()
    a = cxgb4(net, "a", "192.0.2.1")
    b = cxgb4(net, "b", "192.0.2.2")
    w = cxgb4(net, "w", "192.0.2.3", {"p2p_type": 0})
    x = cxgb4(net, "x", "192.0.2.4", {"p2p_type": 0})
    v = cxgb4(net, "v", "192.0.2.5", {"mpa_rev": 1})
    b.listen(PORT)
    b.listen(PORT + 1, policy=Reject(b"go away"))
    x.listen(PORT + 2)
    v.listen(PORT + 3)
    a.connect("192.0.2.2", PORT, private_data=b"hello", ird=4, ord=8, local_port=40001)
    a.connect("192.0.2.2", PORT + 1, ird=4, ord=8, local_port=40002)
    w.connect("192.0.2.2", PORT, ird=2, ord=2, local_port=40003)  # RTR mismatch
    w.connect("192.0.2.4", PORT + 2, ird=2, ord=2, local_port=40004)  # write RTR
    a.connect("192.0.2.5", PORT + 3, ird=2, ord=2, local_port=40005)  # v1 retry
    net.run_for(20 * MS)
    path = tmp_path_factory.mktemp("cxgb4") / "cxgb4.pcapng"
    net.write_pcapng(path)
    return path


@pytest.fixture(scope="module")
def rows(capture: Path) -> Rows:
    out: Rows = {}
    for row in Tshark().fields(capture, FIELDS, "iwarp_mpa"):
        flat = {k: ",".join(v) for k, v in row.items()}
        src, dst = int(flat["tcp.srcport"]), int(flat["tcp.dstport"])
        port = src if src in CLIENT_PORTS else dst
        out.setdefault(port, []).append(flat)
    return out


def _has(row: dict[str, str], **expected: str) -> None:
    got = {k: row.get(k.replace("__", ".")) for k in expected}
    assert got == expected


def test_v2_accept_with_the_read_rtr_and_its_response(rows: Rows) -> None:
    req, rep, rtr, resp = rows[40001]
    _has(req, iwarp_mpa__crc_flag="1", iwarp_mpa__rej_flag="0", iwarp_mpa__res="0x10",
         iwarp_mpa__rev="2", iwarp_mpa__pdlength="9",
         iwarp_mpa__privatedata="80044008" + b"hello".hex())
    _has(rep, iwarp_mpa__rev="2", iwarp_mpa__pdlength="4", iwarp_mpa__privatedata="80084004")
    _has(rtr, iwarp_ddp__tagged_flag="0", iwarp_ddp__qn="1", iwarp_ddp__msn="1",
         iwarp_rdma__opcode="0x01", iwarp_rdma__sinkstag="0x00000001",
         iwarp_rdma__sinkto="0x0000000000000001", iwarp_rdma__rdmardsz="0",
         iwarp_rdma__srcstag="0x00000001", iwarp_rdma__srcto="0x0000000000000001")
    _has(resp, iwarp_ddp__tagged_flag="1", iwarp_ddp__stag="0x00000001",
         iwarp_ddp__tagged_offset="0x0000000000000001", iwarp_rdma__opcode="0x02")


def test_v2_reject_with_private_data(rows: Rows) -> None:
    _req, rej = rows[40002]
    _has(rej, iwarp_mpa__rej_flag="1", iwarp_mpa__crc_flag="0", iwarp_mpa__res="0x10",
         iwarp_mpa__rev="2", iwarp_mpa__pdlength="11",
         iwarp_mpa__privatedata="80044008" + b"go away".hex())


def test_rtr_mismatch_terminate(rows: Rows) -> None:
    req, rep, term = rows[40003]
    _has(req, iwarp_mpa__privatedata="80028002")  # A | 2, C | 2
    _has(rep, iwarp_mpa__privatedata="80024002")  # the responder's local type: D
    # LAYER_MPA | DDP_LLP, MPA_NOMATCH_RTR on QN 2
    _has(term, iwarp_ddp__qn="2", iwarp_ddp__msn="1", iwarp_rdma__opcode="0x07",
         iwarp_rdma__term_layer="0x02", iwarp_rdma__term_etype_llp="0x03",
         iwarp_rdma__term_errcode="0x07")


def test_write_rtr(rows: Rows) -> None:
    _req, _rep, rtr = rows[40004]
    _has(rtr, iwarp_ddp__tagged_flag="1", iwarp_ddp__stag="0x00000001",
         iwarp_ddp__tagged_offset="0x0000000000000001", iwarp_rdma__opcode="0x00")


def test_v1_retry_request_and_reply(rows: Rows) -> None:
    v1 = [r for r in rows[40005] if r.get("iwarp_mpa.rev") == "1"]
    req, rep = v1
    _has(req, iwarp_mpa__res="0x00", iwarp_mpa__pdlength="0", iwarp_mpa__crc_flag="1")
    assert req.get("iwarp_mpa.key.req") and rep.get("iwarp_mpa.key.rep")


def test_tshark_finds_nothing_wrong(capture: Path) -> None:
    judge = Tshark()
    assert judge.problems(capture) == []
    verdicts = judge.crc_verdicts(capture)
    assert len(verdicts) == 6  # read RTR + response, Terminate, write RTR, v1 read RTR + resp
    assert all(v.good for v in verdicts)
