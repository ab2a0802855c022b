"""soft-iWARP (drivers/infiniband/sw/siw): siw_cm.c's connection manager over the Linux
TCP stack, with the RTR and Terminate of siw_qp_tx.c / siw_qp.c.

:class:`SiwCore` implements :class:`mpa_emu.stacks.contract.api.CoreApi`; :data:`PARAMS` are siw's
settings as siw names them; see docs/stacks/siw.md.
"""

from __future__ import annotations

from collections.abc import Mapping

from mpa_emu.stacks.contract.api import CoreApi
from mpa_emu.stacks.contract.trace import Trace
from mpa_emu.stacks.siw.core import SiwCore
from mpa_emu.stacks.siw.params import PARAMS, SiwParams
from mpa_emu.stacks.siw.states import STATES, SiwQpState, SiwState, SiwWork


def make_core(host: str, mac: bytes, params: Mapping[str, int | bool], *, seed: int,
              trace: Trace | None, mtu: int = 1500) -> CoreApi:
    """A siw host's core with ``params`` (checked by :func:`mpa_emu.stacks.parse_params`)."""
    return SiwCore(host, mac, params, seed=seed, trace=trace, mtu=mtu)


__all__ = ["PARAMS", "STATES", "SiwCore", "SiwParams", "SiwQpState", "SiwState", "SiwWork",
           "make_core"]
