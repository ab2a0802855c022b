"""tshark judges every frame type the layers build: captures over IPv4, IPv6 and 802.1Q
with v1/v2 requests and replies, a v2 reject with private data and FIN, the zero-length
READ and WRITE RTRs, a Send and a Terminate. tshark must read the same field values,
call every CRC "Good CRC32" and report nothing of severity Error or Malformed.

tshark is a real dependency here: without it these tests fail (TsharkNotFound)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.golden_ddp import SEND_PAYLOAD
from scapy.packet import Packet
from scapy.utils import wrpcap

from mpa_emu.capture.tshark import Tshark
from mpa_emu.frames import (
    MPAFPDU,
    DDPTagged,
    DDPUntagged,
    MPAReply,
    MPARequest,
    RDMAPReadRequest,
    RDMAPTerminate,
)
from mpa_emu.frames.conversation import Conversation
from mpa_emu.wire import ddp

pytestmark = pytest.mark.tshark

KEY_REQ_HEX = "4d504120494420526571204672616d65"
KEY_REP_HEX = "4d504120494420526570204672616d65"
CHECKSUMS = ("-o", "tcp.check_checksum:TRUE", "-o", "ip.check_checksum:TRUE")


def _v2_request() -> MPARequest:
    return MPARequest(flags="CS", rev=2, ird=16, ord=16, write0=1, read0=1,
                      private_data=b"hello from initiator")


def _accept_read0(conv: Conversation) -> None:
    conv.handshake()
    conv.data(True, bytes(_v2_request()))
    conv.data(False, bytes(MPAReply(flags="CS", rev=2, ird=16, ord=16, read0=1,
                                    private_data=b"welcome")))
    conv.data(True, bytes(MPAFPDU(ulpdu=DDPUntagged(opcode="Read Request", qn=1, msn=1) /
                                  RDMAPReadRequest())))
    send = DDPUntagged(opcode="Send", qn=0, msn=1) / SEND_PAYLOAD
    conv.data(False, bytes(MPAFPDU(ulpdu=send)))
    conv.data(False, bytes(MPAFPDU(ulpdu=DDPUntagged(opcode="Terminate", qn=2, msn=1) /
                                   RDMAPTerminate(layer="DDP", etype=2, error_code=1, M=1, D=1,
                                                  ddp_segment_length=59,
                                                  ddp_header=bytes(send)[:18]))))
    conv.close()


def _accept_write0(conv: Conversation) -> None:
    conv.handshake()
    conv.data(True, bytes(_v2_request()))
    conv.data(False, bytes(MPAReply(flags="CS", rev=2, ird=4, ord=8, write0=1)))
    conv.data(True, bytes(MPAFPDU(ulpdu=DDPTagged(opcode="Write", stag=0, to=0))))
    conv.close()


def _v1_accept(conv: Conversation) -> None:
    conv.handshake()
    conv.data(True, bytes(MPARequest(flags="C", rev=1)))
    conv.data(False, bytes(MPAReply(flags="C", rev=1)))
    conv.data(True, ddp.fpdu(ddp.read_rtr()))
    conv.data(False, ddp.fpdu(ddp.send(SEND_PAYLOAD, msn=1)))
    conv.close()


def _v2_reject(conv: Conversation) -> None:
    conv.handshake()
    conv.data(True, bytes(_v2_request()))
    # irdma_send_mpa_reject: the reject goes out with ACK|FIN in one segment.
    conv.segment(False, "FPA", bytes(MPAReply(flags="CRS", rev=2, ird=16, ord=16, read0=1,
                                              private_data=b"it's not you")))
    conv.segment(True, "FA")
    conv.segment(False, "A")


SCENARIOS = {40001: _accept_read0, 40002: _accept_write0, 40003: _v1_accept, 40004: _v2_reject}


def _conversation(envelope: str, port: int) -> Conversation:
    if envelope == "ipv6":
        conv = Conversation.ipv6()
    else:
        conv = Conversation(vlan=100 if envelope == "dot1q" else None)
    conv.initiator.port = port
    return conv


def _capture(envelope: str, path: Path) -> list[Packet]:
    packets: list[Packet] = []
    for port, scenario in SCENARIOS.items():
        conv = _conversation(envelope, port)
        scenario(conv)
        packets += conv.packets
    for i, pkt in enumerate(packets):
        pkt.time = i * 0.001
    wrpcap(str(path), packets)
    return packets


@pytest.fixture(scope="module")
def judge() -> Tshark:
    return Tshark(extra_options=CHECKSUMS)


@pytest.fixture(scope="module", params=["ipv4", "ipv6", "dot1q"])
def capture(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("judge") / f"{request.param}.pcap"
    _capture(request.param, path)
    return path


FIELDS = [
    "tcp.srcport", "tcp.dstport", "tcp.flags.fin", "iwarp_mpa.key.req", "iwarp_mpa.key.rep",
    "iwarp_mpa.marker_flag", "iwarp_mpa.crc_flag", "iwarp_mpa.rej_flag", "iwarp_mpa.res",
    "iwarp_mpa.rev", "iwarp_mpa.pdlength", "iwarp_mpa.privatedata", "iwarp_mpa.ulpdulength",
    "iwarp_mpa.pad", "iwarp_ddp.tagged_flag", "iwarp_ddp.last_flag", "iwarp_ddp.dv",
    "iwarp_ddp.stag", "iwarp_ddp.tagged_offset", "iwarp_ddp.qn", "iwarp_ddp.msn",
    "iwarp_ddp.mo", "iwarp_rdma.version", "iwarp_rdma.opcode", "iwarp_rdma.sinkstag",
    "iwarp_rdma.sinkto", "iwarp_rdma.rdmardsz", "iwarp_rdma.srcstag", "iwarp_rdma.srcto",
    "iwarp_rdma.term_layer", "iwarp_rdma.term_etype_ddp",
    "iwarp_rdma.term_errcode_ddp_untagged", "iwarp_rdma.term_hdrct_m", "iwarp_rdma.hdrct_d",
    "iwarp_rdma.hdrct_r", "iwarp_rdma.term_ddp_seg_len", "iwarp_rdma.term_ddp_h",
]


_ROWS: dict[Path, list[dict[str, list[str]]]] = {}


def _mpa_rows(judge: Tshark, capture: Path, port: int) -> list[dict[str, str]]:
    if capture not in _ROWS:  # one tshark run per capture serves every test below
        _ROWS[capture] = judge.fields(capture, FIELDS, "iwarp_mpa")
    rows = [r for r in _ROWS[capture] if str(port) in (r["tcp.srcport"] + r["tcp.dstport"])]
    return [{k: v[0] if len(v) == 1 else ",".join(v) for k, v in r.items()} for r in rows]


def _has(row: dict[str, str], **expected: str) -> None:
    got = {k.replace("__", "."): row.get(k.replace("__", ".")) for k in expected}
    assert got == {k.replace("__", "."): v for k, v in expected.items()}


def test_v2_accept_with_read_rtr_send_and_terminate(judge: Tshark, capture: Path) -> None:
    req, rep, rtr, send, term = _mpa_rows(judge, capture, 40001)
    _has(req, iwarp_mpa__key__req=KEY_REQ_HEX, iwarp_mpa__marker_flag="0",
         iwarp_mpa__crc_flag="1", iwarp_mpa__rej_flag="0", iwarp_mpa__res="0x10",
         iwarp_mpa__rev="2", iwarp_mpa__pdlength="24",
         iwarp_mpa__privatedata="8010c01068656c6c6f2066726f6d20696e69746961746f72")
    _has(rep, iwarp_mpa__key__rep=KEY_REP_HEX, iwarp_mpa__rej_flag="0", iwarp_mpa__rev="2",
         iwarp_mpa__pdlength="11", iwarp_mpa__privatedata="80104010" + b"welcome".hex())
    _has(rtr, iwarp_mpa__ulpdulength="46", iwarp_ddp__tagged_flag="0",
         iwarp_ddp__last_flag="1", iwarp_ddp__dv="1", iwarp_ddp__qn="1", iwarp_ddp__msn="1",
         iwarp_ddp__mo="0", iwarp_rdma__version="1", iwarp_rdma__opcode="0x01",
         iwarp_rdma__sinkstag="0x0000abcd", iwarp_rdma__sinkto="0x0000000000000000",
         iwarp_rdma__rdmardsz="0", iwarp_rdma__srcstag="0x00001234",
         iwarp_rdma__srcto="0x0000000000000000")
    _has(send, iwarp_mpa__ulpdulength="59", iwarp_mpa__pad="000000", iwarp_ddp__qn="0",
         iwarp_ddp__msn="1", iwarp_ddp__mo="0", iwarp_rdma__opcode="0x03")
    _has(term, iwarp_mpa__ulpdulength="42", iwarp_ddp__qn="2", iwarp_rdma__opcode="0x07",
         iwarp_rdma__term_layer="0x01", iwarp_rdma__term_etype_ddp="0x02",
         iwarp_rdma__term_errcode_ddp_untagged="0x01", iwarp_rdma__term_hdrct_m="1",
         iwarp_rdma__hdrct_d="1", iwarp_rdma__hdrct_r="0", iwarp_rdma__term_ddp_seg_len="003b",
         iwarp_rdma__term_ddp_h="414300000000000000000000000100000000")


def test_v2_accept_with_write_rtr(judge: Tshark, capture: Path) -> None:
    _req, rep, rtr = _mpa_rows(judge, capture, 40002)
    _has(rep, iwarp_mpa__privatedata="80048008", iwarp_mpa__pdlength="4")
    _has(rtr, iwarp_mpa__ulpdulength="14", iwarp_ddp__tagged_flag="1",
         iwarp_ddp__stag="0x00000000", iwarp_ddp__tagged_offset="0x0000000000000000",
         iwarp_rdma__opcode="0x00")


def test_v1_request_and_reply(judge: Tshark, capture: Path) -> None:
    req, rep, rtr, send = _mpa_rows(judge, capture, 40003)
    _has(req, iwarp_mpa__key__req=KEY_REQ_HEX, iwarp_mpa__crc_flag="1", iwarp_mpa__res="0x00",
         iwarp_mpa__rev="1", iwarp_mpa__pdlength="0", iwarp_mpa__privatedata=None)
    _has(rep, iwarp_mpa__key__rep=KEY_REP_HEX, iwarp_mpa__rev="1", iwarp_mpa__pdlength="0")
    assert rtr["iwarp_rdma.opcode"] == "0x01" and send["iwarp_rdma.opcode"] == "0x03"


def test_v2_reject_with_private_data_and_fin(judge: Tshark, capture: Path) -> None:
    _req, rej = _mpa_rows(judge, capture, 40004)
    _has(rej, tcp__flags__fin="1", iwarp_mpa__key__rep=KEY_REP_HEX, iwarp_mpa__crc_flag="1",
         iwarp_mpa__rej_flag="1", iwarp_mpa__res="0x10", iwarp_mpa__rev="2",
         iwarp_mpa__pdlength="16",
         iwarp_mpa__privatedata="8010401069742773206e6f7420796f75")


def test_every_crc_is_good(judge: Tshark, capture: Path) -> None:
    verdicts = judge.crc_verdicts(capture)
    assert len(verdicts) == 6  # RTR, Send, Terminate; write RTR; v1: RTR, Send
    assert all(v.good for v in verdicts), [v.text for v in verdicts]
    assert all(v.text.endswith("(Good CRC32)") for v in verdicts)


def test_no_error_or_malformed_anywhere(judge: Tshark, capture: Path) -> None:
    assert judge.problems(capture) == []


def test_expert_infos_are_only_the_known_v2_warnings_and_the_reject_note(
        judge: Tshark, capture: Path) -> None:
    mpa = [e for e in judge.expert(capture) if e.protocol == "IWARP_MPA"]
    by_summary = {e.summary: (e.severity, e.group, e.count) for e in mpa}
    # Three v2 requests, each counted twice by tshark 4.0 (spec wireshark-mpa section 2).
    assert by_summary == {
        "Res field is NOT set to zero as required by RFC 5044": ("Warning", "Request", 6),
        "Rev field is NOT set to one as required by RFC 5044": ("Warning", "Request", 6),
        "Reject bit set by Responder": ("Note", "Response", 2),
    }


def test_summary_lines_name_each_message(judge: Tshark, capture: Path) -> None:
    text = "\n".join(judge.summary(capture, "iwarp_mpa"))
    for what in ("MPA Request Frame", "MPA Reply Frame", "Read Request [last DDP segment]",
                 "Write [last DDP segment]", "Send [last DDP segment]",
                 "Terminate [last DDP segment]"):
        assert what in text
