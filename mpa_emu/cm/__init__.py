"""The irdma connection manager (cm.c) as a sans-IO core: one :class:`CmCore` per host.

Layers, each importing only the ones above it:

* vocabulary: :mod:`~mpa_emu.cm.states` (``CmState``, ``Input``, kernel names and
  values), :mod:`~mpa_emu.cm.config` (``CmConfig``, ``Quirks``),
  :mod:`~mpa_emu.cm.events` (upcalls), :mod:`~mpa_emu.cm.errors` (``CmError``);
* policies and arithmetic: :mod:`~mpa_emu.cm.tcp` (``irdma_check_seq``, options),
  :mod:`~mpa_emu.cm.mpa_policy` (``irdma_parse_mpa``, IRD/ORD negotiation),
  :mod:`~mpa_emu.cm.timing` (jiffies, the compiled back-off);
* state: :mod:`~mpa_emu.cm.node` (the slotted node and listener),
  :mod:`~mpa_emu.cm.nodes` (node table, listen list), :mod:`~mpa_emu.cm.timers` (the
  shared core timer), :mod:`~mpa_emu.cm.contract` (rows, outcomes, the actions' view of
  the core);
* behaviour: :mod:`~mpa_emu.cm.send`, :mod:`~mpa_emu.cm.upcalls`,
  :mod:`~mpa_emu.cm.refs`, :mod:`~mpa_emu.cm.actions` (the rows' bodies),
  :mod:`~mpa_emu.cm.transitions` (the one (state, input) table and its theory of
  operation), :mod:`~mpa_emu.cm.leaks`;
* after offload and by address: :mod:`~mpa_emu.cm.disconnect`,
  :mod:`~mpa_emu.cm.teardown`;
* the orchestrator: :mod:`~mpa_emu.cm.core` (``CmCore``: verbs, receive, dispatch).

See docs/cm-core.md and docs/kernel-behaviour.md.
"""

from mpa_emu.cm.config import CmConfig, Quirks
from mpa_emu.cm.core import CmCore
from mpa_emu.cm.errors import CmError
from mpa_emu.cm.events import IwEvent, Upcall
from mpa_emu.cm.states import CmState, Input
from mpa_emu.cm.view import ListenerView, NodeView

__all__ = ["CmConfig", "CmCore", "CmError", "CmState", "Input", "IwEvent", "ListenerView",
           "NodeView", "Quirks", "Upcall"]
