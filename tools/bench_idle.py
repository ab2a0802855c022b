#!/usr/bin/env python3
"""Benchmark: what idle connections cost the rest of the network.

Two emulated hosts hold ``--sizes`` established, offloaded, idle connections (real
handshakes, RTR, ESTABLISHED). Then, on the same hosts, alice runs ``--cycles`` full
cycles against another of bob's ports (connect from an ephemeral port, MPA v2, accept,
RTR, graceful close until both nodes are freed), and the CPU time per cycle is measured;
then the clock is advanced ``--quiet`` seconds with no traffic. Idle connections keep no
timer and sit in hash tables and lists that each operation reaches in O(1), so neither
figure should follow the number of idle connections. The goal: the same within 1.5x
from the smallest to the largest size.

Usage: python tools/bench_idle.py [--sizes 1000,100000] [--cycles 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import statistics
import sys
import time
from pathlib import Path

if importlib.util.find_spec("mpa_emu") is None:  # not installed: the checkout's own
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mpa_emu.stacks.contract.events import IwEvent, Upcall

from mpa_emu.net import Accept, Host, Network

CLIENT, SERVER = "192.0.2.1", "192.0.2.2"
IDLE_PORT, CYCLE_PORT = 31000, 32000
PER_PORT = 50_000
MS = 1_000_000


def idle_network(idle: int) -> tuple[Network, Host]:
    """Two hosts with ``idle`` established offloaded connections, run until quiet; alice
    closes each later connection as soon as it is connected."""
    net = Network(1, capture=False, tracing=False, keep_upcalls=False)
    alice = net.add_host("alice", CLIENT)
    bob = net.add_host("bob", SERVER)
    for p in range(idle // PER_PORT + 1):
        bob.listen(IDLE_PORT + p, SERVER, policy=Accept(), backlog=1024)
    bob.listen(CYCLE_PORT, SERVER, policy=Accept(b"welcome"))
    net.run()
    for i in range(idle):
        net.at(net.now_ns + (i // 8) * 100_000, alice.connect, SERVER,
               IDLE_PORT + i // PER_PORT, local_port=10000 + i % PER_PORT)
    result = net.run(max_events=idle * 50 + 1000)
    if result.reason != "idle":
        raise SystemExit(f"building {idle} idle connections ended: {result.reason}")

    def close_when_connected(host: Host, upcall: Upcall) -> None:
        if upcall.status == 0 and upcall.conn > idle:
            host.disconnect(upcall.conn, graceful=True)

    alice.on(close_when_connected, IwEvent.CONNECT_REPLY)
    return net, alice


def time_cycles(net: Network, alice: Host, cycles: int) -> float:
    """CPU seconds per cycle."""
    start_ns = net.now_ns
    for i in range(cycles):
        net.at(start_ns + (i + 1) * 2 * MS, alice.connect, SERVER, CYCLE_PORT,
               private_data=b"hello", ird=16, ord=16)
    gc.collect()
    t0 = time.process_time()
    result = net.run(max_events=cycles * 100)
    elapsed = time.process_time() - t0
    if result.reason != "idle":
        raise SystemExit(f"cycles ended: {result.reason}")
    return elapsed / cycles


def time_quiet(net: Network, seconds: int) -> float:
    """CPU seconds to advance the clock ``seconds`` of virtual time with no traffic."""
    t0 = time.process_time()
    net.run(until_ns=net.now_ns + seconds * 1_000_000_000)
    return time.process_time() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,100000")
    ap.add_argument("--cycles", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quiet", type=int, default=600, help="virtual seconds of silence")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    per_cycle: dict[int, float] = {}
    quiet: dict[int, float] = {}
    for size in sizes:
        net, alice = idle_network(size)
        live = len(alice.conns())
        rounds = [time_cycles(net, alice, args.cycles) for _ in range(args.rounds)]
        per_cycle[size] = statistics.median(rounds)
        quiet[size] = time_quiet(net, args.quiet)
        if len(alice.conns()) != live:
            raise SystemExit("an idle connection changed while the cycles ran")
        print(f"idle {size:>7} connections: cycle median {per_cycle[size] * 1e6:7.1f} us "
              f"[{min(rounds) * 1e6:.1f}-{max(rounds) * 1e6:.1f}], "
              f"{args.quiet} s of silence {quiet[size] * 1e3:.2f} ms")
    small, large = sizes[0], sizes[-1]
    ratio = per_cycle[large] / per_cycle[small]
    ok = ratio <= 1.5
    print(f"cycle cost ratio {large} / {small} idle connections: {ratio:.2f}x "
          f"(target <= 1.5x: {'ok' if ok else 'MISSED'})")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
