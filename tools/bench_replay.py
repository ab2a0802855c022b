#!/usr/bin/env python3
"""Benchmark ``mpa-emu replay``: frames per second on a capture of about 100,000 frames
(thousands of connections), side by side with ``tshark -r FILE -T fields`` decoding MPA
on the same file.

The capture is built from the golden accept scenario (pcaps/golden/golden_accept_v2.pcapng:
handshake, MPA v2 request and reply, RTR, graceful close, 13 frames): each connection is a
copy with its own client address and port, its own ISNs and a start time staggered by
``--spacing`` so that thousands are open at once. The passive host is emulated; the run
must end in MATCH or the benchmark is void.

Usage: python tools/bench_replay.py [--connections N] [--spacing-us US] [--keep FILE]
                                    [--profile] [--repeat R]
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import importlib.util
import io
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if importlib.util.find_spec("mpa_emu") is None:  # not installed: the checkout's own
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mpa_emu.capture.pcap import PcapngWriter, read_capture
from mpa_emu.replay import ReplayOptions, replay_capture
from mpa_emu.wire import codec
from mpa_emu.wire.addr import ip_bytes

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "pcaps" / "golden" / "golden_accept_v2.pcapng"
SERVER = "192.168.20.2"
TSHARK_FIELDS = ["-e", "frame.number", "-e", "tcp.flags.str", "-e", "iwarp_mpa.key.req",
                 "-e", "iwarp_mpa.key.rep", "-e", "iwarp_mpa.rej_flag", "-e", "iwarp_mpa.rev",
                 "-e", "iwarp_mpa.pdlength", "-e", "iwarp_mpa.privatedata",
                 "-e", "iwarp_rdma.opcode"]
TSHARK_OPTS = ["-o", "tcp.try_heuristic_first:TRUE", "--enable-heuristic", "iwarp_mpa_tcp"]
MASK32 = 0xFFFFFFFF


def build_capture(path: Path, connections: int, spacing_ns: int, close: int = 1) -> int:
    """Write the benchmark capture; returns its frame count. ``close=0`` leaves every
    connection open: the template's frames up to the last one before the first FIN (10 a
    connection), so that every connection of the capture is alive at its end."""
    template = [(r.time_ns, codec.decode(r.frame)) for r in read_capture(TEMPLATE)]
    if not close:
        first_fin = next(i for i, (_t, seg) in enumerate(template) if seg.flags & 0x01)
        template = template[:first_fin]
    t0 = template[0][0]
    client_ip = template[0][1].src_ip
    server_ip = ip_bytes(SERVER)
    frames: list[tuple[int, bytes]] = []
    for i in range(connections):
        ip = bytes([10, 1 + i // 60000, (i // 250) % 240, 1 + i % 250])
        port = 1024 + i % 60000
        d_client = (i * 2_654_435_761) & MASK32  # a different ISN for every connection
        d_server = (i * 40_503 + 0x5BD1E995) & MASK32
        start = i * spacing_ns
        for t, seg in template:
            from_client = seg.src_ip == client_ip
            dc = d_client if from_client else d_server
            da = d_server if from_client else d_client
            ack = (seg.ack + da) & MASK32 if seg.flags & 0x10 else seg.ack
            new = dataclasses.replace(
                seg,
                src_ip=ip if from_client else server_ip,
                dst_ip=server_ip if from_client else ip,
                sport=port if from_client else seg.sport,
                dport=seg.dport if from_client else port,
                seq=(seg.seq + dc) & MASK32, ack=ack)
            frames.append((start + t - t0, codec.encode(new)))
    frames.sort(key=lambda f: f[0])
    with open(path, "wb") as out:
        writer = PcapngWriter(out, application="bench_replay")
        writer.add_interface("bench")
        base = 1_767_225_600_000_000_000
        for t, data in frames:
            writer.write(base + t, data)
        writer.flush()
    return len(frames)


def build_syn_flood(path: Path, syns: int, spacing_ns: int = 1_000) -> int:
    """Write a SYN flood against the benchmark server: ``syns`` SYNs to its MPA port,
    each from its own (spoofed) address and port, none answered in the capture (taken
    upstream of the server). Returns the frame count."""
    template = [codec.decode(r.frame) for r in read_capture(TEMPLATE)]
    syn = template[0]
    server_ip = ip_bytes(SERVER)
    with open(path, "wb") as out:
        writer = PcapngWriter(out, application="bench_replay")
        writer.add_interface("bench")
        base = 1_767_225_600_000_000_000
        for i in range(syns):
            ip = bytes([10, 64 + i // 62500 % 64, (i // 250) % 250, 1 + i % 250])
            new = dataclasses.replace(syn, src_ip=ip, dst_ip=server_ip,
                                      sport=1024 + i % 60000,
                                      seq=(i * 2_654_435_761) & MASK32)
            writer.write(base + i * spacing_ns, codec.encode(new))
        writer.flush()
    return syns


def time_replay(path: Path, profile: bool) -> tuple[float, str]:
    options = ReplayOptions(emulate=ip_bytes(SERVER))
    prof = cProfile.Profile() if profile else None
    start = time.perf_counter()
    if prof is not None:
        prof.enable()
    report = replay_capture(path, options)
    if prof is not None:
        prof.disable()
    elapsed = time.perf_counter() - start
    if prof is not None:
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(25)
        print(buf.getvalue())
    return elapsed, report.verdict()


def breakdown(path: Path) -> dict[str, float]:
    """Where an in-process replay spends its time: capture loading, each core entry
    point (wrapped with a timer), the comparison, and the rest (replay's own engine)."""
    from collections.abc import Callable
    from typing import Any

    from mpa_emu.replay.compare import compare
    from mpa_emu.replay.engine import Engine, EngineOptions
    from mpa_emu.replay.recording import load
    from mpa_emu.replay.recording_source import RecordingSource

    spent: dict[str, float] = {}
    start = time.perf_counter()
    rec = load(path, ip_bytes(SERVER))
    spent["load (read + decode + classify)"] = time.perf_counter() - start
    engine = Engine(rec, EngineOptions(trace=False), source=RecordingSource(rec))
    core: Any = engine.core

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - t
        return wrapper

    for name in ("receive", "handle_timer", "get_timer", "frames_to_send", "next_event",
                 "accept", "reject", "connect", "disconnect", "create_listen"):
        setattr(core, name, timed(f"core.{name}", getattr(core, name)))
    t = time.perf_counter()
    run = engine.run()
    total_run = time.perf_counter() - t
    core_total = sum(v for k, v in spent.items() if k.startswith("core."))
    spent["replay engine (own code)"] = total_run - core_total
    t = time.perf_counter()
    compare(rec, run, tolerance_ns=10_000_000, strict_offload=False, semantic=False)
    spent["compare"] = time.perf_counter() - t
    return spent


def time_cli(path: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "mpa_emu", "replay", str(path), "--emulate",
                           SERVER], capture_output=True, text=True, cwd=ROOT, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"replay CLI failed ({proc.returncode}): {proc.stdout[:300]}")
    return elapsed


