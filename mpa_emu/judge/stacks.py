"""What each iWARP stack does with the MPA frames it receives, as facts from its source.

One :class:`~mpa_emu.stacks.base.StackFacts` per registered stack, read from the
registry (``STACKS[name].facts``): each stack keeps its numbers, and the functions that
enforce them, in its own folder (mpa_emu/stacks/irdma/__init__.py, mpa_emu/stacks/siw/facts.py,
mpa_emu/stacks/cxgb4/facts.py), so a new stack is judged by its own rules or fails the
type check, never by another's. ``linux-userspace`` is an iWARP library over ordinary
sockets (SoftUiWarp and the like): no kernel rules are known for it, so nothing is ever
refused in its name; ``unknown`` is a side the capture does not tell.
"""

from __future__ import annotations

from mpa_emu.stacks import STACKS
from mpa_emu.stacks.base import StackFacts

LINUX_USERSPACE = "linux-userspace"
UNKNOWN = "unknown"

KERNEL_STACKS = tuple(STACKS)
"""The stacks whose refusals are known from their kernel source: every registered one."""

STACK_NAMES = (*KERNEL_STACKS, LINUX_USERSPACE, UNKNOWN)
"""Every name a side can be judged as (and a ``--profile`` may give)."""

FACTS: dict[str, StackFacts] = {name: stack.facts for name, stack in STACKS.items()}
"""Each registered stack's limits and timers (``STACKS[name].facts``, kept in the
stack's own folder)."""


def limit_of(stack: str) -> int | None:
    """The PD_Length limit of a kernel stack, None for the others."""
    facts = FACTS.get(stack)
    return facts.max_pd_length if facts is not None else None


__all__ = ["FACTS", "KERNEL_STACKS", "LINUX_USERSPACE", "STACK_NAMES", "UNKNOWN",
           "StackFacts", "limit_of"]
