"""The kernel map is complete (all 97 cm.c functions of the reference's section 3) and
true (every path it names imports, and nothing marked "not modelled yet" has a model)."""

from __future__ import annotations

import ast
import importlib
import os
import pkgutil
import re
from pathlib import Path

import pytest
from helpers.source import definition_source, module_file
from mpa_emu.stacks.irdma.kernel_map import ENTRIES, MODELLED, NOT_YET, PLUMBING, entry, resolve

import mpa_emu
from mpa_emu.cli import main

# The reference's function table (irdma-cm.md section 3): number, function, kind. Kept
# here so the test runs without the reference; test_copy_matches_the_reference checks
# this copy against the reference when it is available.
SPEC_TABLE = """
1 irdma_free_sqbuf P
2 irdma_record_ird_ord E
3 irdma_copy_ip_ntohl P
4 irdma_copy_ip_htonl P
5 irdma_get_addr_info P
6 irdma_fill_sockaddr4 P
7 irdma_fill_sockaddr6 P
8 irdma_get_cmevent_info H
9 irdma_send_cm_event E (upcall)
10 irdma_timer_list_prep H
11 irdma_create_event E
12 irdma_free_retrans_entry E
13 irdma_cleanup_retrans_entry E
14 irdma_form_ah_cm_frame E (GEN_2 framing)
15 irdma_form_uda_cm_frame E (GEN_1 framing)
16 irdma_send_reset E
17 irdma_active_open_err E
18 irdma_passive_open_err E
19 irdma_event_connect_error E (upcall)
20 irdma_process_options E
21 irdma_handle_tcp_options E
22 irdma_build_mpa_v1 E
23 irdma_build_mpa_v2 E
24 irdma_cm_build_mpa_frame E
25 irdma_send_mpa_request E
26 irdma_send_mpa_reject E
27 irdma_negotiate_mpa_v2_ird_ord E
28 irdma_parse_mpa E
29 irdma_schedule_cm_timer E (timer)
30 irdma_retrans_expired E
31 irdma_handle_close_entry H
32 irdma_cm_timer_tick E
33 irdma_send_syn E
34 irdma_send_ack E
35 irdma_send_fin E
36 irdma_find_listener E
37 irdma_del_multiple_qhash P
38 irdma_get_vlan_mac_ipv6 P
39 irdma_iw_get_vlan_prio P
40 irdma_get_vlan_ipv4 P
41 irdma_add_mqh_6 P
42 irdma_add_mqh_4 P
43 irdma_add_mqh P
44 irdma_reset_list_prep H
45 irdma_dec_refcnt_listen E/H
46 irdma_cm_del_listen E
47 irdma_addr_resolve_neigh P
48 irdma_get_dst_ipv6 P
49 irdma_addr_resolve_neigh_ipv6 P
50 irdma_find_node E
51 irdma_add_hte_node E
52 irdma_ipv4_is_lpb E/P
53 irdma_ipv6_is_lpb E/P
54 irdma_cm_create_ah P (GEN_2)
55 irdma_cm_free_ah P
56 irdma_make_cm_node E
57 irdma_destroy_connection H
58 irdma_rem_ref_cm_node E
59 irdma_handle_fin_pkt E
60 irdma_handle_rst_pkt E
61 irdma_handle_rcv_mpa E
62 irdma_check_syn E
63 irdma_check_seq E
64 irdma_add_conn_est_qh P/E
65 irdma_handle_syn_pkt E
66 irdma_handle_synack_pkt E
67 irdma_handle_ack_pkt E
68 irdma_process_pkt E
69 irdma_make_listen_node E
70 irdma_create_cm_node E
71 irdma_cm_reject E
72 irdma_cm_close E
73 irdma_receive_ilq E
74 irdma_add_qh P (GEN_1 "create_ah")
75 irdma_cm_free_ah_nop P
76 irdma_setup_cm_core P/E
77 irdma_cleanup_cm_core P
78 irdma_init_tcp_ctx H
79 irdma_cm_init_tsa_conn H
80 irdma_cm_disconn H
81 irdma_qp_disconnect H
82 irdma_cm_disconn_true H
83 irdma_disconnect_worker P
84 irdma_free_lsmm_rsrc P
85 irdma_accept E
86 irdma_reject E
87 irdma_connect E
88 irdma_create_listen E
89 irdma_destroy_listen E
90 irdma_teardown_list_prep E/H
91 irdma_cm_event_connected H/E
92 irdma_cm_event_reset H
93 irdma_cm_event_handler E
94 irdma_cm_post_event P
95 irdma_cm_teardown_connections E/H
96 irdma_qhash_ctrl P
97 irdma_if_notify E/H
"""


def spec_rows(text: str) -> list[tuple[int, str, str]]:
    rows = []
    for line in text.strip().splitlines():
        number, function, kind = line.split(" ", 2)
        rows.append((int(number), function, kind))
    return rows


def reference_path() -> Path | None:
    env = os.environ.get("MPA_EMU_SPEC")
    candidates = [Path(env)] if env else []
    root = Path(__file__).resolve().parents[2]
    candidates += [root.parent / "shared" / "spec" / "irdma-cm.md",
                   root / "spec" / "irdma-cm.md"]
    return next((p for p in candidates if p.is_file()), None)


def test_every_cm_c_function_has_exactly_one_entry_in_table_order() -> None:
    expected = spec_rows(SPEC_TABLE)
    assert len(expected) == 97
    got = [(e.number, e.function, e.kind) for e in ENTRIES]
    assert got == [(n, f, k.split()[0]) for n, f, k in expected]


