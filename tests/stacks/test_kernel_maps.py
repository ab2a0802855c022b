"""Every registered stack's kernel map is complete for each of its source files (qedr has
two: qedr_iw_cm.c and qed_iwarp.c) and true, pinned to a kernel release, and behind
``mpa-emu kernel-map --stack NAME``.

The function lists are data in each map module (read from the kernel source at the
pinned release); irdma's is also checked against the reference's table by
tests/stacks/irdma/test_kernel_map.py.
"""

from __future__ import annotations

import json
import re

import pytest

from mpa_emu.cli import main
from mpa_emu.stacks import STACKS
from mpa_emu.stacks.base import MODELLED, NOT_YET, PLUMBING, KernelMap, MapEntry, resolve
from mpa_emu.stacks.irdma import kernel_map as cm_map

NAMES = list(STACKS)
QED_MUST_MODEL = {"qed_iwarp_connect", "qed_iwarp_tcp_offload", "qed_iwarp_mpa_offload",
                  "qed_iwarp_mpa_received", "qed_iwarp_mpa_reply_arrived",
                  "qed_iwarp_mpa_complete", "qed_iwarp_mpa_v2_set_private",
                  "qed_iwarp_parse_private_data", "qed_iwarp_accept", "qed_iwarp_reject",
                  "qed_iwarp_send_rtr", "qed_iwarp_connect_complete",
                  "qed_iwarp_tcp_connect_unsuccessful", "qed_iwarp_exception_received",
                  "qed_iwarp_qp_in_error", "qed_iwarp_modify_qp", "qed_iwarp_ll2_comp_syn_pkt",
                  "qed_iwarp_create_listen", "qed_iwarp_destroy_listen"}
FILES = [(name, k.file_name) for name in NAMES for k in STACKS[name].kernel_map.files]
"""Every (stack, source file) pair: each file's map is checked on its own."""


def _file(name: str, file_name: str) -> KernelMap:
    (kmap,) = [k for k in STACKS[name].kernel_map.files if k.file_name == file_name]
    return kmap

# The entry points iw_cm calls and the handlers that run a connection: each must be
# modelled, never plumbing (siw_cm.c: siw_connect, siw_accept, siw_reject,
# siw_create_listen, siw_destroy_listen are struct iw_cm_verbs' provider calls;
# siw_cm_work_handler and the llp callbacks run every connection).
SIW_MUST_MODEL = {"siw_connect", "siw_accept", "siw_reject", "siw_create_listen",
                  "siw_destroy_listen", "siw_cm_work_handler", "siw_proc_mpareq",
                  "siw_proc_mpareply", "siw_recv_mpa_rr", "siw_send_mpareqrep",
                  "siw_cm_upcall", "siw_qp_cm_drop", "siw_accept_newconn",
                  "siw_cm_llp_state_change", "siw_cm_llp_data_ready", "siw_cm_queue_work"}


@pytest.mark.parametrize(("name", "file_name"), FILES)
def test_the_map_has_one_entry_per_function_of_its_source(name: str, file_name: str) -> None:
    kmap = _file(name, file_name)
    assert len(kmap.functions) == len(set(kmap.functions)), "a function listed twice"
    assert [e.function for e in kmap.entries] == list(kmap.functions)
    assert len({e.number for e in kmap.entries}) == len(kmap.entries)


@pytest.mark.parametrize(("name", "file_name"), FILES)
def test_every_function_is_modelled_or_says_why_not(name: str, file_name: str) -> None:
    for e in _file(name, file_name).entries:
        assert e.models or e.note, f"{name}: {e.function} has neither a model nor a reason"
        assert e.status in (MODELLED, PLUMBING, NOT_YET), e.function
        if e.status == MODELLED:
            assert e.models, f"{name}: {e.function} is modelled by nothing"


@pytest.mark.parametrize(("name", "file_name"), FILES)
def test_every_model_resolves_to_a_real_object(name: str, file_name: str) -> None:
    for e in _file(name, file_name).entries:
        for path in e.models:
            assert resolve(path) is not None, f"{name}: {e.function} -> {path}"


@pytest.mark.parametrize("name", NAMES)
def test_the_map_is_pinned_to_a_kernel_release(name: str) -> None:
    kmap = STACKS[name].kernel_map
    assert re.fullmatch(r"\d+\.\d+", kmap.kernel_version)
    assert kmap.source.startswith("drivers/infiniband/") and kmap.source.endswith(".c")
    for other in kmap.also:  # one release for every file of a stack
        assert other.kernel_version == kmap.kernel_version
        assert other.source.startswith("drivers/") and other.source.endswith(".c")
        assert other.also == ()
    assert len({k.source for k in kmap.files}) == len(kmap.files)


