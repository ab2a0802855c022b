"""Scenario files: a situation described in a few lines of TOML, run on the emulated
network, with expectations checked at the end.

    from mpa_emu.scenario import load_scenario, run_scenario
    run = run_scenario(load_scenario("scenarios/v2_accept.toml"))
    assert run.ok, [e.text(run.scenario.path) for e in run.failures()]

The file format is documented in ``docs/scenarios.md``; the examples ship in
``mpa_emu/examples/`` (``mpa-emu examples``).
"""

from mpa_emu.scenario.expect import ExpectResult
from mpa_emu.scenario.fields import ScenarioError
from mpa_emu.scenario.load import load_scenario, loads
from mpa_emu.scenario.model import Scenario
from mpa_emu.scenario.runner import ScenarioRun, build_network, run_scenario

__all__ = ["ExpectResult", "Scenario", "ScenarioError", "ScenarioRun", "build_network",
           "load_scenario", "loads", "run_scenario"]
