"""What ``mpa-emu fuzz`` checks of an irdma core alone (:class:`~mpa_emu.stacks.base.
FuzzModel`): the core configurations the scripts choose from, and the reachability of
the (state, input) table of :mod:`mpa_emu.stacks.irdma.transitions`."""

from __future__ import annotations

from typing import Any

from mpa_emu.stacks.contract.api import CoreApi
from mpa_emu.stacks.contract.trace import Trace
from mpa_emu.stacks.irdma.config import CmConfig, Quirks
from mpa_emu.stacks.irdma.core import CmCore
from mpa_emu.stacks.irdma.states import CmState, Input
from mpa_emu.stacks.irdma.transitions import NEVER_SET, TRANSIENT, row

S_NS = 1_000_000_000


def config(index: int) -> CmConfig:
    """The core configurations the scripts choose from."""
    return [CmConfig(retrans=8), CmConfig(retrans=8, gen=1),
            CmConfig(retrans=8, ah_latency_ns=S_NS // 2),
            CmConfig(retrans=8, quirks=Quirks(zero_len_option_loop=False)),
            CmConfig(retrans=8, hz=250, host_stack_rst=True)][index]


CONFIGS = 5
"""How many :func:`config` has."""


def make_core(host: str, mac: bytes, index: int, *, seed: int,
              trace: Trace | None) -> CoreApi:
    """A ``CmCore`` with configuration ``index``."""
    return CmCore(host, mac, config(index), seed=seed, trace=trace)


def held_unreachable(view: Any) -> bool:
    """The node sits in a state the table marks never set or transient."""
    return view.state in NEVER_SET or view.state in TRANSIENT


def change_allowed(old_name: str, new_name: str) -> bool:
    """A traced state change from a transient state, or one a reachable row allows."""
    old, new = CmState[old_name], CmState[new_name]
    return old in TRANSIENT or any(r.reachable and new in r.allowed
                                   for r in (row(old, inp) for inp in Input))


def refusal_changes(verb: str, view: Any) -> bool:
    """irdma_accept runs its error path (the node released) before returning
    -EINVAL/-ECONNRESET; every other refusal leaves everything as it was."""
    return (verb == "accept" and view is not None
            and view.state in (CmState.MPAREQ_RCVD, CmState.LISTENER_DESTROYED))


def unexplained_leaks(core: Any) -> list[tuple[int, str]]:
    """The nodes left in the table with no kernel leak to explain them (conn, state)."""
    return [(c, s.name) for c, s, why in core.leak_report() if why is None]
