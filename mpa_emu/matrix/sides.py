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
    """``siw`` or ``siw(peer_to_peer=1,mpa_version=1)`` -> :class:`Side`."""
    text = text.strip()
    if "(" not in text:
        return make_side(text)
    if not text.endswith(")"):
        raise ConfigError(f"{text!r}: write a stack as NAME or NAME(KEY=VALUE,...)")
    name, _, inner = text[:-1].partition("(")
    params: dict[str, object] = {}
    for pair in filter(None, (p.strip() for p in inner.split(","))):
        key, eq, value = pair.partition("=")
        if not eq:
            raise ConfigError(f"{text!r}: {pair!r} is not KEY=VALUE")
        params[key.strip()] = _number(value.strip(), text)
    return make_side(name.strip(), params)


def _number(value: str, whole: str) -> int:
    lowered = value.lower()
    if lowered in ("true", "yes", "on"):
        return 1
    if lowered in ("false", "no", "off"):
        return 0
    try:
        return int(value, 0)
    except ValueError:
        raise ConfigError(f"{whole!r}: {value!r} is not a number") from None


NAMED_SETS: dict[str, tuple[Mapping[str, ParamValue], ...]] = {
    # Settings users run besides the defaults (docs/stacks/*.md says why each matters).
    "siw": ({"peer_to_peer": True},),
    "cxgb4": ({"peer2peer": False},),
}


def default_sides(stacks: Sequence[str] | None = None) -> list[Side]:
    """Each stack with its defaults, then its named parameter sets, in registry order."""
    sides = []
    for name in stacks or list(STACKS):
        sides.append(make_side(name))
        for params in NAMED_SETS.get(name, ()):
            sides.append(make_side(name, params))
    return sides
