"""Property: whatever a peer sends, receive() never raises, a verb either acts or raises
CmError having changed nothing (but irdma_accept's own failures), every emitted frame
decodes with good checksums, no node rests in a state the table marks unreachable, and
once the clock has run out nothing is left behind except what the kernel itself leaks,
each leak named.

The scripts come from the generator ``mpa-emu fuzz`` uses (mpa_emu.campaign.generators),
drawn here by hypothesis so a failure shrinks; the checks are the fuzzer's."""

from __future__ import annotations

from typing import TypeVar

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mpa_emu.campaign import generators
from mpa_emu.campaign.fuzz import execute

T = TypeVar("T")


class HypothesisDraw:
    """The generator's choices drawn from hypothesis data."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data

    def integer(self, lo: int, hi: int) -> int:
        return self.data.draw(st.integers(lo, hi))

    def pick(self, options: list[T]) -> T:
        return self.data.draw(st.sampled_from(options))

    def binary(self, max_size: int) -> bytes:
        return self.data.draw(st.binary(max_size=max_size))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_random_segments_never_escape_and_leave_only_named_kernel_leaks(
        data: st.DataObject) -> None:
    script = generators.script(HypothesisDraw(data))
    assert execute(script) is None, script


def test_the_checks_see_a_real_failure() -> None:
    # peer 0 brought to MPAREQ_RCVD, then accepted (conn 2 of the active node's 1 and
    # peer 0's 2): with the reply spoiled on its way out the frame invariant breaks
    script = generators.Script(0, True, False, (generators.VerbStep("accept", 1, b""),))
    assert execute(script) is None
    broken = execute(script, plant_name="reply-checksum")
    assert broken is not None and broken.invariant == "frame"