def time_tshark(path: Path) -> float | None:
    if shutil.which("tshark") is None:
        return None
    start = time.perf_counter()
    proc = subprocess.run(["tshark", "-r", str(path), *TSHARK_OPTS, "-T", "fields",
                           *TSHARK_FIELDS], capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"tshark failed: {proc.stderr[:300]!r}")
    lines = proc.stdout.count(b"\n")
    print(f"tshark printed {lines} lines")
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=7700,
                    help="connections (13 frames each; default 7700 = 100,100 frames)")
    ap.add_argument("--spacing-us", type=int, default=100,
                    help="start-time spacing between connections in microseconds")
    ap.add_argument("--keep", type=Path, help="keep the generated capture here")
    ap.add_argument("--profile", action="store_true", help="profile the in-process replay")
    ap.add_argument("--repeat", type=int, default=1, help="best of R in-process runs")
    args = ap.parse_args()
    tmpdir = Path(tempfile.mkdtemp(prefix="bench_replay"))
    path = args.keep or tmpdir / "bench.pcapng"
    try:
        n = build_capture(path, args.connections, args.spacing_us * 1000)
        print(f"capture: {n} frames, {args.connections} connections, "
              f"{os.path.getsize(path)} bytes")
        load1 = os.getloadavg()[0]
        print(f"machine: {os.cpu_count()} CPUs, load average {load1:.2f} at start "
              "(numbers are only comparable at similar load)")
        best = float("inf")
        verdict = ""
        for _ in range(args.repeat):
            elapsed, verdict = time_replay(path, args.profile)
            best = min(best, elapsed)
        print(f"verdict: {verdict}")
        if not verdict.startswith("MATCH"):
            print("benchmark void: the replay did not match", file=sys.stderr)
            return 1
        print(f"replay (in process): {best:.2f} s, {n / best:,.0f} frames/s")
        parts = breakdown(path)
        whole = sum(parts.values())
        print("where the time goes (one more in-process run, core entry points timed):")
        for name, secs in sorted(parts.items(), key=lambda kv: -kv[1]):
            print(f"  {name:36s} {secs:7.2f} s  {100 * secs / whole:5.1f} %  "
                  f"{1e6 * secs / n:7.1f} us/frame")
        cli = time_cli(path)
        print(f"replay (CLI, process start included): {cli:.2f} s, {n / cli:,.0f} frames/s")
        ts = time_tshark(path)
        if ts is not None:
            print(f"tshark -T fields (MPA heuristics on): {ts:.2f} s, {n / ts:,.0f} frames/s")
            print(f"ratio replay CLI / tshark speed: {ts / cli:.2f} "
                  f"(>= 1.0 means at least as fast as tshark)")
        return 0
    finally:
        if args.keep is None:
            shutil.rmtree(tmpdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
