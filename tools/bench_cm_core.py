#!/usr/bin/env python3
"""CM core benchmark without the network layer: two CmCore instances joined by a direct
loop, so the figures are the state machine's own cost.

    python tools/bench_cm_core.py                    # 2000 cycles (best of 5 rounds), 10k
    python tools/bench_cm_core.py --cycles 5000 --conns 10000 100000
    python tools/bench_cm_core.py --profile          # cProfile of the cycle run

A cycle is connect, MPA v2 negotiation, accept, RTR, graceful close through the
offloaded QPs; it is timed alone and with every frame also encoded and decoded by
mpa_emu.wire.codec, as a wire would. Times are process CPU time, best of rounds. Memory is
measured with tracemalloc (both endpoints: nodes, QPs and tables) for established
connections, and split by the package that allocated it.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import importlib.util
import pstats
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

if importlib.util.find_spec("mpa_emu") is None:  # not installed: the checkout's own
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.irdma.config import CmConfig
from mpa_emu.stacks.irdma.core import CmCore

from mpa_emu.wire.segment import Segment

IP_A, IP_P = bytes([192, 0, 2, 1]), bytes([192, 0, 2, 2])
MAC_A, MAC_P = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")
PORT = 31000


def pair() -> tuple[CmCore, CmCore]:
    a = CmCore("alice", MAC_A, CmConfig(), seed=1)
    p = CmCore("bob", MAC_P, CmConfig(), seed=2)
    a.add_address(IP_A)
    p.add_address(IP_P)
    a.set_neighbour(IP_P, MAC_P)
    p.set_neighbour(IP_A, MAC_A)
    p.create_listen(IP_P, PORT, backlog=1 << 20)
    return a, p


def make_pump(a: CmCore, p: CmCore, wire: Callable[[Segment], Segment] | None,
              now: list[int]) -> Callable[[], int]:
    def pump() -> int:
        frames = 0
        moved = True
        while moved:
            moved = False
            for src, dst in ((a, p), (p, a)):
                out = src.frames_to_send()
                if out:
                    moved = True
                    for tx in out:
                        frames += 1
                        seg = tx.segment if wire is None else wire(tx.segment)
                        dst.receive(seg, now[0])
        return frames
    return pump


def run_cycles(cycles: int, use_codec: bool) -> tuple[float, float]:
    """Seconds per cycle and frames per cycle."""
    a, p = pair()
    wire = None
    if use_codec:
        from mpa_emu.wire import codec

        def wire(seg: Segment) -> Segment:
            return codec.decode(codec.encode(seg))
    now = [0]
    pump = make_pump(a, p, wire, now)
    frames = 0
    gc.collect()
    t0 = time.process_time()
    for i in range(cycles):
        now[0] += 1_000_000
        conn = a.connect(IP_A, IP_P, PORT, local_port=10000 + i % 50000, now_ns=now[0])
        frames += pump()
        while (up := p.next_event()) is not None:
            if up.event is IwEvent.CONNECT_REQUEST:
                p.accept(up.conn, private_data=b"welcome", now_ns=now[0])
        frames += pump()
        a.disconnect(conn, graceful=True, now_ns=now[0])
        frames += pump()
        for core in (a, p):
            while core.next_event() is not None:
                pass
        for core in (a, p):
            t = core.get_timer()
            while t is not None and t <= now[0] + 500_000_000:
                now[0] = max(now[0], t)
                core.handle_timer(t)
                frames += pump()
                t = core.get_timer()
    elapsed = time.process_time() - t0
    left = len(a.conns()) + len(p.conns())
    if left:
        raise SystemExit(f"{left} nodes left after the cycles: not a clean cycle")
    return elapsed / cycles, frames / cycles


def one_cycle_segments() -> list[Segment]:
    """The segments of one cycle, as the two cores sent them."""
    seen: list[Segment] = []

    def keep(seg: Segment) -> Segment:
        seen.append(seg)
        return seg
    a, p = pair()
    now = [0]
    pump = make_pump(a, p, keep, now)
    conn = a.connect(IP_A, IP_P, PORT, now_ns=0)
    pump()
    while (up := p.next_event()) is not None:
        if up.event is IwEvent.CONNECT_REQUEST:
            p.accept(up.conn, private_data=b"welcome", now_ns=0)
    pump()
    a.disconnect(conn, graceful=True, now_ns=0)
    pump()
    return seen


def time_codec(segments: list[Segment], reps: int = 200) -> float:
    """Seconds to encode and decode the frames of one cycle with mpa_emu.wire.codec."""
    from mpa_emu.wire import codec
    best = float("inf")
    for _ in range(5):
        t0 = time.process_time()
        for _ in range(reps):
            for seg in segments:
                codec.decode(codec.encode(seg))
        best = min(best, (time.process_time() - t0) / reps)
    return best


def established(count: int) -> tuple[float, float, str, dict[str, float]]:
    """Bytes per established connection (both endpoints), seconds, states, and the
    bytes per connection by the package directory that allocated them."""
    a, p = pair()
    now = [0]
    pump = make_pump(a, p, None, now)
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    t0 = time.process_time()
    for i in range(count):
        now[0] += 1000
        if i % 60000 == 0 and i:
            p.create_listen(IP_P, PORT + i // 60000, backlog=1 << 20)
        a.connect(IP_A, IP_P, PORT + i // 60000, local_port=1024 + i % 60000,
                  now_ns=now[0])
        pump()
        while (up := p.next_event()) is not None:
            if up.event is IwEvent.CONNECT_REQUEST:
                p.accept(up.conn, now_ns=now[0])
        pump()
        while a.next_event() is not None:
            pass
        while p.next_event() is not None:
            pass
    # let the SYN-ACK/MPA retransmission entries and the RTS waits run out
    now[0] += 20_000_000_000
    a.handle_timer(now[0])
    p.handle_timer(now[0])
    pump()
    seconds = time.process_time() - t0
    gc.collect()
    used = tracemalloc.get_traced_memory()[0] - base
    by_dir: dict[str, float] = {}
    for stat in tracemalloc.take_snapshot().statistics("filename"):
        name = stat.traceback[0].filename
        where = ("mpa_emu/cm" if "/mpa_emu/stacks/irdma/" in name else
                 "mpa_emu/offload" if "/mpa_emu/stacks/irdma/offload/" in name else "other")
        by_dir[where] = by_dir.get(where, 0) + stat.size
    tracemalloc.stop()
    n = len(a.conns())
    states: dict[str, int] = {}
    for name, core in (("alice", a), ("bob", p)):
        for c in core.conns():
            key = f"{name}:{core.node(c).state.name}"  # type: ignore[union-attr]
            states[key] = states.get(key, 0) + 1
    per = {k: v / max(n, 1) for k, v in by_dir.items()}
    return (used / max(n, 1), seconds, ", ".join(f"{k} {v}" for k, v in
                                                 sorted(states.items())), per)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cycles", type=int, default=2000)
    ap.add_argument("--conns", type=int, nargs="*", default=[10000])
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    if args.profile:
        cProfile.runctx("run_cycles(args.cycles, False)", globals(), locals(),
                        "/tmp/bench_cm_core.prof")
        pstats.Stats("/tmp/bench_cm_core.prof").sort_stats("tottime").print_stats(30)
        return 0
    codec_cost = time_codec(one_cycle_segments())
    print(f"{'codec encode+decode, same frames':34} {codec_cost * 1e6:9.1f} us/cycle "
          f"{1 / codec_cost:8.0f} cycles/s")
    rounds = 5  # best of: the machine is shared, the minimum is the least disturbed
    for use_codec in (False, True):
        per, frames = min(run_cycles(max(args.cycles // rounds, 1), use_codec)
                          for _ in range(rounds))
        label = "cycle, core only" if not use_codec else "cycle, core + codec per frame"
        print(f"{label:34} {per * 1e6:9.1f} us/cycle {1 / per:8.0f} cycles/s "
              f"({frames:.0f} frames/cycle, {per / codec_cost:.2f}x codec)")
    for count in args.conns:
        per_conn, seconds, detail, per_dir = established(count)
        print(f"{count:7d} established: {per_conn:7.0f} bytes/connection (both ends) "
              f"in {seconds:.1f} s under tracemalloc; {detail}")
        split = ", ".join(f"{k} {v:.0f}" for k, v in sorted(per_dir.items()))
        print(f"{'':7} allocated by: {split} (bytes per connection, both ends)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
