"""``mpa-emu matrix``: every ordered pair of iWARP stacks through a catalogue of
scenarios, recording in each cell the frames, the iw_cm upcalls and the rdma_cm events
each application receives, the RTR used and any Terminate.

- :mod:`~mpa_emu.matrix.sides`: a stack with its parameters, and the default sides;
- :mod:`~mpa_emu.matrix.catalogue`: the scenarios;
- :mod:`~mpa_emu.matrix.cell`: one cell, run anywhere (picklable in and out);
- :mod:`~mpa_emu.matrix.output`: the terminal table, JSON and HTML.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import overload

from mpa_emu.campaign.cases import Progress
from mpa_emu.campaign.executor import iter_cases
from mpa_emu.matrix.catalogue import SCENARIOS, Scenario, select
from mpa_emu.matrix.cell import CellResult, CellSpec, run_cell
from mpa_emu.matrix.sides import Side, default_sides, parse_side

__all__ = [
    "CHUNK",
    "SCENARIOS",
    "CellResult",
    "CellSpec",
    "Plan",
    "Scenario",
    "Side",
    "default_sides",
    "iter_matrix",
    "parse_side",
    "plan",
    "run_cell",
    "run_matrix",
    "select",
]


class Plan(Sequence[CellSpec]):
    """Every (scenario, initiator, responder) cell, scenarios outermost, in a fixed order,
    each made when asked for: a plan of any size costs its sides and scenarios only."""

    def __init__(self, sides: Sequence[Side], scenarios: Sequence[Scenario], *,
                 seed: int = 0, captures: str | Path | None = None) -> None:
        self.sides = list(sides)
        self.scenarios = list(scenarios)
        self.seed = seed
        self.captures = None if captures is None else os.fspath(captures)

    def __len__(self) -> int:
        return len(self.scenarios) * len(self.sides) ** 2

    @overload
    def __getitem__(self, index: int) -> CellSpec: ...
    @overload
    def __getitem__(self, index: slice) -> list[CellSpec]: ...

    def __getitem__(self, index: int | slice) -> CellSpec | list[CellSpec]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        index %= len(self)
        n = len(self.sides)
        scenario = self.scenarios[index // (n * n)]
        ini, resp = self.sides[index // n % n], self.sides[index % n]
        capture = None
        if self.captures is not None:
            name = _file_name(f"{scenario.name}__{ini.label}__{resp.label}")
            capture = os.path.join(self.captures, f"{name}.pcapng")
        return CellSpec(ini, resp, scenario.name, self.seed, capture)


def plan(sides: Sequence[Side], scenarios: Sequence[Scenario], *, seed: int = 0,
         captures: str | Path | None = None) -> Plan:
    """The cells of ``scenarios`` between every ordered pair of ``sides`` (a :class:`Plan`)."""
    return Plan(sides, scenarios, seed=seed, captures=captures)


def _file_name(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in text)


CHUNK = 64
"""Cells the executor runs ahead of the last one yielded: what is held in memory is at
most this many results, whatever the size of the matrix (each cell's capture and ladder
are on disk)."""


def iter_matrix(specs: Sequence[CellSpec], *, jobs: int = 1, scheduler: str | None = None,
                progress: Progress | None = None) -> Iterator[CellResult]:
    """Run the cells serially, on ``jobs`` local processes or on a Dask cluster, at most
    :data:`CHUNK` ahead of the last one yielded; the results come in ``specs`` order and
    are the same whatever runs them."""
    outcomes = iter_cases(run_cell, specs, jobs=jobs, scheduler=scheduler, window=CHUNK)
    for spec, outcome in zip(specs, outcomes, strict=True):
        if progress is not None:
            progress.advance()
        if outcome.result is not None:
            yield outcome.result
        else:
            yield CellResult(spec.initiator.label, spec.responder.label, spec.scenario,
                             status="error", reason=outcome.error or "the cell did not run")
    if progress is not None:
        progress.close()


def run_matrix(specs: Sequence[CellSpec], *, jobs: int = 1, scheduler: str | None = None,
               progress: Progress | None = None) -> list[CellResult]:
    """:func:`iter_matrix` as a list."""
    return list(iter_matrix(specs, jobs=jobs, scheduler=scheduler, progress=progress))
