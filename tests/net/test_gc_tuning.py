"""The network's run and the streaming paths collect young garbage less often while they
run, and leave the collector's thresholds as they found them, even when a callback
raises; a streaming loop's full collections come less often the larger the heap, and
what it sets aside is back in the collector's care when the outermost block ends."""

from __future__ import annotations

import gc
import sys

import pytest

from mpa_emu.gc_tuning import YOUNG_COLLECTION, Collector, fewer_young_collections, streaming
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


def test_streaming_blocks_nest_and_the_outermost_puts_everything_back() -> None:
    before = gc.get_threshold()
    with streaming() as outer:
        with streaming() as inner:
            inner.keep(collect=False)
            assert gc.get_freeze_count() > 0
        # Set aside until the outermost block ends, thresholds still raised.
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold()[0] == max(before[0], YOUNG_COLLECTION)
        outer.tick()
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before


def test_keep_outside_a_streaming_block_does_nothing() -> None:
    Collector(None).keep()
    assert gc.get_freeze_count() == 0


def test_the_collection_interval_grows_with_the_heap() -> None:
    collections: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "stop" and info["generation"] == 2:
            collections.append(1)

    collector = Collector(10)
    gc.callbacks.append(seen)
    try:
        for _ in range(30):
            collector.tick()
        on_the_same_heap = len(collections)
        held = [[i] for i in range(4 * sys.getallocatedblocks())]
        collections.clear()
        for _ in range(30):
            collector.tick()
        on_a_larger_heap = len(collections)
        del held
    finally:
        gc.callbacks.remove(seen)
    assert on_the_same_heap == 3
    # The first collection on the larger heap finds it at least four times the size:
    # the next waits four times as long.
    assert on_a_larger_heap <= 1
