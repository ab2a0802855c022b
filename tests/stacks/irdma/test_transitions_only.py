"""Every state change of a node goes through the transition table: the only assignment
of a node's state is in ``CmCore.base.set_state``, which refuses to run outside a row, and
every call of it sits in a row's action (or a helper the actions share)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from helpers.cm_harness import IP_A, IP_P, MAC_A, MAC_P, PORT, to_host

import mpa_emu
from mpa_emu.stacks.contract.trace import Trace
from mpa_emu.stacks.irdma.core import CmCore
from mpa_emu.stacks.irdma.states import CmState
from mpa_emu.stacks.irdma.transitions import TABLE
from mpa_emu.wire.segment import SYN

PACKAGE = Path(mpa_emu.__file__).parent


def _state_assignments(under: Path = PACKAGE) -> list[tuple[str, str]]:
    """(module, enclosing function) of every ``<expr>.state = ...`` below ``under``."""
    found: list[tuple[str, str]] = []
    for path in sorted(under.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            for node in ast.walk(fn):
                targets: list[ast.expr] = []
                if isinstance(node, ast.Assign):
                    targets = node.targets
                elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                    targets = [node.target]
                for t in targets:
                    if isinstance(t, ast.Attribute) and t.attr == "state" and not (
                            isinstance(t.value, ast.Name) and t.value.id == "self"):
                        found.append((path.relative_to(PACKAGE).as_posix(), fn.name))
    return found


def test_a_node_state_is_assigned_only_by_set_state() -> None:
    # CmNode.__init__ sets UNKNOWN on self; everything else goes through the contract's
    # one setter (CoreBase.set_state, which refuses irdma a change outside a row)
    assert _state_assignments(PACKAGE / "stacks" / "irdma") == []


def test_every_stack_and_the_tcp_change_states_in_one_setter_each() -> None:
    # nothing outside mpa_emu/stacks assigns a connection's state
    # (irdma, siw and cxgb4 share the contract's CoreBase.set_state)
    assert _state_assignments() == [("stacks/contract/base.py", "set_state"),
                                    ("stacks/erdma/base.py", "_set"),
                                    ("stacks/qedr/firmware.py", "_set_state"),
                                    ("stacks/tcp/stack.py", "_set_state")]


def test_set_state_outside_a_row_is_refused() -> None:
    core = CmCore("H", MAC_P, seed=1, trace=Trace())
    core.add_address(IP_P)
    core.set_neighbour(IP_A, MAC_A)
    core.create_listen(IP_P, PORT)
    core.receive(to_host(MAC_P, IP_A, IP_P, 5000, PORT, flags=SYN, seq=1, src_mac=MAC_A), 0)
    [conn] = core.conns()
    node = core._cm_node(conn)
    assert node is not None and node.state is CmState.SYN_RCVD
    with pytest.raises(RuntimeError, match="outside the transition table"):
        core.base.set_state(node, CmState.CLOSED, "test", node.conn)
    assert node.state is CmState.SYN_RCVD
    core.base.set_state(node, CmState.SYN_RCVD, "test", node.conn)  # no change: nothing to refuse


def test_every_state_change_in_a_run_is_recorded_by_a_row_function() -> None:
    # the trace names the function of every change; each is a row's kernel function or
    # one of the cm.c helpers the actions share
    core = CmCore("H", MAC_P, seed=1, trace=Trace())
    core.add_address(IP_P)
    core.set_neighbour(IP_A, MAC_A)
    core.create_listen(IP_P, PORT)
    core.receive(to_host(MAC_P, IP_A, IP_P, 5000, PORT, flags=SYN, seq=1, src_mac=MAC_A), 0)
    core.handle_timer(400 * 10**9)  # the SYN-ACK runs out: SYN_RCVD -> CLOSED
    changes = core.trace.of_kind("state_changed")  # type: ignore[union-attr]
    assert [(r.fields["old"], r.fields["new"]) for r in changes] == [
        ("UNKNOWN", "LISTENING"), ("LISTENING", "SYN_RCVD"), ("SYN_RCVD", "CLOSED")]
    row_fns = {r.kernel_fn for r in TABLE.values()}
    helpers = {"irdma_receive_ilq", "irdma_active_open_err", "irdma_passive_open_err",
               "irdma_send_mpa_reject", "irdma_cm_event_connected"}
    assert {r.fn for r in changes} <= row_fns | helpers
