"""CmCore's public surface is the driver's verbs and views: the CoreApi protocol
(mpa_emu/cm/api.py) and a few read-only views. What the actions, the timer tick, the
disconnect and teardown paths need of the core goes through their protocols' underscore
names (CoreOps, TickHost, DisconnectHost, TeardownHost), not the public surface."""

from __future__ import annotations

from mpa_emu.cm.api import CoreApi
from mpa_emu.cm.core import CmCore

VIEWS = {"addresses", "leak_report", "link_up", "has_node", "qp", "now_ns"}
"""Read-only views beyond CoreApi: local addresses, the leak report, the link state,
whether a connection's node is in the table, the QP of a connection, the virtual time."""


def _public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


def test_the_core_s_public_names_are_the_api_and_its_views() -> None:
    api = _public(CoreApi)
    assert api <= _public(CmCore)
    assert _public(CmCore) == api | VIEWS


def test_the_core_keeps_at_most_thirty_public_names() -> None:
    assert len(_public(CmCore)) <= 30
