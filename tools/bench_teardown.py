#!/usr/bin/env python3
"""Benchmark: tearing down the connections of one address on a host with a large node
table (``irdma_if_notify(ifup=false)`` -> ``irdma_cm_teardown_connections``).

The host "bob" has a wildcard listener and two addresses. On the target address it holds
``--matches`` offloaded connections to a peer "alice" (real handshakes, RTR, ESTABLISHED);
the rest of its table, up to ``--sizes`` nodes in all, are offloaded connections from
alice to the background address as well (60,000 local ports per alice address), so the
table holds what a busy host holds: nodes with their QPs. ``--background half-open`` makes
them half-open passive nodes instead (one SYN each, quicker to build but lighter than a
real table). Then the target address is removed and the wall time
of ``CmCore.remove_address`` is measured: the if_notify qhash walk, the selection and the
per-node QP error transition that puts a RST on the wire.

Each size is measured ``--repeat`` times: the address comes back with fresh connections
between runs, so the table keeps its size. The minimum and the median are reported (the
minimum is compared: it is the sample least disturbed on a shared machine), with the
selection alone (``teardown.select_nodes``, not destructive) timed separately. The cyclic
garbage collector is held off inside each timed call. The first removal of each size is
not timed but profiled: the number of function calls it makes is a load-independent
measure of the work, and should not change with the table size. The goal: the cost
follows the number of matches, not the table (same within 1.5x from 1,000 to 100,000).

Usage: python tools/bench_teardown.py [--sizes 1000,10000,100000] [--matches 100]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable

from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.irdma.config import CmConfig
from mpa_emu.stacks.irdma.core import CmCore

from mpa_emu.stacks.irdma import teardown
from mpa_emu.wire.addr import ip_bytes
from mpa_emu.wire.segment import SYN, Segment

ALICE_MAC = bytes.fromhex("020000000001")
BOB_MAC = bytes.fromhex("020000000002")
ALICE_IP = ip_bytes("10.0.0.1")
TARGET_IP = ip_bytes("10.1.0.2")
BACKGROUND_IP = ip_bytes("10.1.0.1")
PORT = 5000
MSS_OPTION = bytes.fromhex("020405b4")


def pump(alice: CmCore, bob: CmCore, now_ns: int) -> None:
    """Carry frames both ways and accept every request, until both cores are quiet."""
    while True:
        moved = False
        for src, dst in ((alice, bob), (bob, alice)):
            for tx in src.frames_to_send():
                moved = True
                if not tx.loopback:
                    dst.receive(tx.segment, now_ns)
        for core in (alice, bob):
            while (up := core.next_event()) is not None:
                moved = True
                if up.event == IwEvent.CONNECT_REQUEST:
                    core.accept(up.conn, now_ns=now_ns)
        if not moved:
            return


def build(size: int, matches: int, background: str) -> tuple[CmCore, CmCore, int]:
    """bob with ``size`` nodes, ``matches`` of them offloaded on the target address."""
    config = CmConfig()
    alice = CmCore("alice", ALICE_MAC, config, seed=1)
    bob = CmCore("bob", BOB_MAC, config, seed=2)
    alice.add_address(ALICE_IP)
    bob.add_address(BACKGROUND_IP)
    bob.add_address(TARGET_IP)
    for ip in (BACKGROUND_IP, TARGET_IP):
        alice.set_neighbour(ip, BOB_MAC)
    bob.set_neighbour(ALICE_IP, ALICE_MAC)
    bob.create_listen(None, PORT, backlog=1 << 30)
    now = 0
    for index in range(size - matches):
        src = _spread(index)
        if background == "offloaded":
            if index % 60000 == 0:
                alice.add_address(src)
                bob.set_neighbour(src, ALICE_MAC)
            alice.connect(src, BACKGROUND_IP, PORT, local_port=1024 + index % 60000,
                          now_ns=now)
            pump(alice, bob, now)
            continue
        # A half-open passive node: one SYN from a distinct source address/port.
        if index % 60000 == 0:
            bob.set_neighbour(src, ALICE_MAC)
        sport = 1024 + index % 60000
        syn = Segment(src_mac=ALICE_MAC, dst_mac=BOB_MAC, src_ip=src,
                      dst_ip=BACKGROUND_IP, sport=sport, dport=PORT, seq=index, ack=0,
                      flags=SYN, options=MSS_OPTION)
        bob.receive(syn, now)
        bob.frames_to_send()
    now = add_matches(alice, bob, matches, now)
    return alice, bob, now


def _spread(index: int) -> bytes:
    """Source addresses of the background nodes: 60,000 ports per address."""
    return bytes([10, 2, (index // 60000) & 0xFF, 1])


def add_matches(alice: CmCore, bob: CmCore, matches: int, now: int) -> int:
    """Open ``matches`` connections from alice to the target address."""
    for _ in range(matches):
        alice.connect(ALICE_IP, TARGET_IP, PORT, now_ns=now)
        pump(alice, bob, now)
    return now


def timed(fn: Callable[[], object]) -> float:
    """Wall time of ``fn``, with the cyclic GC held off so that a collection pass over
    the whole heap (which grows with the table) does not land in one sample."""
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start
    finally:
        gc.enable()


def count_calls(fn: Callable[[], object]) -> int:
    """Python and C function calls made by ``fn``: a deterministic measure of the work,
    immune to the load of a shared machine."""
    calls = 0

    def profiler(frame: object, event: str, arg: object) -> None:
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    sys.setprofile(profiler)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls


def measure(size: int, matches: int, repeat: int, background: str) -> dict[str, float]:
    t0 = time.perf_counter()
    alice, bob, now = build(size, matches, background)
    build_s = time.perf_counter() - t0
    removals: list[float] = []
    selections: list[float] = []
    rsts = 0
    sel_reps = 200

    def select_many() -> None:
        for _ in range(sel_reps):
            teardown.select_nodes(bob, TARGET_IP, teardown.NO_VLAN, True, False)

    nodes = len(bob.conns())
    keys = len(bob._local_keys())
    for run in range(repeat):
        selections.append(timed(select_many) / sel_reps)
        now += 1_000_000_000
        if run == 0:
            calls = count_calls(lambda now=now: bob.remove_address(TARGET_IP, now_ns=now))
        else:
            removals.append(timed(lambda now=now: bob.remove_address(TARGET_IP, now_ns=now)))
        rsts = sum(1 for tx in bob.frames_to_send() if tx.segment.flags & 0x04)
        if rsts != matches:
            raise SystemExit(f"size {size}: expected {matches} RSTs, saw {rsts}")
        bob.handle_timer(now + 200_000_000)
        alice.handle_timer(now + 200_000_000)
        pump(alice, bob, now + 200_000_000)
        if run + 1 < repeat:
            bob.add_address(TARGET_IP, now_ns=now + 300_000_000)
            add_matches(alice, bob, matches, now + 300_000_000)
    return {"size": size, "nodes": nodes, "keys": keys, "calls": calls, "build_s": build_s,
            "remove_ms": statistics.median(removals) * 1e3,
            "remove_min_ms": min(removals) * 1e3,
            "select_us": min(selections) * 1e6, "rsts": rsts}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000",
                        help="node table sizes (comma separated)")
    parser.add_argument("--matches", type=int, default=100,
                        help="connections on the removed address")
    parser.add_argument("--repeat", type=int, default=9,
                        help="removals per size (the first one counts function calls)")
    parser.add_argument("--background", choices=("half-open", "offloaded"),
                        default="offloaded", help="what the rest of the table is made of")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if any(s <= args.matches for s in sizes):
        parser.error("every size must exceed --matches")
    if args.repeat < 2:
        parser.error("--repeat must be at least 2 (one profiled run, one timed)")
    measure(2 * args.matches, args.matches, 2, "half-open")  # warm-up: first-call costs
    rows = []
    for size in sizes:
        row = measure(size, args.matches, args.repeat, args.background)
        rows.append(row)
        print(f"table {row['nodes']:>7} nodes  build {row['build_s']:7.1f} s  "
              f"remove_address median {row['remove_ms']:7.2f} ms "
              f"(min {row['remove_min_ms']:.2f})  selection {row['select_us']:8.1f} us  "
              f"RSTs {row['rsts']}  keys compared {row['keys']}  calls {row['calls']}",
              flush=True)
    if len(rows) > 1:
        first, last = rows[0], rows[-1]
        # the minimum is the sample least disturbed by other work on a shared machine
        ratio = last["remove_min_ms"] / first["remove_min_ms"]
        sel_ratio = last["select_us"] / first["select_us"]
        call_ratio = last["calls"] / first["calls"]
        verdict = "ok" if ratio <= 1.5 else "over target"
        print(f"cost ratio {last['nodes']} / {first['nodes']} nodes: remove_address (min) "
              f"{ratio:.2f}x, selection {sel_ratio:.2f}x, function calls {call_ratio:.2f}x "
              f"(target <= 1.5x: {verdict})")
        return 0 if ratio <= 1.5 else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
