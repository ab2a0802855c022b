"""erdma's kernel map: the entry points iw_cm calls and the handlers that run every
connection are modelled, never plumbing; the list is erdma_cm.c's at the pinned
release."""

from __future__ import annotations

import json

import pytest

from mpa_emu.cli import main
from mpa_emu.stacks import STACKS
from mpa_emu.stacks.base import MODELLED

# struct iw_cm_verbs' provider calls (erdma_connect, erdma_accept, erdma_reject,
# erdma_create_listen, erdma_destroy_listen) and the functions every connection passes.
MUST_MODEL = {"erdma_connect", "erdma_accept", "erdma_reject", "erdma_create_listen",
              "erdma_destroy_listen", "erdma_cm_work_handler", "erdma_proc_mpareq",
              "erdma_proc_mpareply", "erdma_recv_mpa_rr", "erdma_send_mpareqrep",
              "erdma_cm_upcall", "erdma_qp_cm_drop", "erdma_accept_newconn",
              "erdma_newconn_connected", "erdma_cm_llp_state_change",
              "erdma_cm_llp_data_ready", "erdma_cm_queue_work"}


def test_every_connection_runs_through_modelled_functions() -> None:
    kmap = STACKS["erdma"].kernel_map
    modelled = {e.function for e in kmap.entries if e.status == MODELLED}
    assert modelled >= MUST_MODEL
    assert len(kmap.functions) == 45  # erdma_cm.c at the pinned release
    assert kmap.source == "drivers/infiniband/hw/erdma/erdma_cm.c"


def test_cli_json_and_one_function(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernel-map", "--stack", "erdma", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 45 and {r["stack"] for r in rows} == {"erdma"}
    assert main(["kernel-map", "--stack", "erdma", "recv_mpa_rr"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].split()[1] == "erdma_recv_mpa_rr"
