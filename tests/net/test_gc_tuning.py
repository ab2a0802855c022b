"""The network's run collects young garbage less often while it runs, and leaves the
collector's thresholds as it found them, even when a callback raises."""

from __future__ import annotations

import gc

import pytest

from mpa_emu.gc_tuning import YOUNG_COLLECTION, fewer_young_collections
from mpa_emu.net import Network


def test_thresholds_come_back_after_the_block_and_after_an_exception() -> None:
    before = gc.get_threshold()
    with fewer_young_collections():
        assert gc.get_threshold() == (max(before[0], YOUNG_COLLECTION), *before[1:])
    assert gc.get_threshold() == before
    with pytest.raises(RuntimeError), fewer_young_collections():
        raise RuntimeError("boom")
    assert gc.get_threshold() == before


def test_a_higher_threshold_set_by_the_application_is_kept() -> None:
    before = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION * 2, *before[1:])
    try:
        with fewer_young_collections():
            assert gc.get_threshold()[0] == YOUNG_COLLECTION * 2
    finally:
        gc.set_threshold(*before)


def test_network_run_raises_the_threshold_only_while_it_runs() -> None:
    before = gc.get_threshold()
    seen: list[int] = []
    net = Network(1)
    net.add_host("alice", "192.0.2.1")
    net.at(5, lambda: seen.append(gc.get_threshold()[0]))
    net.run()
    assert seen == [max(before[0], YOUNG_COLLECTION)]
    assert gc.get_threshold() == before
