"""Who takes part in a matrix: a stack with its parameters (a *side*), and the named
parameter sets each stack is tried with besides its defaults.

A side is written as the registry writes it (:func:`mpa_emu.stacks.stack_label`):
``siw`` for siw with its defaults, ``siw(peer_to_peer=1)`` otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from mpa_emu.errors import ConfigError
from mpa_emu.stacks import STACKS, parse_params, stack_label
from mpa_emu.stacks.labels import split_label

ParamValue = int | bool


@dataclass(frozen=True, slots=True)
class Side:
    """One stack with its parameters (only those that differ from its defaults)."""

    stack: str
    params: tuple[tuple[str, ParamValue], ...] = field(default=())

    @property
    def label(self) -> str:
        """``siw`` or ``siw(peer_to_peer=1)``."""
        return stack_label(self.stack, dict(self.params))

    def with_params(self, extra: Mapping[str, ParamValue]) -> Side:
        """The same stack with ``extra`` laid over its parameters."""
        merged = dict(self.params)
        merged.update(extra)
        return make_side(self.stack, merged)


def make_side(stack: str, params: Mapping[str, object] | None = None) -> Side:
    """A side, its parameters checked by the stack's registry entry (ValueError with a
    one-line message on an unknown stack, key or value); defaults are dropped."""
    if stack not in STACKS:
        raise ConfigError(f"unknown stack {stack!r} (known: {', '.join(STACKS)})")
    checked = parse_params(stack, dict(params or {}))
    defaults = {p.name: p.default for p in STACKS[stack].params}
    kept = tuple(sorted((k, v) for k, v in checked.items() if defaults.get(k) != v))
    return Side(stack, kept)


def parse_side(text: str) -> Side:
    """``siw`` or ``siw(peer_to_peer=1,mpa_version=1)`` -> :class:`Side` (true/false
    written as 1/0)."""
    name, pairs = split_label(text.strip())
    return make_side(name, {k: int(v) for k, v in pairs.items()})


def default_sides(stacks: Sequence[str] | None = None) -> list[Side]:
    """Each stack with its defaults, then its named parameter sets, in registry order."""
    sides = []
    for name in stacks or list(STACKS):
        sides.append(make_side(name))
        # settings users run besides the defaults (MatrixFacts.named_sets; docs/stacks/)
        for params in STACKS[name].matrix.named_sets:
            sides.append(make_side(name, params))
    return sides
