"""Both replay strategies tell the same story: for every capture the project ships
(pcaps/, pcaps/real/, pcaps/golden/) and each of its two busiest addresses, the streamed
pass either hands the case to the whole-capture replay (Fallback) or gives exactly the
report the whole-capture replay gives: the same text and the same JSON. And the frames:
the one driver fed by the streamed source and keeping everything emits the very frames,
times and sequence mappings the whole-capture replay emits. The expected side is the
whole-capture replay, which keeps every frame."""

from __future__ import annotations

from pathlib import Path

import pytest

from mpa_emu.capture.decode import Undecodable, decode_leniently
from mpa_emu.capture.pcap import read_capture
from mpa_emu.replay import ReplayOptions, replay_capture
from mpa_emu.replay.engine import Emitted, Engine, EngineOptions, KeepAll
from mpa_emu.replay.recording import load
from mpa_emu.replay.recording_source import RecordingSource
from mpa_emu.replay.stream import Fallback, stream_engine, stream_replay

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = sorted(p for d in ("pcaps", "pcaps/real", "pcaps/golden")
                  for p in (ROOT / d).glob("*.pcap*"))


def _busiest(path: Path) -> list[bytes]:
    counts: dict[bytes, int] = {}
    for record in read_capture(str(path)):
        lenient = decode_leniently(record.frame)
        if isinstance(lenient, Undecodable):
            continue
        for ip in (lenient.seg.src_ip, lenient.seg.dst_ip):
            counts[ip] = counts.get(ip, 0) + 1
    return sorted(counts, key=lambda a: (-counts[a], a))[:2]


CASES = [(path, ip) for path in CAPTURES for ip in _busiest(path)]


def test_the_cases_cover_every_shipped_capture() -> None:
    assert len(CAPTURES) >= 40
    assert {p for p, _ip in CASES} == set(CAPTURES)


@pytest.mark.parametrize(("path", "ip"), CASES,
                         ids=[f"{p.name}-{ip.hex()}" for p, ip in CASES])
def test_a_streamed_pass_reports_what_the_whole_replay_reports(
        path: Path, ip: bytes) -> None:
    options = ReplayOptions(emulate=ip)
    whole = replay_capture(path, options, recording=load(path, ip, options.checksums))
    try:
        streamed = stream_replay(str(path), str(path), options)
    except Fallback:
        return  # the whole-capture replay tells this case, as replay_capture does
    assert not whole.failed
    assert streamed.text() == whole.text()
    assert streamed.to_json() == whole.to_json()
    assert streamed.exit_code == whole.exit_code == 0


def _story(emitted: list[Emitted]) -> list[tuple[object, ...]]:
    return [(e.index, e.time_ns, e.seg, e.comment, e.conn, e.flow, e.seq_delta,
             e.after_frame) for e in emitted]


@pytest.mark.parametrize(("path", "ip"), CASES,
                         ids=[f"{p.name}-{ip.hex()}" for p, ip in CASES])
def test_the_streamed_source_drives_the_core_as_the_whole_recording_does(
        path: Path, ip: bytes) -> None:
    options = ReplayOptions(emulate=ip)
    recorded = load(path, ip, options.checksums)
    whole = Engine(recorded, EngineOptions(trace=False), source=RecordingSource(recorded)).run()
    try:
        frames, engine = stream_engine(str(path), str(path), options, sink=KeepAll(False))
        frames.play(engine)
    except Fallback:
        return  # a capture the streamed source cannot read as a stream
    assert whole.notes == engine.notes
    assert _story(engine.emitted) == _story(whole.emitted)
    assert [a.verb for a in engine.actions] == [a.verb for a in whole.actions
                                                 if a.verb != "listen"]
