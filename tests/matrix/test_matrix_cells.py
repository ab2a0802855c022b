"""Matrix cells between real stack models; each expectation is read from the kernel
sources named beside it, not from the emulator's output."""

from __future__ import annotations

import errno
import json
import subprocess
import sys
from pathlib import Path

import pytest

from mpa_emu.matrix import default_sides, parse_side, plan, run_cell, run_matrix, select
from mpa_emu.matrix.cell import CellResult, CellSpec
from mpa_emu.matrix.sides import make_side


def _cell(ini: str, resp: str, scenario: str, tmp_path: Path | None = None) -> CellResult:
    capture = str(tmp_path / "cell.pcapng") if tmp_path is not None else None
    return run_cell(CellSpec(parse_side(ini), parse_side(resp), scenario, 0, capture))


def test_irdma_to_irdma_connect_is_established_on_both_sides() -> None:
    cell = _cell("irdma", "irdma", "connect")
    # irdma_send_cm_event: CONNECT_REPLY status 0 -> cma_iw_handler: ESTABLISHED.
    assert cell.initiator_event == "RDMA_CM_EVENT_ESTABLISHED"
    assert cell.initiator_status == 0
    # iw_conn_req_handler: CONNECT_REQUEST; then the responder's ESTABLISHED upcall.
    assert cell.responder_events == ["RDMA_CM_EVENT_CONNECT_REQUEST",
                                     "RDMA_CM_EVENT_ESTABLISHED"]
    # irdma offers both RTRs and, as responder, picks the zero-length Read
    # (irdma_negotiate_mpa_v2_ird_ord); the initiator then sends it.
    assert cell.rtr == "read"


def test_reject_reaches_the_initiator_as_rejected_econnrefused() -> None:
    cell = _cell("irdma", "irdma", "reject-pd255")
    # irdma_process_mpa_reply ... irdma_send_cm_event(CONNECT_REPLY, -ECONNREFUSED);
    # cma_iw_handler maps -ECONNREFUSED to RDMA_CM_EVENT_REJECTED.
    assert cell.initiator_event == "RDMA_CM_EVENT_REJECTED"
    assert cell.initiator_status == -errno.ECONNREFUSED
    # The responder's application rejected: it heard only the request.
    assert cell.responder_events == ["RDMA_CM_EVENT_CONNECT_REQUEST"]
    # 255 bytes of private data and the 4-byte RFC 6581 block (irdma_send_mpa_reject).
    assert cell.rejected_pd == 255 + 4


def test_siw_without_p2p_is_reset_by_an_irdma_responder() -> None:
    cell = _cell("siw", "irdma", "connect")
    # siw's peer_to_peer is off by default (siw_main.c), so its v2 request has no P2P;
    # irdma_negotiate_mpa_v2_ird_ord refuses it (-EOPNOTSUPP) and the node is reset.
    # siw then reports CONNECT_REPLY -ECONNRESET (siw_cm_work_handler, PEER_CLOSE) and
    # cma_iw_handler maps -ECONNRESET to REJECTED.
    assert cell.initiator_event == "RDMA_CM_EVENT_REJECTED"
    assert cell.initiator_status == -errno.ECONNRESET
    assert cell.responder_events == []


def test_a_side_with_parameters_is_labelled_as_the_kernel_names_them() -> None:
    side = make_side("siw", {"peer_to_peer": True})
    assert side.label == "siw(peer_to_peer=1)"
    assert make_side("siw", {"peer_to_peer": False}).label == "siw"
    with pytest.raises(ValueError, match="peer_to_peer"):
        parse_side("siw(peer_to_peer=7)")
    with pytest.raises(ValueError, match="unknown stack"):
        parse_side("mlx5")


def test_an_overlay_a_stack_cannot_express_is_not_applicable() -> None:
    cell = _cell("irdma", "irdma", "crc-mismatch")
    assert cell.status == "n/a"
    assert "irdma" in cell.reason


def test_cells_write_captures_tshark_reads(tmp_path: Path) -> None:
    cell = _cell("irdma", "siw", "connect", tmp_path)
    assert cell.capture is not None and Path(cell.capture).stat().st_size > 0
    assert cell.frames > 0


