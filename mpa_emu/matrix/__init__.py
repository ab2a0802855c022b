"""``mpa-emu matrix``: every ordered pair of iWARP stacks through a catalogue of
scenarios, recording in each cell the frames, the iw_cm upcalls and the rdma_cm events
each application receives, the RTR used and any Terminate.

- :mod:`~mpa_emu.matrix.sides`: a stack with its parameters, and the default sides;
- :mod:`~mpa_emu.matrix.catalogue`: the scenarios;
- :mod:`~mpa_emu.matrix.cell`: one cell, run anywhere (picklable in and out);
- :mod:`~mpa_emu.matrix.output`: the terminal table, JSON and HTML.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mpa_emu.campaign.cases import Progress
from mpa_emu.campaign.executor import run_cases
from mpa_emu.matrix.catalogue import SCENARIOS, Scenario, select
from mpa_emu.matrix.cell import CellResult, CellSpec, run_cell
from mpa_emu.matrix.sides import Side, default_sides, parse_side

__all__ = ["SCENARIOS", "CellResult", "CellSpec", "Scenario", "Side", "default_sides",
           "parse_side", "plan", "run_cell", "run_matrix", "select"]


def plan(sides: Sequence[Side], scenarios: Sequence[Scenario], *, seed: int = 0,
         captures: str | Path | None = None) -> list[CellSpec]:
    """Every (scenario, initiator, responder) cell, scenarios outermost, in a fixed order."""
    specs = []
    for scenario in scenarios:
        for ini in sides:
            for resp in sides:
                capture = None
                if captures is not None:
                    name = _file_name(f"{scenario.name}__{ini.label}__{resp.label}")
                    capture = str(Path(captures) / f"{name}.pcapng")
                specs.append(CellSpec(ini, resp, scenario.name, seed, capture))
    return specs


def _file_name(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in text)


def run_matrix(specs: Sequence[CellSpec], *, jobs: int = 1, scheduler: str | None = None,
               progress: Progress | None = None) -> list[CellResult]:
    """Run the cells serially, on ``jobs`` local processes or on a Dask cluster; the
    results come back in ``specs`` order and are the same whatever runs them."""
    outcomes = run_cases(run_cell, list(specs), jobs=jobs, scheduler=scheduler,
                         progress=progress)
    results = []
    for spec, outcome in zip(specs, outcomes, strict=True):
        if outcome.result is not None:
            results.append(outcome.result)
        else:
            results.append(CellResult(spec.initiator.label, spec.responder.label,
                                      spec.scenario, status="error",
                                      reason=outcome.error or "the cell did not run"))
    return results
