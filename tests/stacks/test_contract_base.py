"""The contract's shared mechanics (mpa_emu/stacks/contract/base.py): the one state
setter, trace emitter, kernel-log record and upcall queue that irdma, siw and cxgb4 use,
each core through its ``base``."""

from __future__ import annotations

import ast
from enum import IntEnum
from pathlib import Path
from typing import Any

import pytest

import mpa_emu
from mpa_emu.stacks.contract.base import CoreBase
from mpa_emu.stacks.contract.events import IwEvent, Upcall
from mpa_emu.stacks.contract.trace import Trace
from mpa_emu.stacks.cxgb4.core import Cxgb4Core
from mpa_emu.stacks.irdma.core import CmCore
from mpa_emu.stacks.siw.core import SiwCore

PACKAGE = Path(mpa_emu.__file__).parent
MAC = bytes(6)


class St(IntEnum):
    A = 1
    B = 2


class Node:
    def __init__(self) -> None:
        self.state = St.A


class Watch:
    def __init__(self) -> None:
        self.told: list[tuple[Any, ...]] = []

    def node_created(self, conn: int, loc_port: int, rem: bytes, rem_port: int) -> None:
        self.told.append(("created", conn, loc_port, rem, rem_port))

    def state_changed(self, conn: int, state: IntEnum) -> None:
        self.told.append(("changed", conn, state))

    def node_freed(self, conn: int) -> None:
        self.told.append(("freed", conn))

    def qp_event(self, time_ns: int, conn: int, ae: str) -> None:
        self.told.append(("ae", conn, ae))


def test_set_state_changes_records_the_function_and_tells_a_created_node_s_watch() -> None:
    trace, watch = Trace(), Watch()
    base = CoreBase("H", trace, watch)
    base.now_ns = 7
    node = Node()
    base.node_created(3, 4000, b"\x0a\0\0\x01", 5000)
    base.set_state(node, St.B, "fn_b", 3)
    base.set_state(node, St.B, "fn_again", 3)  # already there: nothing at all
    assert node.state is St.B
    [rec] = trace.records
    assert (rec.time_ns, rec.host, rec.kind, rec.fn, rec.fields) == (
        7, "H", "state_changed", "fn_b", {"conn": 3, "old": "A", "new": "B"})
    assert watch.told == [("created", 3, 4000, b"\x0a\0\0\x01", 5000), ("changed", 3, St.B)]
    base.node_freed(3)
    base.node_freed(3)  # told once
    assert watch.told[-1] == ("freed", 3) and len(watch.told) == 3


def test_a_node_told_of_late_is_created_at_its_first_change_and_a_listener_never() -> None:
    watch = Watch()
    base = CoreBase("H", None, watch)
    ep, lst = Node(), Node()
    base.set_state(ep, St.B, "fn", 1, ports=(1, b"r", 2))
    base.set_state(lst, St.B, "fn", 1, tell=False)  # a listener sharing the number
    base.set_state(Node(), St.B, "fn", 2)  # never created: the watch does not hear of it
    assert watch.told == [("created", 1, 1, b"r", 2), ("changed", 1, St.B)]


def test_kernel_log_and_push_make_their_records_and_the_queue_keeps_order() -> None:
    trace = Trace()
    base = CoreBase("H", trace)
    base.kernel_log("err", "k_fn", "text", conn=None)
    base.kernel_log("debug", "k_dbg", "dbg", dynamic_debug=True)
    ups = [Upcall(IwEvent.CONNECT_REPLY, c, -111, 0, b"a", 1, b"b", 2) for c in (1, 2)]
    for up in ups:
        base.push(up, "connect_reply_upcall")
    assert [base.next_event(), base.next_event(), base.next_event()] == [*ups, None]
    assert [(r.kind, r.fn, r.fields) for r in trace.records] == [
        ("kernel_log", "k_fn", {"level": "err", "text": "text", "dynamic_debug": False,
                                "conn": None}),
        ("kernel_log", "k_dbg", {"level": "debug", "text": "dbg", "dynamic_debug": True}),
        ("upcall", "connect_reply_upcall", {"conn": 1, "event": "CONNECT_REPLY",
                                            "status": -111}),
        ("upcall", "connect_reply_upcall", {"conn": 2, "event": "CONNECT_REPLY",
                                            "status": -111})]


def test_without_a_trace_nothing_is_recorded_and_nothing_fails() -> None:
    base = CoreBase("H", None)
    base.record("x", "fn", a=1)
    base.kernel_log("err", "fn", "t")
    base.set_state(Node(), St.B, "fn", 1)
    assert base.next_event() is None


@pytest.mark.parametrize("core", [CmCore("H", MAC), SiwCore("H", MAC), Cxgb4Core("H", MAC)],
                         ids=["irdma", "siw", "cxgb4"])
def test_each_core_holds_the_shared_base(core: Any) -> None:
    assert isinstance(core.base, CoreBase)
    assert core.next_event() is None


def _calls(path: Path, names: set[str]) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute) and n.func.attr in names]


def test_the_old_spellings_of_the_mechanics_are_gone() -> None:
    # irdma's _tr/_set_state/_push_upcall, siw's _note/_klog/_set, cxgb4's tr/klog
    old = {"_tr", "_set_state", "_push_upcall", "_note", "_klog", "_set", "tr", "klog"}
    for stack in ("irdma", "siw", "cxgb4"):
        for path in sorted((PACKAGE / "stacks" / stack).rglob("*.py")):
            assert _calls(path, old) == [], path
