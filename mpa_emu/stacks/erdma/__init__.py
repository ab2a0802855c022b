"""Alibaba Elastic RDMA (drivers/infiniband/hw/erdma): erdma_cm.c's connection manager,
a fork of siw_cm.c over a kernel TCP socket that speaks a private MPA dialect (revision
129 and an 8-byte extension, :mod:`mpa_emu.wire.erdma_mpa`) and hands the connection to
the device once the QP is in RTS.

:class:`ErdmaCore` implements :class:`mpa_emu.stacks.contract.api.CoreApi`; :data:`PARAMS`
are erdma's settings; see docs/stacks/erdma.md.
"""

from __future__ import annotations

from collections.abc import Mapping

from mpa_emu.stacks.contract.api import CoreApi
from mpa_emu.stacks.contract.trace import Trace
from mpa_emu.stacks.erdma.core import ErdmaCore
from mpa_emu.stacks.erdma.params import PARAMS, ErdmaParams
from mpa_emu.stacks.erdma.states import STATES, ErdmaQpState, ErdmaState, ErdmaWork

TITLE = "Alibaba Elastic RDMA (erdma)"
DOC = "docs/stacks/erdma.md"


def make_core(host: str, mac: bytes, params: Mapping[str, int | bool], *, seed: int,
              trace: Trace | None, mtu: int = 1500) -> CoreApi:
    """An erdma host's core with ``params`` (checked by
    :func:`mpa_emu.stacks.parse_params`)."""
    return ErdmaCore(host, mac, params, seed=seed, trace=trace, mtu=mtu)


__all__ = ["DOC", "PARAMS", "STATES", "TITLE", "ErdmaCore", "ErdmaParams", "ErdmaQpState",
           "ErdmaState", "ErdmaWork", "make_core"]
