"""The shape of a registered stack: :class:`StackParam` and :class:`Stack`.

Kept apart from the registry (:mod:`mpa_emu.stacks`) so that a stack's own package can
describe its parameters without importing the registry that imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mpa_emu.stacks.contract.api import CoreApi


@dataclass(frozen=True, slots=True)
class StackParam:
    """One setting of a stack, as the kernel names it.

    ``kind`` is ``int`` or ``bool``; ``where`` says where the kernel keeps it (a module
    parameter, or a constant whose non-default value means a rebuilt or patched driver).
    """

    name: str
    kind: type
    default: int | bool
    minimum: int
    maximum: int
    where: str
    doc: str


@dataclass(frozen=True, slots=True)
class Stack:
    """A registered stack: its name, title, parameters, core factory and documentation.

    ``make_core(host_name, mac, params, *, seed, trace, mtu)`` returns a
    :class:`~mpa_emu.stacks.contract.api.CoreApi`; ``params`` is what :func:`parse_params` returned.
    """

    name: str
    title: str
    params: tuple[StackParam, ...]
    make_core: Callable[..., CoreApi]
    doc: str
    states: tuple[str, ...] = ()
    """The kernel's names of the connection states (what ``[[expect.state]]`` takes)."""
    listener_facts: frozenset[str] = frozenset()
    """Fields its listener view has beyond the common ones (irdma's
    ``syn_qhash_installed``, the TCP_SYN qhash entry of irdma_manage_qhash): a scenario
    expectation on a field a stack lacks is refused when the scenario is loaded."""

    def param(self, name: str) -> StackParam:
        """The parameter ``name``; KeyError when the stack has none by that name."""
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def defaults(self) -> dict[str, int | bool]:
        """Every parameter at its default."""
        return {p.name: p.default for p in self.params}
