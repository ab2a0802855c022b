"""The cxgb4 kernel map covers cm.c's functions once each and names only real objects."""

from __future__ import annotations

from mpa_emu.stacks.cxgb4.kernel_map import ENTRIES, resolve

# The handlers of cm.c's work_handlers[] table and its iw_cm entry points: each must be
# modelled, not plumbing.
MUST_MODEL = {"act_establish", "act_open_rpl", "rx_data", "abort_rpl", "pass_accept_req",
              "pass_establish", "peer_close", "peer_abort", "close_con_rpl", "terminate",
              "c4iw_connect", "c4iw_accept_cr", "c4iw_reject_cr", "c4iw_create_listen",
              "c4iw_destroy_listen", "c4iw_ep_disconnect", "process_timeout"}


def test_every_function_once_and_every_model_resolves() -> None:
    names = [e.function for e in ENTRIES]
    assert len(names) == len(set(names))
    for e in ENTRIES:
        assert e.models or e.note, e.function
        for path in e.models:
            assert resolve(path) is not None, path
    modelled = {e.function for e in ENTRIES if e.models}
    assert modelled >= MUST_MODEL


def test_an_endpoint_state_is_assigned_only_by_set_state() -> None:
    # __state_set and state_set are the kernel's only writers of ep->com.state: no
    # function of the stack assigns a state, and the contract's one state setter
    # (CoreBase.set_state) is called from state_set alone
    import ast
    from pathlib import Path

    import mpa_emu.stacks.cxgb4 as pkg

    assigned, setters = [], []
    for path in sorted(Path(pkg.__file__).parent.glob("*.py")):
        for fn in ast.walk(ast.parse(path.read_text())):
            if isinstance(fn, ast.FunctionDef):
                for node in ast.walk(fn):
                    if isinstance(node, ast.Assign) and any(
                            isinstance(t, ast.Attribute) and t.attr == "state"
                            for t in node.targets):
                        assigned.append((path.name, fn.name))
                    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                            and node.func.attr == "set_state":
                        setters.append((path.name, fn.name))
    assert assigned == []
    assert set(setters) == {("cm.py", "state_set")}
