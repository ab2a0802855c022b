"""Marvell/QLogic FastLinQ iWARP: qedr's connection manager
(drivers/infiniband/hw/qedr/qedr_iw_cm.c) on qed's iWARP layer
(drivers/net/ethernet/qlogic/qed/qed_iwarp.c) and the adapter's firmware TCP and MPA
engine. ``STACKS["qedr"]`` in :mod:`mpa_emu.stacks`; docs/stacks/qedr.md is the behaviour
reference."""

from __future__ import annotations

from collections.abc import Mapping

from mpa_emu.stacks.contract.api import CoreApi
from mpa_emu.stacks.contract.trace import Trace
from mpa_emu.stacks.qedr.core import QedrCore
from mpa_emu.stacks.qedr.params import PARAMS, QedrParams
from mpa_emu.stacks.qedr.states import STATES, EpState

TITLE = "Marvell/QLogic FastLinQ (qedr)"
DOC = "docs/stacks/qedr.md"


def make_core(host: str, mac: bytes, params: Mapping[str, int | bool], *, seed: int,
              trace: Trace | None, mtu: int = 1500) -> CoreApi:
    """A qedr host's core with ``params`` (checked by :func:`mpa_emu.stacks.parse_params`);
    ``mtu`` is the port MTU (``dev->iwarp_max_mtu``)."""
    return QedrCore(host, mac, params, seed=seed, trace=trace, mtu=mtu)


__all__ = ["DOC", "PARAMS", "STATES", "TITLE", "EpState", "QedrCore", "QedrParams",
           "make_core"]
