"""The package's import graph has no cycle: every ``import`` and ``from ... import`` of
one mpa_emu module by another counts, at module level, inside functions and under
``if TYPE_CHECKING:`` alike (a cycle hidden in a function is still a cycle a reader has
to untangle). The graph is read from the source with :mod:`ast`, not from what happens
to be imported at run time."""

from __future__ import annotations

import pytest
from helpers.import_graph import import_graph

pytestmark = pytest.mark.source


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                out.append(sorted(scc))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_the_graph_sees_function_level_and_type_checking_imports() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    found = import_graph()
    # cm.core imports the transition table at module level
    assert "mpa_emu.stacks.irdma.transitions" in found["mpa_emu.stacks.irdma.core"]
    # scapy's layers are bound inside a function of frames/__init__ or net.network
    assert all(not m.startswith("scapy") for m in found)


def test_no_import_cycle_in_the_package() -> None:
    assert cycles(import_graph()) == []