def test_copy_matches_the_reference() -> None:
    path = reference_path()
    if path is None:
        pytest.skip("reference irdma-cm.md not found (set MPA_EMU_SPEC); the embedded "
                    "copy is still checked by the other tests")
    text = path.read_text()
    section = text[text.index("## 3. Every function"):text.index("How to model the plumbing")]
    rows = []
    for m in re.finditer(r"^\| (\d+) \| `([a-z0-9_]+)[^|]*\| ([^|]+?) \|", section, re.M):
        rows.append((int(m.group(1)), m.group(2), m.group(3)))
    assert rows == spec_rows(SPEC_TABLE)


@pytest.mark.parametrize("e", ENTRIES, ids=lambda e: e.function)
def test_entry_is_true(e: object) -> None:
    from mpa_emu.stacks.irdma.kernel_map import KernelEntry

    assert isinstance(e, KernelEntry)
    for path in e.models:
        assert path.startswith("mpa_emu."), path
        resolve(path)  # raises LookupError naming the path
    if e.status == MODELLED:
        assert e.models, f"{e.function} is marked modelled but names no model"
    if e.status in (PLUMBING, NOT_YET):
        assert e.note, f"{e.function} needs a note saying why nothing models it"


def _defined_names() -> dict[str, str]:
    """Every function and method name defined in mpa_emu's cm and offload packages."""
    names: dict[str, str] = {}
    for pkg in ("mpa_emu.stacks.irdma", "mpa_emu.stacks.irdma.offload"):
        module = importlib.import_module(pkg)
        for info in pkgutil.iter_modules(module.__path__, pkg + "."):
            source = module_file(info.name)
            if source is None:
                continue
            tree = ast.parse(source.read_text())
            for node in _models_in(tree.body):
                names.setdefault(node.name, info.name)
    return names


def _models_in(body: list[ast.stmt]) -> list[ast.FunctionDef]:
    """Module functions and methods, leaving out Protocol classes (interfaces, not models)."""
    out: list[ast.FunctionDef] = []
    for node in body:
        if isinstance(node, ast.FunctionDef):
            out.append(node)
        elif isinstance(node, ast.ClassDef) and not any(
                isinstance(b, ast.Name) and b.id == "Protocol" for b in node.bases):
            out += [n for n in node.body if isinstance(n, ast.FunctionDef)]
    return out


def test_not_modelled_entries_are_not_stale() -> None:
    # The models keep the kernel's names without "irdma_" (design principle 3), public or
    # with a leading underscore: a function named like an entry still marked "not
    # modelled yet" means the map is stale.
    defined = _defined_names()
    stale = [f"{e.function} -> {defined.get(name) or defined['_' + name]}" for e in ENTRIES
             if e.status == NOT_YET
             and ((name := e.function[6:]) in defined or "_" + name in defined)]
    assert stale == []


def _names_function(path: str, function: str) -> bool:
    resolve(path)  # it exists in the package as imported
    source = definition_source(path)
    if source is None:
        return False
    short = function.removeprefix("irdma_")
    return function in source or re.search(rf"\b_?{short}\b", source) is not None


@pytest.mark.parametrize("e", [e for e in ENTRIES if e.status == MODELLED],
                         ids=lambda e: e.function)
def test_a_model_names_its_kernel_function(e: object) -> None:
    # A model cites the kernel function at the line that enforces it (or is named after
    # it); entries modelled only by behaviour say so in their note.
    from mpa_emu.stacks.irdma.kernel_map import KernelEntry

    assert isinstance(e, KernelEntry)
    if e.note.startswith("by behaviour:"):
        return
    assert any(_names_function(p, e.function) for p in e.models), (
        f"none of {e.models} mentions {e.function}")


def test_resolve_reports_missing_paths() -> None:
    with pytest.raises(LookupError, match=r"mpa_emu\.nowhere\.thing"):
        resolve("mpa_emu.nowhere.thing")
    assert resolve("mpa_emu.wire.mpa.RtrBlock.to_bytes") is mpa_emu.wire.mpa.RtrBlock.to_bytes


def test_cli_prints_the_table_and_single_entries(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernel-map"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") >= 97
    assert " 28 irdma_parse_mpa " in out
    assert main(["kernel-map", "check_seq"]) == 0
    assert "mpa_emu.stacks.irdma.tcp.check_seq" in capsys.readouterr().out
    assert main(["kernel-map", "no_such_function"]) == 2
    assert entry("irdma_if_notify").number == 97


def test_cli_table_has_a_header_and_an_empty_selection_says_so(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernel-map", "irdma_check_seq"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["#", "function", "kind", "modelled", "by", "(note)"]
    assert lines[1].startswith(" 63 irdma_check_seq ")
    assert lines[-2] == "1 function: 1 modelled, 0 plumbing, 0 not modelled yet"
    # Every letter of the kind column is explained (the reference's E, P and H).
    kinds = {k for e in ENTRIES for k in e.kind.split("/")}
    assert kinds == {"E", "P", "H"}
    assert lines[-1].startswith("kind: ")
    assert all(f" {k} " in lines[-1].replace(",", " ") for k in kinds)
    assert main(["kernel-map", "--status", "not-yet"]) == 0
    lines = capsys.readouterr().out.splitlines()
    pending = sum(1 for e in ENTRIES if e.status == NOT_YET)
    noun = "function" if pending == 1 else "functions"
    assert lines[0].split()[:2] == ["#", "function"]
    assert len(lines) == pending + 4  # header, the entries, blank line, count, legend
    assert lines[-2] == f"{pending} {noun}: 0 modelled, 0 plumbing, {pending} not modelled yet"
