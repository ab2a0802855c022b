"""``mpa-emu fuzz --mixed``: every ordered pair of registered stacks, parameters in and
just outside their ranges, through a hostile middlebox; the invariants catch what they
are for (small in CI)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mpa_emu.campaign.mixed import (
    Broken,
    MixedCase,
    MixedChunk,
    _sequence_problem,
    case_of,
    pairs,
    run_case,
    run_mixed_chunk,
)
from mpa_emu.stacks import STACKS
from mpa_emu.ulp.rdma_cm import RdmaCmEventType as Ev


def test_every_ordered_pair_of_registered_stacks_comes_in_turn() -> None:
    n = len(STACKS)
    assert len(pairs()) == n * n
    got = {(c.initiator, c.responder) for c in (case_of(5, i) for i in range(n * n))}
    assert got == {(a, b) for a in STACKS for b in STACKS}


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_a_parameter_just_outside_its_range_is_refused_in_one_line(stack: str) -> None:
    p = next(q for q in STACKS[stack].params if q.kind is int)
    case = MixedCase(0, stack, stack, ({p.name: p.maximum + 1}, {}), "accept", ())
    assert run_case(case) == (-1, 0)


def test_a_clean_case_ends_idle_with_its_outcome() -> None:
    steps, events = run_case(MixedCase(0, "irdma", "irdma", ({}, {}), "accept", ()))
    assert steps == 0 and events > 0


@pytest.mark.parametrize(("events", "problem"), [
    ([Ev.ESTABLISHED, Ev.DISCONNECTED], ""),
    ([Ev.CONNECT_REQUEST, Ev.ESTABLISHED, Ev.DISCONNECTED], ""),
    ([Ev.REJECTED], ""),
    ([Ev.DISCONNECTED], "DISCONNECTED before any connect outcome or request"),
    ([Ev.ESTABLISHED, Ev.DISCONNECTED, Ev.DISCONNECTED], "after DISCONNECTED"),
    ([Ev.REJECTED, Ev.ESTABLISHED], "after the failed connect"),
])
def test_the_rdma_cm_sequence_rule(events: list[Ev], problem: str) -> None:
    got = _sequence_problem(events)
    assert (problem in got) if problem else got == ""


def test_a_chunk_is_the_same_every_time() -> None:
    one, two = run_mixed_chunk(MixedChunk(3, 0, 40)), run_mixed_chunk(MixedChunk(3, 0, 40))
    assert one.ran == two.ran == 40
    assert (one.counts, one.steps, one.events) == (two.counts, two.steps, two.events)
    assert [f.message for f in one.failures] == [f.message for f in two.failures]


def test_broken_names_its_invariant() -> None:
    assert Broken("acks", "x").invariant == "acks"


def test_the_command_runs_and_refuses_mixing_modes() -> None:
    got = subprocess.run([sys.executable, "-m", "mpa_emu", "fuzz", "--mixed", "--cases",
                          "60", "--seed", "2"], capture_output=True, text=True, timeout=300)
    assert got.returncode in (0, 1), got.stderr
    assert "60 cases" in got.stdout and "Traceback" not in got.stderr
    bad = subprocess.run([sys.executable, "-m", "mpa_emu", "fuzz", "--mixed", "--two-cores"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
