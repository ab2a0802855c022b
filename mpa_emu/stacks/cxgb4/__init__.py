"""Chelsio T4/T5/T6 iWARP: iw_cxgb4's connection manager (drivers/infiniband/hw/cxgb4/cm.c)
on the adapter's offloaded TCP. ``STACKS["cxgb4"]`` in :mod:`mpa_emu.stacks`;
docs/stacks/cxgb4.md is the behaviour reference."""

from __future__ import annotations

from collections.abc import Mapping

from mpa_emu.stacks.contract.api import CoreApi
from mpa_emu.stacks.contract.trace import Trace
from mpa_emu.stacks.cxgb4.core import Cxgb4Core
from mpa_emu.stacks.cxgb4.params import PARAM_SPECS, Cxgb4Params
from mpa_emu.stacks.cxgb4.states import EpState

TITLE = "Chelsio T4/T5/T6 (iw_cxgb4)"
DOC = "docs/stacks/cxgb4.md"

STATES = tuple(state.name for state in EpState)
"""``enum c4iw_ep_state`` (iw_cxgb4.h) in kernel order."""


def make_core(host: str, mac: bytes, params: Mapping[str, int | bool], *, seed: int,
              trace: Trace | None, mtu: int = 1500) -> CoreApi:
    """A cxgb4 core with these parameters (names as in :data:`PARAM_SPECS`)."""
    return Cxgb4Core(host, mac, params, seed=seed, trace=trace, mtu=mtu)


__all__ = ["DOC", "PARAM_SPECS", "STATES", "TITLE", "Cxgb4Core", "Cxgb4Params", "make_core"]