def test_results_are_the_same_serially_and_on_two_processes() -> None:
    sides = [make_side("irdma"), make_side("siw")]
    specs = plan(sides, select(["connect", "reject-pd0", "graceful-close"]))
    serial = [c.to_json() for c in run_matrix(specs, jobs=1)]
    parallel = [c.to_json() for c in run_matrix(specs, jobs=2)]
    assert serial == parallel


def test_default_sides_hold_every_registered_stack() -> None:
    stacks = {side.stack for side in default_sides()}
    assert {"irdma", "siw"} <= stacks


def test_cli_json_follows_the_contract(tmp_path: Path) -> None:
    out = tmp_path / "m.json"
    proc = subprocess.run(
        [sys.executable, "-m", "mpa_emu", "matrix", "--stacks", "irdma,siw", "--scenario",
         "connect", "--captures", str(tmp_path / "caps"), "--json", str(out)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    cells = doc["cells"]
    assert len(cells) == 9  # 3 sides (irdma, siw, siw(peer_to_peer=1)) squared
    first = cells[0]
    assert (first["initiator"], first["responder"], first["scenario"]) == \
        ("irdma", "irdma", "connect")
    assert first["initiator_event"] == "RDMA_CM_EVENT_ESTABLISHED"
    assert isinstance(first["responder_events"], list)
    assert first["rtr"] in ("write", "read", "send", None)
    assert Path(first["capture"]).exists()
    assert "initiator \\ responder" in proc.stdout


def test_cli_refuses_an_unknown_scenario_in_one_line() -> None:
    proc = subprocess.run([sys.executable, "-m", "mpa_emu", "matrix", "--scenario", "nope"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "unknown scenario 'nope'" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.tshark
def test_tshark_decodes_a_cells_capture_as_iwarp(tmp_path: Path) -> None:
    import shutil

    if shutil.which("tshark") is None:
        pytest.fail("tshark is required (tools/test.sh installs it)")
    cell = _cell("siw(peer_to_peer=1)", "irdma", "connect", tmp_path)
    assert cell.capture is not None
    proc = subprocess.run(
        ["tshark", "-r", cell.capture, "-o", "tcp.try_heuristic_first:TRUE",
         "--enable-heuristic", "iwarp_mpa_tcp", "-T", "fields", "-e", "frame.number",
         "-e", "iwarp_mpa.key.req", "-e", "iwarp_mpa.key.rep", "-e", "iwarp_rdma.opcode"],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = [line.split("\t") for line in proc.stdout.splitlines()]
    assert any(row[1] for row in rows), "no MPA request decoded"
    assert any(row[2] for row in rows), "no MPA reply decoded"
    # The RTR irdma picks as responder is the zero-length Read (opcode 1, RFC 5040).
    assert any(row[3] == "0x01" for row in rows), proc.stdout


def test_a_connect_the_driver_refuses_is_an_error_return_with_no_event() -> None:
    cell = _cell("siw", "irdma", "ird-ord-3fff")
    # siw_connect: "if (params->ird > sdev->attrs.max_ird || params->ord > ...)
    # return -ENOMEM": rdma_connect() returns the error, no event follows.
    assert cell.status == "ran"
    assert cell.initiator_event is None
    assert cell.initiator_status == -errno.ENOMEM
    assert cell.initiator_failures and "ENOMEM" in cell.initiator_failures[0]
    assert cell.frames == 0


def test_cxgb4_rejects_a_default_cxgb4_with_p2p_off_as_an_rtr_mismatch() -> None:
    cell = _cell("cxgb4", "cxgb4(peer2peer=0)", "connect")
    # process_mpa_reply: the initiator (peer2peer=1) needs an RTR type in the reply;
    # a responder without P2P offers none, so the initiator sends a Terminate and
    # reports CONNECT_REPLY -ENOMEM ("RTR mismatch"); cma_iw_handler: CONNECT_ERROR.
    assert cell.initiator_event == "RDMA_CM_EVENT_CONNECT_ERROR"
    assert cell.initiator_status == -errno.ENOMEM
    assert cell.terminate is not None
