"""Shrinking a failing fuzz script: the same loop for the one-core and two-core modes.

Chunks of steps are removed (halving the chunk size down to single steps), then the
script's prelude is simplified stage by stage, then each step is replaced by a simpler
one; the loop repeats while anything helped and the run budget lasts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Protocol, TypeVar, cast


class _Scripted(Protocol):
    @property
    def steps(self) -> tuple[Any, ...]: ...


S = TypeVar("S", bound=_Scripted)


def _with_steps(sc: S, steps: tuple[Any, ...]) -> S:
    # every script is a frozen dataclass with a ``steps`` field
    new: S = replace(cast(Any, sc), steps=steps)
    return new


def shrink_script(sc: S, fails: Callable[[S], bool], simpler: Callable[[Any], list[Any]],
                  prelude: Sequence[Callable[[S], list[S]]], budget: int) -> S:
    """The smallest script found that ``fails`` still holds for. ``prelude`` is a list of
    stages; each maps the current best script to candidates, tried in order (a stage's
    candidates are all built from the script the stage started with)."""
    runs = 0

    def check(candidate: S) -> bool:
        nonlocal runs
        runs += 1
        return fails(candidate)

    best = sc
    progress = True
    while progress and runs < budget:
        progress = False
        size = max(len(best.steps) // 2, 1)
        while size >= 1 and runs < budget:
            i = 0
            while i < len(best.steps) and runs < budget:
                candidate = _with_steps(best, best.steps[:i] + best.steps[i + size:])
                if check(candidate):
                    best, progress = candidate, True
                else:
                    i += size
            size //= 2
        for stage in prelude:
            for candidate in stage(best):
                if candidate != best and runs < budget and check(candidate):
                    best, progress = candidate, True
        for i in range(len(best.steps)):
            for simple in simpler(best.steps[i]):
                if runs >= budget:
                    break
                candidate = _with_steps(best, (*best.steps[:i], simple, *best.steps[i + 1:]))
                if check(candidate):
                    best, progress = candidate, True
                    break
    return best
