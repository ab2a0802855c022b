"""``mpa-emu fuzz``: seeded random scripts against one CM core, checking invariants.

Case ``i`` of seed ``S`` is drawn from ``random.Random(f"{S}:{i}")``, so a case is the
same wherever it runs. Each script drives a core (a passive listener with two peers and
an active connection) and is checked for:

- ``escape``, ``frame`` and ``reachability`` after every step (see
  :mod:`mpa_emu.campaign.invariants`);
- ``timer``: no timer is left once 3000 s of virtual time have run out;
- ``leak``: every node left behind is a leak the kernel itself has, named.

With ``--two-cores`` the cases are :mod:`mpa_emu.campaign.two_core`'s instead: two
cores through a hostile middlebox, verbs on both sides.

A failing case is shrunk (steps removed, then simplified, keeping the same invariant
broken) and written as a reproducer: ``NAME.json`` (the script) run by
``mpa-emu fuzz --reproduce NAME.json``, and ``NAME.pcapng`` (the frames in and out).
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mpa_emu.campaign.generators import (
    CONN_VERBS,
    FUZZED,
    OPTIONS,
    REQ,
    S_NS,
    RandomDraw,
    Script,
    SegStep,
    Step,
    VerbStep,
    Wait,
    conn_verb,
    script,
)
from mpa_emu.campaign.invariants import (
    BOUND_NS,
    Broken,
    CoreRun,
    Violation,
    make_core,
    refused,
)
from mpa_emu.campaign.shrinking import shrink_script
from mpa_emu.campaign.two_core import TwoScript, case_two_script, execute_two, shrink_two
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.trace import Trace
from mpa_emu.wire.segment import ACK, SYN, Segment

MAC_A = bytes.fromhex("020000000001")
MAC_P = bytes.fromhex("020000000002")
IP_A = bytes([10, 0, 0, 1])
IP_P = bytes([10, 0, 0, 2])
PORT = 4791
PEER_PORTS = (5000, 5001)
ACTIVE_PEER_PORT = 6000
ACTIVE_LOCAL_PORT = 49152
CHUNK = 200
"""Cases per task: fixed, so the cases shrunk and reported do not depend on -j."""

PLANT_ENV = "MPA_EMU_FUZZ_PLANT"
"""Test-only switch: ``reply-checksum`` spoils the TCP checksum of every frame carrying
an MPA reply (accept), so the ``frame`` invariant breaks; the fuzzer's own tests use it
to show a defect is found, shrunk and written."""


@dataclass
class _Run(CoreRun):
    def build(self, step: SegStep) -> Segment:
        if step.target == 2:
            sport, dport = ACTIVE_PEER_PORT, ACTIVE_LOCAL_PORT
        else:
            sport, dport = PEER_PORTS[step.target], PORT
        node = None
        for c in self.core.conns():
            view = self.core.node(c)
            if view is not None and view.rem_port == sport and view.loc_port == dport:
                node = view
                break
        seq = (node.rcv_nxt if node and step.seq_valid else 4242) + step.seq_delta
        ack = (node.loc_seq_num if node and step.ack_valid else 99) + step.ack_delta
        return Segment(src_mac=MAC_A, dst_mac=MAC_P, src_ip=IP_A, dst_ip=IP_P, sport=sport,
                       dport=dport, seq=seq & 0xFFFFFFFF, ack=ack & 0xFFFFFFFF,
                       flags=step.flags, window=65535, options=step.options,
                       payload=step.payload)


def plant() -> str | None:
    """The planted defect named by the test-only environment switch, if any."""
    return os.environ.get(PLANT_ENV) or None


def execute(sc: Script, *, plant_name: str | None = None,
            frames: list[tuple[int, bytes, bool]] | None = None) -> Violation | None:
    """Run one script; the first broken invariant, or None."""
    trace = Trace()
    core = make_core("P", MAC_P, sc.config, seed=11, trace=trace)
    run = _Run(core, trace, plant_name, frames=frames)
    try:
        _execute(run, sc)
    except Broken as broken:
        return broken.violation
    return None


def _execute(run: _Run, sc: Script) -> None:
    core = run.core
    half = S_NS // 2
    core.add_address(IP_P)
    core.set_neighbour(IP_A, MAC_A)
    lid = core.create_listen(IP_P, PORT, backlog=2)
    run.guarded("connect", lambda: core.connect(IP_P, IP_A, ACTIVE_PEER_PORT,
                                                local_port=ACTIVE_LOCAL_PORT, now_ns=0))
    run.drain()
    if sc.deep_passive:  # peer 0 to MPAREQ_RCVD with well-formed segments
        run.feed(run.build(SegStep(0, SYN, True, 0, True, 0, b"", OPTIONS[1])))
        run.tick(half)
        run.feed(run.build(SegStep(0, ACK, True, 0, True, 0, b"", b"")))
        run.feed(run.build(SegStep(0, ACK, True, 0, True, 0, REQ, b"")))
    if sc.deep_active:  # the active node's SYN answered
        run.now = half
        run.feed(run.build(SegStep(2, SYN | ACK, False, 0, True, 0, b"", OPTIONS[1])))
    run.now = half
    for step in sc.steps:
        if isinstance(step, Wait):
            run.tick(run.now + step.ns)
        elif isinstance(step, SegStep):
            run.feed(run.build(step))
        else:
            lid = _verb(run, step, lid)
    end = run.now + BOUND_NS
    while (t := core.get_timer()) is not None and t <= end:
        run.tick(max(t, run.now))
    left = core.get_timer()
    if left is not None:
        raise Broken(Violation("timer", f"a timer is still set at {left / 1e9:.3f} s, "
                                f"{BOUND_NS // S_NS} s after the script"))
    unexplained = FUZZED.unexplained_leaks(core)
    if unexplained:
        raise Broken(Violation("leak", "nodes left with no kernel leak to explain them: "
                                + ", ".join(f"{c} in {s}" for c, s in unexplained)))


def _verb(run: _Run, step: VerbStep, lid: int) -> int:
    core, now = run.core, run.now
    conns = core.conns()
    conn = conns[step.pick % len(conns)] if conns else step.pick
    before = [core.node(c) for c in conns]
    target = core.node(conn)
    try:
        if step.verb in CONN_VERBS:
            conn_verb(core, step.verb, conn, data=step.data, pick=step.pick, now=now)
        elif step.verb == "connect":
            core.connect(IP_P, IP_A, ACTIVE_PEER_PORT, local_port=ACTIVE_LOCAL_PORT,
                         now_ns=now)
        elif step.verb == "destroy_listen":
            core.destroy_listen(lid, now_ns=now)
        else:
            lid = core.create_listen(IP_P, PORT, backlog=step.pick, now_ns=now)
    except CmError:
        refused(core, step.verb, conn, target, conns, before)
    except Exception as exc:
        raise Broken(Violation("escape", f"{type(exc).__name__} escaped {step.verb}: "
                                f"{exc}")) from None
    run.drain()
    return lid


def case_script(seed: int, index: int) -> Script:
    """The script of case ``index`` of seed ``seed``."""
    return script(RandomDraw(random.Random(f"{seed}:{index}")))


# ---- shrinking ------------------------------------------------------------------------

def _simpler(step: Step) -> list[Step]:
    if isinstance(step, Wait):
        return [Wait(0)] if step.ns else []
    if isinstance(step, VerbStep):
        return [replace(step, data=b"")] if step.data else []
    out: list[Step] = []
    if step.payload:
        out.append(replace(step, payload=b""))
        if len(step.payload) > 1:
            out.append(replace(step, payload=step.payload[:len(step.payload) // 2]))
    if step.options:
        out.append(replace(step, options=b""))
    if step.seq_delta or step.ack_delta:
        out.append(replace(step, seq_delta=0, ack_delta=0))
    return out


def shrink(sc: Script, violation: Violation, plant_name: str | None,
           budget: int = 3000) -> Script:
    """A smaller script breaking the same invariant: chunks of steps removed, then steps
    and the prelude simplified, until nothing more helps (or ``budget`` runs)."""
    def fails(candidate: Script) -> bool:
        got = execute(candidate, plant_name=plant_name)
        return got is not None and got.invariant == violation.invariant

    return shrink_script(sc, fails, _simpler, (
        lambda best: [replace(best, config=0)] if best.config else [],
        lambda best: [replace(best, deep_passive=False), replace(best, deep_active=False)],
    ), budget)


# ---- campaign tasks -------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Chunk:
    """Cases ``start .. start + count - 1`` of ``seed``; stop starting cases after the
    wall-clock ``deadline`` (``time.time()``), if any."""

    seed: int
    start: int
    count: int
    deadline: float | None = None
    plant: str | None = None
    two_cores: bool = False


@dataclass(frozen=True, slots=True)
class Failure:
    """A failing case, shrunk."""

    index: int
    violation: Violation
    original_steps: int
    script: Script | TwoScript


@dataclass(frozen=True, slots=True)
class ChunkResult:
    """How many cases of a chunk ran, its failing cases per invariant, and the first
    failure of each invariant, shrunk."""

    ran: int
    failures: tuple[Failure, ...]
    counts: tuple[tuple[str, int], ...]


def run_script(sc: Script | TwoScript, *, plant_name: str | None = None,
               frames: list[tuple[int, bytes, bool]] | None = None) -> Violation | None:
    """Run a one-core or a two-core script; the first broken invariant, or None."""
    if isinstance(sc, TwoScript):
        return execute_two(sc, plant_name=plant_name, frames=frames)
    return execute(sc, plant_name=plant_name, frames=frames)


def run_chunk(chunk: Chunk) -> ChunkResult:
    """Run a chunk's cases; shrink the first failure of each invariant."""
    ran = 0
    failures: list[Failure] = []
    counts: dict[str, int] = {}
    for index in range(chunk.start, chunk.start + chunk.count):
        if chunk.deadline is not None and time.time() > chunk.deadline:
            break
        sc = case_two_script(chunk.seed, index) if chunk.two_cores \
            else case_script(chunk.seed, index)
        got = run_script(sc, plant_name=chunk.plant)
        ran += 1
        if got is None:
            continue
        counts[got.invariant] = counts.get(got.invariant, 0) + 1
        if counts[got.invariant] > 1:
            continue
        small = shrink_two(sc, got, chunk.plant) if isinstance(sc, TwoScript) \
            else shrink(sc, got, chunk.plant)
        final = run_script(small, plant_name=chunk.plant) or got
        failures.append(Failure(index, final, len(sc.steps), small))
    return ChunkResult(ran, tuple(failures), tuple(sorted(counts.items())))


