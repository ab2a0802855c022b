"""Emulating the upper protocols as far as their connection goes: private data by format
in scenarios and the nvme-target listener policy, which decides as nvmet-rdma's
nvmet_rdma_parse_cm_connect_req does (plus the target limits given), on every pair of
registered stacks. Expected bytes are struct nvme_rdma_cm_rej / _rep as nvme-rdma.h lays
them out, written here by hand."""

from __future__ import annotations

import errno
import itertools
import struct
from pathlib import Path

import pytest

from mpa_emu.scenario import ScenarioError, loads, run_scenario
from mpa_emu.stacks import STACKS
from mpa_emu.ulp.upper.formats import encode_private_data
from mpa_emu.ulp.upper.nvme_target import TargetLimits, decide
from mpa_emu.views.explanation import explain_connection
from mpa_emu.views.inspection import inspect_capture

EXAMPLE = Path(__file__).resolve().parents[2] / "mpa_emu" / "examples" / \
    "nvme_queue_too_big.toml"


def nvme_req(qid: int, hrqsize: int, hsqsize: int, recfmt: int = 0) -> bytes:
    return struct.pack("<HHHH", recfmt, qid, hrqsize, hsqsize) + bytes(24)


def test_decide_follows_nvmet_rdma_in_its_order() -> None:
    assert decide(b"").private_data == struct.pack("<HH", 0, 0x01)  # INVALID_LEN
    assert decide(nvme_req(1, 32, 31, recfmt=1)).status == 0x02  # INVALID_RECFMT
    # Admin queue: hsqsize + 1 > NVME_AQ_DEPTH (32).
    assert decide(nvme_req(0, 32, 32)).status == 0x04
    ok = decide(nvme_req(0, 32, 31))
    assert ok.accept and ok.private_data == struct.pack("<HH", 0, 32) + bytes(28)
    # nvmet-rdma does not limit an I/O queue at connect time.
    assert decide(nvme_req(1, 1024, 1023)).accept
    limited = TargetLimits(max_queue_size=128, max_qid=4)
    assert decide(nvme_req(1, 1024, 1023), limited).status == 0x04
    assert decide(nvme_req(1, 1024, 127), limited).status == 0x05  # HRQSIZE
    assert decide(nvme_req(5, 128, 127), limited).status == 0x03  # QID
    assert decide(nvme_req(1, 128, 127), limited).private_data[:4] == \
        struct.pack("<HH", 0, 128)


def test_private_data_formats_are_the_specification_bytes() -> None:
    assert encode_private_data({"nvme": {"qid": 1, "hrqsize": 128, "hsqsize": 127}}) == \
        nvme_req(1, 128, 127)
    assert encode_private_data({"nvme_reject": {"status": "INVALID_HSQSIZE"}}) == \
        b"\x00\x00\x04\x00"
    assert encode_private_data({"smbd": {"ird": 16, "ord": 1}}) == struct.pack(">II", 16, 1)
    assert encode_private_data({"iser": {}}) == bytes([0xC0, 0, 0, 0])
    assert encode_private_data({"rpcrdma": {"send_size": 4096, "recv_size": 1024}}) == \
        bytes.fromhex("f6ab0e18") + bytes([1, 0, 3, 0])


@pytest.mark.parametrize(("spec", "message"), [
    ('{ nvme = { qid = 70000 } }', "qid: 70000 out of range"),
    ('{ nvme = { sq = 1 } }', "unknown field 'sq'"),
    ('{ nvme = {}, iser = {} }', "exactly one"),
    ('{ smb = {} }', "format 'smb' unknown"),
    ('{ nvme_reject = { status = "BUSY" } }', "unknown name 'BUSY'"),
    ('{ rpcrdma = { recv_size = 1500 } }', "not a multiple of 1024"),
])
def test_bad_formats_are_one_line_scenario_errors(spec: str, message: str) -> None:
    text = ('[[host]]\nname = "a"\naddress = "192.0.2.1"\n[[host]]\nname = "b"\n'
            'address = "192.0.2.2"\n[[listen]]\nhost = "b"\nport = 4420\n[[connect]]\n'
            f'from = "a"\nto = "b"\nport = 4420\nprivate_data = {spec}\n')
    with pytest.raises(ScenarioError) as info:
        loads(text)
    assert message in str(info.value) and "\n" not in str(info.value)


