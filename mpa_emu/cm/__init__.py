"""The irdma connection manager (cm.c) as a sans-IO core: one :class:`CmCore` per host.

Layers, each importing only the ones above it:

* vocabulary: :mod:`~mpa_emu.stacks.irdma.states` (``CmState``, ``Input``, kernel names and
  values), :mod:`~mpa_emu.stacks.irdma.config` (``CmConfig``, ``Quirks``),
  :mod:`~mpa_emu.stacks.contract.events` (upcalls), :mod:`~mpa_emu.stacks.contract.errors`
  (``CmError``);
* policies and arithmetic: :mod:`~mpa_emu.stacks.irdma.tcp` (``irdma_check_seq``, options),
  :mod:`~mpa_emu.stacks.irdma.mpa_policy` (``irdma_parse_mpa``, IRD/ORD negotiation),
  :mod:`~mpa_emu.stacks.irdma.timing` (jiffies, the compiled back-off);
* state: :mod:`~mpa_emu.stacks.irdma.node` (the slotted node and listener),
  :mod:`~mpa_emu.stacks.irdma.nodes` (node table, listen list), :mod:`~mpa_emu.stacks.irdma.timers`
  (the
  shared core timer), :mod:`~mpa_emu.stacks.irdma.contract` (rows, outcomes, the actions' view of
  the core);
* behaviour: :mod:`~mpa_emu.stacks.irdma.send`, :mod:`~mpa_emu.stacks.irdma.upcalls`,
  :mod:`~mpa_emu.stacks.irdma.refs`, :mod:`~mpa_emu.stacks.irdma.actions` (the rows' bodies),
  :mod:`~mpa_emu.stacks.irdma.transitions` (the one (state, input) table and its theory of
  operation), :mod:`~mpa_emu.stacks.irdma.leaks`;
* after offload and by address: :mod:`~mpa_emu.stacks.irdma.disconnect`,
  :mod:`~mpa_emu.stacks.irdma.teardown`;
* the orchestrator: :mod:`~mpa_emu.stacks.irdma.core` (``CmCore``: verbs, receive, dispatch).

See docs/cm-core.md and docs/kernel-behaviour.md.
"""

from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.events import IwEvent, Upcall
from mpa_emu.stacks.irdma.config import CmConfig, Quirks
from mpa_emu.stacks.irdma.core import CmCore
from mpa_emu.stacks.irdma.states import CmState, Input
from mpa_emu.stacks.irdma.view import ListenerView, NodeView

__all__ = ["CmConfig", "CmCore", "CmError", "CmState", "Input", "IwEvent", "ListenerView",
           "NodeView", "Quirks", "Upcall"]
