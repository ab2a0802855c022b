"""CmCore's public surface is the driver's verbs and views: the CoreApi protocol
(mpa_emu/stacks/contract/api.py), the application's Send (PostsSends, the same file)
and a few read-only views. What the actions, the timer tick, the
disconnect and teardown paths need of the core goes through their protocols' underscore
names (CoreOps, TickHost, DisconnectHost, TeardownHost), not the public surface.

The names counted are the methods and properties the class and its bases in the package
define, read from the source (the compiled build shows instance attributes on the class
too, so the running class would count differently on the two builds); the data
attributes the constructor sets (config, trace, nodes, stats ...) are not counted."""

from __future__ import annotations

import ast
import inspect

from helpers.source import module_file

from mpa_emu.stacks.contract.api import CoreApi, PostsSends
from mpa_emu.stacks.irdma.core import CmCore

VIEWS = {"addresses", "leak_report", "link_up", "has_node", "qp"}
"""Read-only views beyond CoreApi: local addresses, the leak report, the link state,
whether a connection's node is in the table, the QP of a connection."""


def _defined(cls: type) -> set[str]:
    """Public methods and properties of ``cls`` and its bases in mpa_emu, from source."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith("mpa_emu."):
            continue
        path = module_file(klass.__module__)
        assert path is not None, klass
        tree = ast.parse(path.read_text(encoding="utf-8"))
        body = next(node for node in tree.body
                    if isinstance(node, ast.ClassDef) and node.name == klass.__name__)
        names |= {node.name for node in body.body
                  if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")}
    return names


def _protocol_members(proto: type) -> set[str]:
    return {name for name, _ in inspect.getmembers(proto) if not name.startswith("_")}


def test_the_core_s_public_names_are_the_api_and_its_views() -> None:
    api = _protocol_members(CoreApi) | _protocol_members(PostsSends)
    assert api <= _defined(CmCore)
    assert _defined(CmCore) == api | VIEWS


def test_the_core_keeps_at_most_thirty_public_names() -> None:
    assert len(_defined(CmCore)) <= 30


def test_each_stack_core_keeps_at_most_thirty_public_names() -> None:
    # the contract (CoreApi, watch_nodes, post_send ...) and a few views; cm.c's and
    # siw_cm.c's handlers are functions or private helpers, not public methods. siw's
    # and cxgb4's cores are never compiled, so the running class is counted; irdma's
    # from its source (see the module docstring), which the test above also bounds
    from mpa_emu.stacks.cxgb4.core import Cxgb4Core
    from mpa_emu.stacks.siw.core import SiwCore

    api = _protocol_members(CoreApi)
    for cls in (SiwCore, Cxgb4Core):
        names = [n for n in dir(cls) if not n.startswith("_")]
        assert len(names) <= 30, (cls.__name__, names)
        assert api <= set(names), cls.__name__
    assert len(_defined(CmCore)) <= 30 and api <= _defined(CmCore)
