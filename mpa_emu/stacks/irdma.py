"""irdma's entry in the stack registry: today's :class:`~mpa_emu.cm.core.CmCore` with a
:class:`~mpa_emu.cm.config.CmConfig` (drivers/infiniband/hw/irdma/cm.c), unchanged.

irdma has no registry parameters yet: its knobs are the ``CmConfig`` fields and quirks,
set through ``Network.add_host(config=...)`` or a scenario's ``[host.config]`` table.
"""

from __future__ import annotations

from collections.abc import Mapping

from mpa_emu.cm.api import CoreApi
from mpa_emu.cm.config import CmConfig
from mpa_emu.cm.core import CmCore
from mpa_emu.cm.states import CmState
from mpa_emu.cm.trace import Trace

PARAMS = ()
"""irdma's registry parameters: none (its settings are ``CmConfig``)."""

STATES = tuple(state.name for state in CmState)
"""enum irdma_cm_node_state without the prefix, in kernel order (cm.h)."""


def make_core(host: str, mac: bytes, params: Mapping[str, int | bool], *, seed: int,
              trace: Trace | None, mtu: int = 1500) -> CoreApi:
    """An irdma CM core with the default configuration and ``mtu``."""
    del params  # no parameters
    return CmCore(host, mac, CmConfig(mtu=mtu), seed=seed, trace=trace)
