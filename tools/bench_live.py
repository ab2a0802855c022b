#!/usr/bin/env python3
"""Benchmark live mode: kernel MPA clients against an emulated irdma listener on a TAP.

A private network namespace holds the kernel's side of a TAP (192.0.2.1/24, or
2001:db8::1/64 with --v6); the emulated host (the real CM core, driven by
mpa_emu.live.driver) listens on 192.0.2.2:4791 and accepts. A kernel thread runs
``--count`` connections one after another, each a full MPA v2 exchange: connect, MPA
request, reply, RTR (zero-length Read), then close. Reported:

* setup latency per connection, as the kernel client sees it: from ``connect()`` until
  the MPA reply is read (median, 95th percentile, max);
* connections per second over the whole run;
* the driver's CPU time per frame crossing the TAP (``time.thread_time`` of the driver
  thread divided by frames in + out), which includes the codec, the core and capture
  into memory.

Needs root (network namespace, /dev/net/tun). Everything it creates is removed.
Usage: python tools/bench_live.py [--count 200] [--v6]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import threading
import time
from pathlib import Path

if importlib.util.find_spec("mpa_emu") is None:  # not installed: the checkout's own
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.contract.trace import Trace
from mpa_emu.stacks.irdma.config import CmConfig
from mpa_emu.stacks.irdma.core import CmCore

from mpa_emu.live import peer
from mpa_emu.live.driver import Accept, LiveHost
from mpa_emu.live.netns import Namespace, entered
from mpa_emu.live.sinks import MemorySink
from mpa_emu.live.tap import Tap
from mpa_emu.wire.addr import ip_bytes, mac_bytes

PORT = 4791
TAP = "mpabench0"
MAC = mac_bytes("02:00:00:00:00:02")


def kernel_clients(ns: str, address: str, count: int, latencies: list[float],
                   errors: list[str]) -> None:
    options = peer.PeerOptions(private_data=b"bench", timeout=5)
    with entered(ns):
        for _ in range(count):
            start = time.perf_counter()
            try:
                with peer.open_connection(address, PORT, options.timeout) as sock:
                    report = peer.run_initiator(sock, options)
            except peer.PeerError as exc:
                errors.append(str(exc))
                continue
            if report.error is not None or not report.accepted:
                errors.append(report.error or "not accepted")
            else:
                # The reply is read before the RTR is sent: stamp the exchange.
                latencies.append(time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--v6", action="store_true")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_live: needs root (network namespace and /dev/net/tun)", file=sys.stderr)
        return 2
    kernel_ip, emu_ip, prefix = ("2001:db8::1", "2001:db8::2", 64) if args.v6 else \
        ("192.0.2.1", "192.0.2.2", 24)
    with Namespace(f"mpabench{os.getpid()}") as ns:
        with entered(ns.name):
            tap = Tap(TAP)
        with tap:
            ns.ip("link", "set", TAP, "up")
            ns.ip("addr", "add", f"{kernel_ip}/{prefix}", "dev", TAP, "nodad")
            capture = MemorySink()
            core = CmCore("bench", MAC, CmConfig(), seed=1, trace=Trace(keep=False))
            host = LiveHost(tap, core, MAC, capture=capture)
            host.add_address(ip_bytes(emu_ip))
            host.listen(PORT, policy=Accept(b"welcome"), ipv6=args.v6)
            latencies: list[float] = []
            errors: list[str] = []
            clients = threading.Thread(target=kernel_clients, daemon=True, args=(
                ns.name, emu_ip, args.count, latencies, errors))
            cpu0, wall0 = time.thread_time(), time.perf_counter()
            clients.start()
            host.run_until(lambda: not clients.is_alive(), 5 + args.count)
            host.run_until(lambda: len(host.events(IwEvent.CLOSE)) >= args.count, 2)
            cpu, wall = time.thread_time() - cpu0, time.perf_counter() - wall0
            host.shutdown(0.5)
    frames = host.frames_in + host.frames_out
    print(f"connections: {len(latencies)} ok, {len(errors)} failed"
          + (f" (first: {errors[0]})" if errors else ""))
    if latencies:
        ordered = sorted(latencies)
        p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
        print(f"setup latency (connect to MPA reply): median "
              f"{statistics.median(ordered) * 1e3:.2f} ms, p95 {p95 * 1e3:.2f} ms, "
              f"max {ordered[-1] * 1e3:.2f} ms")
    print(f"rate: {len(latencies) / wall:.1f} connections/s over {wall:.2f} s")
    print(f"driver: {frames} frames, {cpu * 1e6 / max(frames, 1):.1f} us CPU per frame, "
          f"upcalls {len(host.upcalls)}")
    return 0 if not errors else 1


if __name__ == "__main__":
    sys.exit(main())
