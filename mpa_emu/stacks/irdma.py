"""irdma's entry in the stack registry: today's :class:`~mpa_emu.stacks.irdma.core.CmCore` with a
:class:`~mpa_emu.stacks.irdma.config.CmConfig` (drivers/infiniband/hw/irdma/cm.c), unchanged.

irdma keeps these settings as compiled-in constants, not module parameters: its registry
parameters are the two ``CmConfig`` fields users meet between stacks (the MPA revision
and the hardware generation); every other knob is a ``CmConfig`` field or quirk, set
through ``Network.add_host(config=...)`` or a scenario's ``[host.config]`` table.
"""

from __future__ import annotations

from collections.abc import Mapping

from mpa_emu.stacks.base import StackParam
from mpa_emu.stacks.contract.api import CoreApi
from mpa_emu.stacks.contract.trace import Trace
from mpa_emu.stacks.irdma.config import CmConfig
from mpa_emu.stacks.irdma.core import CmCore
from mpa_emu.stacks.irdma.states import CmState

_CONSTANT = "constant in irdma (cm.h): a non-default value means a rebuilt or patched irdma"

PARAMS: tuple[StackParam, ...] = (
    StackParam("mpa_rev", int, 2, 1, 2, _CONSTANT,
               "IRDMA_CM_DEFAULT_MPA_VER: the MPA revision irdma_connect requests and the "
               "highest irdma_parse_mpa accepts (CmConfig.mpa_rev)."),
    StackParam("gen", int, 2, 1, 2, "the hardware: 2 = E810 (icrdma), 1 = X722 (i40iw)",
               "hardware generation (CmConfig.gen): GEN_1 frames the CM's packets through "
               "the UDA queue, GEN_2 through the AH; IRD limits differ."),
)
"""irdma's registry parameters (the rest of its settings are ``CmConfig``)."""

STATES = tuple(state.name for state in CmState)
"""enum irdma_cm_node_state without the prefix, in kernel order (cm.h)."""


def make_core(host: str, mac: bytes, params: Mapping[str, int | bool], *, seed: int,
              trace: Trace | None, mtu: int = 1500) -> CoreApi:
    """An irdma CM core with the default configuration and ``mtu``."""
    config = CmConfig(mtu=mtu, mpa_rev=int(params.get("mpa_rev", 2)),
                      gen=int(params.get("gen", 2)))
    return CmCore(host, mac, config, seed=seed, trace=trace)
