#!/usr/bin/env python3
"""Benchmark the DDP/RDMAP hot path and the scapy layers that mirror it.

* pure: ``mpa_emu.wire.ddp`` builders framed with ``mpa_emu.wire.mpa.frame_fpdu`` (what the NIC
  model calls per message): the zero-length READ RTR, a 64-byte Send, a Terminate; and
  parsing with ``unframe_fpdu`` + ``ddp.parse_segment``.
* scapy: the same FPDUs built from ``mpa_emu.frames`` layers and dissected with
  ``MPAFPDU(raw)``, and a v2 MPA request dissected from a whole Ethernet frame.

Times are the best of several rounds of time.perf_counter over many repetitions.
Usage: python tools/bench_ddp.py [--rounds 5] [--count 20000]
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import sys
import time
from collections.abc import Callable
from pathlib import Path

if importlib.util.find_spec("mpa_emu") is None:  # not installed: the checkout's own
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether

from mpa_emu.frames import MPAFPDU, DDPUntagged, MPARequest, RDMAPReadRequest
from mpa_emu.wire import ddp
from mpa_emu.wire.mpa import frame_fpdu, unframe_fpdu

PAYLOAD = bytes(range(64))


def best(fn: Callable[[], object], count: int, rounds: int) -> float:
    """Best time per call in microseconds."""
    results = []
    for _ in range(rounds):
        gc.disable()
        start = time.perf_counter()
        for _ in range(count):
            fn()
        results.append(time.perf_counter() - start)
        gc.enable()
    return min(results) / count * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--count", type=int, default=20000)
    args = parser.parse_args()
    n, r = args.count, args.rounds
    rtr = frame_fpdu(ddp.read_rtr())
    send = frame_fpdu(ddp.send(PAYLOAD, msn=7))
    frame = bytes(Ether() / IP() / TCP(sport=40001, dport=31000) /
                  MPARequest(flags="CS", rev=2, ird=127, ord=255, write0=1, read0=1,
                             private_data=b"rdma_cm private data"))
    cases: list[tuple[str, Callable[[], object], int]] = [
        ("pure build READ RTR FPDU", lambda: frame_fpdu(ddp.read_rtr()), n),
        ("pure build 64-byte Send FPDU", lambda: frame_fpdu(ddp.send(PAYLOAD, msn=7)), n),
        ("pure build Terminate FPDU",
         lambda: frame_fpdu(ddp.terminate(1, 2, 1, terminated=send[:2 + 18])), n),
        ("pure parse READ RTR FPDU", lambda: ddp.parse_segment(unframe_fpdu(rtr).ulpdu), n),
        ("pure parse 64-byte Send FPDU",
         lambda: ddp.parse_segment(unframe_fpdu(send).ulpdu), n),
        ("scapy build READ RTR FPDU",
         lambda: bytes(MPAFPDU(ulpdu=DDPUntagged(opcode=1, qn=1) / RDMAPReadRequest())),
         n // 10),
        ("scapy dissect READ RTR FPDU", lambda: MPAFPDU(rtr), n // 10),
        ("scapy dissect Ether/IP/TCP/MPA v2 request", lambda: Ether(frame), n // 10),
    ]
    width = max(len(name) for name, _, _ in cases)
    for name, fn, count in cases:
        us = best(fn, count, r)
        print(f"{name:<{width}}  {us:9.2f} us/op  {1e6 / us:12,.0f} op/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
