"""``mpa-emu run A.toml B.toml ...`` as one campaign: each scenario file is a case,
run wherever the executor puts it, reported in the order the files were given."""

from __future__ import annotations

import io
import time
from dataclasses import dataclass, replace

from mpa_emu.campaign.junit import JUnitCase


@dataclass(frozen=True, slots=True)
class ScenarioCase:
    """One scenario file of the campaign and the seed that overrides its own."""

    path: str
    seed: int | None = None


@dataclass(frozen=True, slots=True)
class ScenarioOutcome:
    """What one scenario run reported: its verdict, the lines ``mpa-emu run -q``
    prints for it, and the failed expectations."""

    path: str
    name: str
    ok: bool
    text: str
    failures: tuple[str, ...]
    seconds: float


def run_scenario_case(case: ScenarioCase) -> ScenarioOutcome:
    """Load and run one scenario file; a bad file is a failed case naming the problem."""
    from mpa_emu.net.records import SpooledRecords
    from mpa_emu.scenario import ScenarioError, load_scenario, run_scenario

    started = time.perf_counter()
    try:
        sc = load_scenario(case.path)
        if case.seed is not None:
            sc = replace(sc, seed=case.seed)
        # The records on disk, as a single run keeps them: bounded memory per case.
        with SpooledRecords() as records:
            result = run_scenario(sc, records=records)
            failures = tuple(e.text(sc.path) for e in result.failures())
    except ScenarioError as exc:
        return ScenarioOutcome(case.path, case.path, False, f"ERROR: {exc}", (str(exc),),
                               time.perf_counter() - started)
    out = io.StringIO()
    for line in failures:
        out.write(line + "\n")
    if result.result.bounded:
        out.write(f"stopped by the event bound after {result.result.events} events\n")
    total = len(result.expectations)
    out.write(f"{'PASS' if result.ok else 'FAIL'}: {total - len(failures)} of {total} "
              f"expectations hold ({sc.path})")
    return ScenarioOutcome(case.path, sc.name, result.ok, out.getvalue(), failures,
                           time.perf_counter() - started)


def scenario_junit(outcome: ScenarioOutcome | None, path: str, error: str | None) -> JUnitCase:
    """One scenario as a JUnit test case."""
    if outcome is None:
        return JUnitCase(path, "mpa-emu run", error=f"could not run: {error}")
    return JUnitCase(outcome.name, "mpa-emu run", outcome.seconds,
                     failure=None if outcome.ok else outcome.text, output=outcome.text)