# ---- reproducers ----------------------------------------------------------------------

def write_reproducer(folder: Path, seed: int, failure: Failure,
                     plant_name: str | None) -> Path:
    """``fuzz-SEED-INDEX.json`` (the shrunk script, the invariant, the command) and
    ``.pcapng`` (the frames the core received and sent) in ``folder``; the JSON path."""
    from mpa_emu.capture.pcap import PcapngWriter

    folder.mkdir(parents=True, exist_ok=True)
    stem = folder / f"fuzz-{seed}-{failure.index}"
    path = stem.with_suffix(".json")
    data: dict[str, Any] = {
        "invariant": failure.violation.invariant,
        "message": failure.violation.message,
        "seed": seed,
        "case": failure.index,
        "command": f"mpa-emu fuzz --reproduce {path.name}",
        "script": failure.script.to_json(),
    }
    two = isinstance(failure.script, TwoScript)
    if two:
        data["mode"] = "two-cores"
    if plant_name:
        data["planted_defect"] = plant_name
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    frames: list[tuple[int, bytes, bool]] = []
    run_script(failure.script, plant_name=plant_name, frames=frames)
    with open(stem.with_suffix(".pcapng"), "wb") as stream, PcapngWriter(stream) as out:
        for t, raw, flag in frames:
            if two:  # flag: emitted by A (else by P), before the middlebox
                out.write(t, raw, interface="A" if flag else "P",
                          comment=f"emitted by {'A' if flag else 'P'}")
            else:
                out.write(t, raw, interface="fuzz",
                          comment="sent by the core" if flag else "from the fuzzer's peer")
    return path


def load_reproducer(path: str | Path) -> tuple[Script | TwoScript, str | None,
                                               dict[str, Any]]:
    """The script of a reproducer file (one-core, or two-core with ``"mode":
    "two-cores"``), its planted defect, and the whole record (OSError, ValueError,
    KeyError or TypeError on a bad file)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError("not a fuzz reproducer (a JSON object)")
    mode = data.get("mode", "one-core")
    if mode == "two-cores":
        return TwoScript.from_json(data["script"]), data.get("planted_defect"), data
    if mode != "one-core":
        raise ValueError(f"unknown mode {mode!r}")
    return Script.from_json(data["script"]), data.get("planted_defect"), data

