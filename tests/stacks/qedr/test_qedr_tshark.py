"""tshark decodes what a qedr host puts on the wire as iWARP: the MPA v2 request and
reply with qed_iwarp_mpa_v2_set_private's block, a reject, the firmware's RTRs and Read
Response, between two qedr hosts and between qedr and siw, with every CRC good and no
malformed packet or expert error. The expected values are the fields of the frames as
qed_iwarp.c parameterises them."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.cxgb4_lab import PORT, make_net

from mpa_emu.capture.tshark import Tshark
from mpa_emu.net.policy import Reject

pytestmark = pytest.mark.tshark

MS = 1_000_000
CLIENT_PORTS = range(40001, 40006)
Rows = dict[int, list[dict[str, str]]]
FIELDS = ["tcp.srcport", "tcp.dstport", "iwarp_mpa.key.req", "iwarp_mpa.key.rep",
          "iwarp_mpa.crc_flag", "iwarp_mpa.rej_flag", "iwarp_mpa.res", "iwarp_mpa.rev",
          "iwarp_mpa.pdlength", "iwarp_mpa.privatedata", "iwarp_ddp.tagged_flag",
          "iwarp_ddp.stag", "iwarp_ddp.qn", "iwarp_ddp.msn", "iwarp_rdma.opcode",
          "iwarp_rdma.rdmardsz"]


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    net = make_net()
    a = net.add_host("a", "192.0.2.1", stack="qedr")
    b = net.add_host("b", "192.0.2.2", stack="qedr")
    r = net.add_host("r", "192.0.2.3", stack="qedr", params={"fw_rtr_order": 1})
    s = net.add_host("s", "192.0.2.4", stack="siw", params={"peer_to_peer": True})
    b.listen(PORT)
    b.listen(PORT + 1, policy=Reject(b"go away"))
    s.listen(PORT + 2)
    a.connect("192.0.2.2", PORT, private_data=b"hello", ird=4, ord=8, local_port=40001)
    a.connect("192.0.2.2", PORT + 1, ird=4, ord=8, local_port=40002)
    r.connect("192.0.2.2", PORT, ird=2, ord=2, local_port=40003)  # the Read RTR
    a.connect("192.0.2.4", PORT + 2, ird=2, ord=2, local_port=40004)  # qedr -> siw
    s.connect("192.0.2.2", PORT, ird=2, ord=2, local_port=40005)  # siw -> qedr
    net.run_for(20 * MS)
    path = tmp_path_factory.mktemp("qedr") / "qedr.pcapng"
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


def test_request_reply_and_the_write_rtr(rows: Rows) -> None:
    req, rep, rtr = rows[40001]
    # C, S (0x10 in Res), rev 2, the block ird|P2P|Send 0xc004, ord|Write|Read 0xc008
    _has(req, iwarp_mpa__crc_flag="1", iwarp_mpa__rej_flag="0", iwarp_mpa__res="0x10",
         iwarp_mpa__rev="2", iwarp_mpa__pdlength="9",
         iwarp_mpa__privatedata="c004c008" + b"hello".hex())
    # the responder echoes (IRD 8, ORD 4) and keeps every shared RTR type
    _has(rep, iwarp_mpa__crc_flag="1", iwarp_mpa__rev="2", iwarp_mpa__pdlength="4",
         iwarp_mpa__privatedata="c008c004")
    _has(rtr, iwarp_ddp__tagged_flag="1", iwarp_ddp__stag="0x00000000",
         iwarp_rdma__opcode="0x00")


def test_reject(rows: Rows) -> None:
    _req, rej = rows[40002]
    _has(rej, iwarp_mpa__rej_flag="1", iwarp_mpa__crc_flag="1", iwarp_mpa__res="0x10",
         iwarp_mpa__rev="2", iwarp_mpa__pdlength="11",
         iwarp_mpa__privatedata="c004c008" + b"go away".hex())


def test_read_rtr_and_the_firmware_s_read_response(rows: Rows) -> None:
    _req, _rep, rtr, resp = rows[40003]
    _has(rtr, iwarp_ddp__tagged_flag="0", iwarp_ddp__qn="1", iwarp_ddp__msn="1",
         iwarp_rdma__opcode="0x01", iwarp_rdma__rdmardsz="0")
    _has(resp, iwarp_ddp__tagged_flag="1", iwarp_rdma__opcode="0x02")


def test_qedr_and_siw_both_ways(rows: Rows) -> None:
    assert rows[40004][0].get("iwarp_mpa.key.req") and rows[40004][1].get("iwarp_mpa.key.rep")
    assert rows[40005][0].get("iwarp_mpa.key.req") and rows[40005][1].get("iwarp_mpa.key.rep")


def test_tshark_finds_nothing_wrong(capture: Path) -> None:
    judge = Tshark()
    assert judge.problems(capture) == []
    verdicts = judge.crc_verdicts(capture)
    assert verdicts and all(v.good for v in verdicts)
