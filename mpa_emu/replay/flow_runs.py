"""A replay run cut into one run per flow, in one pass.

The semantic judge tells each connection's story from what the emulated node emitted,
what was injected, the upcalls and the NIC events *of that connection*. Filtering the
whole run's lists once per connection costs connections x frames (a capture of 1,000
connections took minutes); :class:`FlowRuns` sorts every list by flow once and hands
each connection a :class:`~mpa_emu.replay.engine.RunResult` holding only its own
entries, so the judge's work is linear in the capture's length.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TypeVar

from mpa_emu.replay.engine import Emitted, Injection, NicEvent, RunResult
from mpa_emu.stacks.contract.events import Upcall
from mpa_emu.wire.flow import FlowKey

K = TypeVar("K")
V = TypeVar("V")

UpcallKey = tuple[int, bytes, int]
"""What the judge matches an upcall to its flow by: local port, remote address, remote
port (FlowKey's positions 1 to 3)."""


def _add(groups: dict[K, list[V]], key: K, value: V) -> None:
    group = groups.get(key)
    if group is None:
        groups[key] = [value]
    else:
        group.append(value)


class FlowRuns:
    """Every list of ``run`` grouped by flow, each group in the run's order."""

    def __init__(self, run: RunResult) -> None:
        self.run = run
        self.emitted: dict[FlowKey, list[Emitted]] = {}
        self.injections: dict[FlowKey, list[Injection]] = {}
        self.nic_events: dict[FlowKey | None, list[NicEvent]] = {}
        self.upcalls: dict[UpcallKey, list[tuple[Upcall, int]]] = {}
        self.passes = 0
        """Entries read while grouping: one per entry of the run (checked by a test)."""
        for em in run.emitted:
            _add(self.emitted, em.flow, em)
            self.passes += 1
        for inj in run.injections:
            _add(self.injections, inj.frame.flow, inj)
            self.passes += 1
        for ev in run.nic_events:
            _add(self.nic_events, ev.flow, ev)
            self.passes += 1
        for up, number in zip(run.upcalls, run.upcall_frames, strict=True):
            _add(self.upcalls, (up.local_port, up.remote_ip, up.remote_port), (up, number))
            self.passes += 1

    def of(self, key: FlowKey) -> RunResult:
        """The run as flow ``key`` saw it: the same result with only that flow's emitted
        frames, injections, NIC events and upcalls (matched as the judge matches them)."""
        ups = self.upcalls.get((key[1], key[2], key[3]), [])
        return replace(self.run, emitted=self.emitted.get(key, []),
                       injections=self.injections.get(key, []),
                       nic_events=self.nic_events.get(key, []),
                       upcalls=[up for up, _n in ups], upcall_frames=[n for _up, n in ups])