def test_qedr_maps_qed_iwarp_c_too() -> None:
    kmap = STACKS["qedr"].kernel_map
    assert [k.source for k in kmap.files] == [
        "drivers/infiniband/hw/qedr/qedr_iw_cm.c",
        "drivers/net/ethernet/qlogic/qed/qed_iwarp.c"]
    qed = kmap.also[0]
    assert len(qed.functions) == 72  # qed_iwarp.c at the pinned release
    modelled = {e.function for e in qed.entries if e.status == MODELLED}
    # the ramrods and async-event handlers every connection runs through
    assert modelled >= QED_MUST_MODEL
    left_out = {e.function for e in qed.entries if e.status == NOT_YET}
    # the LL2 realignment of unaligned FPDUs is the one path of the file left out
    assert "qed_iwarp_process_mpa_pkt" in left_out and "qed_iwarp_mpa_classify" in left_out
    assert kmap.find("qed_iwarp_mpa_complete")[0] is qed
    assert kmap.find("iw_accept")[0] is kmap


def test_resolve_names_a_missing_path() -> None:
    with pytest.raises(LookupError, match=r"mpa_emu\.stacks\.siw\.core\.SiwCore\.nope"):
        resolve("mpa_emu.stacks.siw.core.SiwCore.nope")


def test_siw_runs_every_connection_through_modelled_functions() -> None:
    kmap = STACKS["siw"].kernel_map
    modelled = {e.function for e in kmap.entries if e.status == MODELLED}
    assert modelled >= SIW_MUST_MODEL
    assert len(kmap.functions) == 42  # siw_cm.c at the pinned release


def test_irdma_table_is_the_cm_map_s_own(capsys: pytest.CaptureFixture[str]) -> None:
    # the registry's copy prints byte for byte what mpa_emu.stacks.irdma.kernel_map formats
    assert main(["kernel-map"]) == 0
    assert capsys.readouterr().out == cm_map.format_table(cm_map.ENTRIES)
    assert main(["kernel-map", "--stack", "irdma", "check_seq"]) == 0
    assert capsys.readouterr().out == cm_map.format_table((cm_map.entry("check_seq"),))


@pytest.mark.parametrize("name", NAMES)
def test_cli_json_names_stack_source_and_kernel_version(
        name: str, capsys: pytest.CaptureFixture[str]) -> None:
    kmap = STACKS[name].kernel_map
    assert main(["kernel-map", "--stack", name, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["function"] for r in rows] == [f for k in kmap.files for f in k.functions]
    assert [r["source"] for r in rows] == [k.source for k in kmap.files
                                           for _ in k.functions]
    assert {r["kernel_version"] for r in rows} == {kmap.kernel_version}
    assert {r["stack"] for r in rows} == {name}


@pytest.mark.parametrize(("name", "function", "full"), [
    ("siw", "connect", "siw_connect"), ("siw", "kernel_bindconnect", "kernel_bindconnect"),
    ("cxgb4", "connect", "c4iw_connect"), ("cxgb4", "peer_abort", "peer_abort"),
    ("irdma", "check_seq", "irdma_check_seq"),
])
def test_cli_prints_one_function_with_or_without_its_prefix(
        name: str, function: str, full: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernel-map", "--stack", name, function]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].split()[1] == full
    assert "1 function: " in out


def test_cli_text_table_counts_every_function(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernel-map", "--stack", "cxgb4", "--status", "not-yet"]) == 0
    out = capsys.readouterr().out
    left_out = [e for e in STACKS["cxgb4"].kernel_map.entries if e.status == NOT_YET]
    assert left_out and f"{len(left_out)} functions: 0 modelled, 0 plumbing" in out
    assert STACKS["cxgb4"].kernel_map.legend in out


@pytest.mark.parametrize(("argv", "message"), [
    (["kernel-map", "--stack", "siw", "irdma_check_seq"], "not a siw_cm.c function"),
    (["kernel-map", "--stack", "nosuch"], "invalid choice: 'nosuch'"),
])
def test_cli_bad_input_is_one_line_and_exit_2(
        argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        code = main(argv)
        raise SystemExit(code)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_map_entry_is_a_value() -> None:
    e = STACKS["siw"].kernel_map.entry("siw_reject")
    assert isinstance(e, MapEntry) and e.number == 36
