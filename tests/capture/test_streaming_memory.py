"""Reading a capture as a stream: memory does not grow with the capture's length, and the
report is the one of the whole capture read at once."""

from __future__ import annotations

import dataclasses
import gc
import io
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from mpa_emu.capture.pcap import read_capture
from mpa_emu.views.inspection import CaptureReport, RawFrame, read_frames, stream_connections
from mpa_emu.wire import codec
from mpa_emu.wire.interning import forget

GOLDEN = Path(__file__).resolve().parents[2] / "pcaps" / "golden" / "golden_accept_v2.pcapng"


def _frames(connections: int) -> Iterator[RawFrame]:
    """``connections`` copies of a golden connection one after the other (one second
    apart, each on its own client port), made as they are read: nothing but the
    analysis holds memory."""
    template = [(r.time_ns or 0, codec.decode(r.frame)) for r in read_capture(GOLDEN)]
    client = template[0][1].src_ip
    number = 0
    for i in range(connections):
        port = 20000 + i
        for t, seg in template:
            mine = seg.src_ip == client
            seg = dataclasses.replace(seg, sport=port if mine else seg.sport,
                                      dport=seg.dport if mine else port)
            data = codec.encode(seg)
            number += 1
            yield RawFrame(number=number, time=(i * 1_000_000_000 + t) / 1e9, linktype=1,
                           data=data, wirelen=len(data))


def _peak(connections: int) -> tuple[int, int, int]:
    """Peak traced memory, connections reported, frames read."""
    report = CaptureReport(path="generated")
    # The same start whatever ran before in this process: the shared-value tables
    # empty, the garbage of earlier tests gone.
    forget()
    gc.collect()
    tracemalloc.start()
    try:
        ended = sum(1 for _ in stream_connections(_frames(connections), report,
                                                  linger=50, idle=500))
        return tracemalloc.get_traced_memory()[1], ended, report.frames
    finally:
        tracemalloc.stop()


@pytest.mark.memory
@pytest.mark.slow(6)
def test_peak_memory_stays_flat_as_the_capture_grows() -> None:
    small_peak, small_conns, small_frames = _peak(100)
    large_peak, large_conns, large_frames = _peak(1000)
    assert (small_conns, large_conns) == (100, 1000)
    assert large_frames == 10 * small_frames
    # Ten times the frames, the same connections held at once: the same peak, give or
    # take the allocator (frames kept whole would peak about ten times higher).
    assert large_peak < 1.5 * small_peak, (small_peak, large_peak)


def test_stdin_dash_reads_the_same_frames(monkeypatch: object) -> None:
    import sys

    data = GOLDEN.read_bytes()
    stdin = io.TextIOWrapper(io.BytesIO(data))
    monkeypatch.setattr(sys, "stdin", stdin)  # type: ignore[attr-defined]
    assert [f.data for f in read_frames("-")] == [r.frame for r in read_capture(GOLDEN)]