def _with_stacks(initiator: str, responder: str) -> str:
    text = EXAMPLE.read_text()
    for host, stack in (("host", initiator), ("target", responder)):
        extra = f'stack = "{stack}"\n'
        if stack == "siw":  # irdma refuses a request or reply without P2P
            extra += "[host.params]\npeer_to_peer = true\n"
        if stack == "qedr":
            # qed_iwarp_mpa_received keeps every RTR type both sides offer and
            # qed_iwarp_mpa_v2_set_private writes them all into the reply (RFC 6581
            # section 5 wants one): offering only the Read RTR keeps the reply to one.
            extra += "[host.params]\nrtr_type = 4\n"
        head, sep, rest = text.partition(f'name = "{host}"\n')
        line, nl, tail = rest.partition("\n")
        text = head + sep + line + nl + extra + tail
    # The initiator's CONNECT_REPLY status for an MPA reject is its stack's fact
    # (siw_proc_mpareply and erdma_proc_mpareply answer with -ECONNRESET).
    status = errno.errorcode[-STACKS[initiator].statuses.reject]
    return text.replace('status = "-ECONNREFUSED"', f'status = "-{status}"')


def _one_dialect(initiator: str, responder: str) -> bool:
    """The two stacks frame MPA alike (their framing fact's revision: RFC 5044/6581's 1
    or 2 on both sides, or the same private revision, erdma's 129): otherwise the
    responder refuses the request and no application hears of it."""
    revs = [STACKS[n].peer_framing(STACKS[n].defaults()).rev for n in (initiator, responder)]
    return revs[0] == revs[1] or max(revs) <= 2


@pytest.mark.parametrize(("initiator", "responder"),
                         [pair for pair in itertools.product(sorted(STACKS), sorted(STACKS))
                          if _one_dialect(*pair)])
def test_nvme_reject_on_every_pair_of_stacks(initiator: str, responder: str,
                                             tmp_path: Path) -> None:
    run = run_scenario(loads(_with_stacks(initiator, responder), "nvme.toml"))
    assert run.ok, [e.text("nvme.toml") for e in run.failures()]
    pcap = tmp_path / "nvme.pcapng"
    run.net.write_pcapng(pcap)
    report = inspect_capture(pcap)
    causes = [explain_connection(c).cause for c in report.connections]
    assert causes == ["nvme-connect-rejected", "ok"]
    big = report.connections[0]
    assert big.ulp is not None and big.ulp.negotiated["reject_status"] == 4
    # The note names the status explain gives the initiator (from its fingerprint).
    e = explain_connection(big)
    if not e.initiator_event:
        # A siw initiator without P2P fingerprints as linux-userspace: no rdma_cm status
        # is asserted for it, only what an rdma_cm host would see.
        assert e.stacks["client"] == "linux-userspace"
        assert any(n.startswith("application: no rdma_cm event is known")
                   and "nvme status 4" in n for n in e.notes), e.notes
        return
    assert any(f"RDMA_CM_EVENT_REJECTED status {e.initiator_status} (" in n
               and f"Connect rejected: status {e.initiator_status} (" in n for n in e.notes)


@pytest.mark.parametrize(("initiator", "responder", "nvme"), [
    ("irdma", "irdma", True), ("cxgb4", "siw(peer_to_peer=1)", True),
    ("siw(peer_to_peer=1)", "cxgb4", True),
    # siw's default request has no P2P: irdma refuses it before any application hears it.
    ("siw", "irdma", False),
])
def test_matrix_cell_shows_the_nvme_reject(initiator: str, responder: str, nvme: bool,
                                           tmp_path: Path) -> None:
    from mpa_emu.matrix import parse_side, run_cell
    from mpa_emu.matrix.cell import CellSpec

    capture = tmp_path / "cell.pcapng"
    cell = run_cell(CellSpec(parse_side(initiator), parse_side(responder),
                             "nvme-queue-too-big", 0, str(capture)))
    assert cell.initiator_event == "RDMA_CM_EVENT_REJECTED"
    (conn,) = inspect_capture(capture).connections
    cause = explain_connection(conn).cause
    if nvme:
        # struct nvme_rdma_cm_rej: recfmt 0, sts 4 (+ the 4-byte RFC 6581 block).
        assert cell.rejected_pd == 4 + 4 and cause == "nvme-connect-rejected"
    else:
        assert cell.responder_events == [] and cause != "nvme-connect-rejected"


def test_python_api_as_the_nvme_page_shows() -> None:
    from mpa_emu import Network
    from mpa_emu.net import NvmeTarget
    from mpa_emu.ulp.upper.formats import private_data

    net = Network(seed=1)
    host, target = net.add_host("host", "192.0.2.1"), net.add_host("target", "192.0.2.2")
    target.listen(4420, policy=NvmeTarget(max_queue_size=128))
    host.connect("192.0.2.2", 4420,
                 private_data=private_data(nvme={"qid": 1, "hrqsize": 1024, "hsqsize": 1023}))
    net.run()
    assert [ev.name for ev in host.cm_events] == ["RDMA_CM_EVENT_REJECTED"]
    (ev,) = host.cm_events
    # The rdma_cm event's private data is the reject's: struct nvme_rdma_cm_rej, sts 4.
    assert ev.private_data[:4] == struct.pack("<HH", 0, 4)
