"""Replay as a stream: memory that does not grow with the capture, and captures read from
standard input.

The long captures are copies of the golden accept conversation (handshake,
MPA v2 request and reply, RTR, graceful close), each with its own client address, port
and ISNs, a few connections open at a time. What the replay must say is known from the
construction: every frame the server sent matches.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc
from dataclasses import replace
from pathlib import Path

import pytest

from mpa_emu.capture.pcap import PcapngWriter, read_capture
from mpa_emu.replay import ReplayOptions, replay_capture
from mpa_emu.wire import codec
from mpa_emu.wire.addr import ip_bytes
from mpa_emu.wire.segment import ACK, Segment

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "pcaps" / "golden" / "golden_accept_v2.pcapng"
SERVER = ip_bytes("192.168.20.2")
MASK32 = 0xFFFFFFFF


def _template() -> list[tuple[int, Segment]]:
    return [(r.time_ns, codec.decode(r.frame)) for r in read_capture(TEMPLATE)]


def _copies(path: Path, connections: int, spacing_ns: int = 20_000_000) -> int:
    """Write ``connections`` copies of the template; returns the server's frame count."""
    template = _template()
    t0 = template[0][0]
    frames: list[tuple[int, bytes]] = []
    server_frames = 0
    for i in range(connections):
        client = bytes([10, 9, i // 250, 1 + i % 250])
        port = 20000 + i
        dc = (i * 2_654_435_761) & MASK32
        ds = (i * 40_503 + 12_345) & MASK32
        for t, seg in template:
            from_client = seg.src_ip != SERVER
            server_frames += not from_client
            mine, theirs = (dc, ds) if from_client else (ds, dc)
            new = replace(seg, src_ip=client if from_client else SERVER,
                          dst_ip=SERVER if from_client else client,
                          sport=port if from_client else seg.sport,
                          dport=seg.dport if from_client else port,
                          seq=(seg.seq + mine) & MASK32,
                          ack=(seg.ack + theirs) & MASK32 if seg.flags & ACK else seg.ack)
            frames.append((i * spacing_ns + t - t0, codec.encode(new)))
    frames.sort(key=lambda f: f[0])
    with open(path, "wb") as out:
        writer = PcapngWriter(out, application="test")
        writer.add_interface("test")
        for t, data in frames:
            writer.write(1_700_000_000_000_000_000 + t, data)
        writer.flush()
    return server_frames


def _peak(path: Path) -> tuple[int, str]:
    tracemalloc.start()
    try:
        report = replay_capture(path, ReplayOptions(emulate=SERVER))
        _size, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, report.verdict()


@pytest.mark.memory
@pytest.mark.slow(5)
def test_replay_memory_stays_flat_as_the_capture_grows(tmp_path: Path) -> None:
    small, large = tmp_path / "small.pcapng", tmp_path / "large.pcapng"
    n_small = _copies(small, 100)
    n_large = _copies(large, 1000)
    peak_small, verdict_small = _peak(small)
    peak_large, verdict_large = _peak(large)
    ip = "192.168.20.2"
    assert verdict_small.startswith(f"MATCH: {n_small}/{n_small} frames of {ip} matched")
    assert verdict_large.startswith(f"MATCH: {n_large}/{n_large} frames of {ip} matched")
    # Ten times the frames; the whole-capture replay peaked about ten times higher.
    assert peak_large < 2 * peak_small, (peak_small, peak_large)


def _cli(args: list[str], stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "mpa_emu", "replay", *args], input=stdin,
                          capture_output=True, cwd=ROOT, check=False, timeout=120)


def test_replay_reads_a_capture_from_stdin(tmp_path: Path) -> None:
    path = tmp_path / "copies.pcapng"
    n = _copies(path, 40)
    out = tmp_path / "report.json"
    proc = _cli(["-", "--emulate", "192.168.20.2", "--json", str(out)], path.read_bytes())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().startswith(f"MATCH: {n}/{n} frames of 192.168.20.2 matched")
    data = json.loads(out.read_text())
    assert data["capture"] == "-"
    assert data["frames"] == len(_template()) * 40
    assert data["compared"] == data["matched"] == n
    # One accept per connection, as the recorded server answered every request.
    assert [a["verb"] for a in data["actions"]].count("accept") == 40


def test_replay_from_stdin_reports_a_divergence_like_the_sidecar_says() -> None:
    fixture = ROOT / "pcaps" / "backlog_drop.pcap"
    expect = json.loads((ROOT / "pcaps" / "backlog_drop.json").read_text())
    for replay in expect["replays"]:
        proc = _cli(["-", "--emulate", replay["emulate"], *replay["args"]],
                    fixture.read_bytes())
        assert proc.returncode == replay["expect"]["exit"], proc.stdout
        first = proc.stdout.decode().splitlines()[0]
        assert first.startswith(replay["expect"]["verdict"].upper())
        frame = replay["expect"].get("first_divergence_frame")
        if frame is not None:
            assert f"at frame {frame}:" in first


def test_semantic_replay_reads_stdin() -> None:
    fixture = ROOT / "pcaps" / "golden" / "golden_accept_v2.pcapng"
    proc = _cli(["-", "--emulate", "192.168.20.2", "--semantic"], fixture.read_bytes())
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.decode().startswith("MATCH (semantic)")


def test_spool_gives_back_what_was_appended_past_its_memory_chunk() -> None:
    # Items beyond the first chunk go to disk as rows of their fields; a class of one
    # field and one of several must both come back equal and in order.
    from dataclasses import dataclass

    from mpa_emu.capture.spool import RecordSpool

    @dataclass(frozen=True)
    class One:
        x: int

    @dataclass(frozen=True)
    class Two:
        x: int
        name: str

    ones: RecordSpool[One] = RecordSpool(One)
    twos: RecordSpool[Two] = RecordSpool(Two)
    for i in range(700):
        ones.append(One(i))
        twos.append(Two(i, f"n{i}"))
    assert len(ones) == len(twos) == 700
    assert list(ones) == [One(i) for i in range(700)]
    assert list(twos) == [Two(i, f"n{i}") for i in range(700)]
    assert twos[699] == Two(699, "n699")


def test_json_of_a_long_streamed_replay_names_every_upcall(tmp_path: Path) -> None:
    # 100 connections give 400 upcalls, more than the spool keeps in memory: the JSON
    # report reads them back from disk, each with the rdma_cm event it becomes.
    path = tmp_path / "copies.pcapng"
    _copies(path, 100)
    report = replay_capture(path, ReplayOptions(emulate=SERVER))
    assert report.verdict().startswith("MATCH")
    by_conn: dict[int, list[tuple[str, str | None]]] = {}
    for u in report.to_json()["upcalls"]:
        event = u["rdma_cm"]["event"] if u["rdma_cm"] else None
        by_conn.setdefault(u["conn"], []).append((u["event"], event))
    # Each accepted connection, closed by the peer: iw_cm's upcalls and what
    # cma_iw_handler makes of them (nothing for DISCONNECT; CLOSE is DISCONNECTED).
    assert len(by_conn) == 100
    for events in by_conn.values():
        assert events == [("CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_REQUEST"),
                          ("ESTABLISHED", "RDMA_CM_EVENT_ESTABLISHED"),
                          ("DISCONNECT", None),
                          ("CLOSE", "RDMA_CM_EVENT_DISCONNECTED")]


def test_a_replay_for_its_text_alone_keeps_no_journal(tmp_path: Path) -> None:
    # The command line without --json: the same text, without keeping every verb and
    # upcall (only the listener and the refused verbs, of which there are none here).
    path = tmp_path / "copies.pcapng"
    _copies(path, 100)
    full = replay_capture(path, ReplayOptions(emulate=SERVER))
    text_only = replay_capture(path, ReplayOptions(emulate=SERVER), journal=False)
    assert text_only.text() == full.text()
    assert len(full.run.upcalls) == 400
    assert len(text_only.run.upcalls) == 0
    assert [a.verb for a in full.run.actions].count("accept") == 100
    assert [a.verb for a in text_only.run.actions] == ["listen"]
