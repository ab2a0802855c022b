"""``mpa-emu fuzz``: seeded random scripts against one CM core, checking invariants.

Case ``i`` of seed ``S`` is drawn from ``random.Random(f"{S}:{i}")``, so a case is the
same wherever it runs. Each script drives a core (a passive listener with two peers and
an active connection) and is checked for:

- ``escape``: no exception but :class:`CmError` from a verb leaves ``receive``,
  ``handle_timer`` or a verb; a refused verb changes nothing (irdma_accept's own error
  path aside);
- ``frame``: every emitted frame encodes, decodes back to the same segment with good
  IPv4 and TCP checksums, and an MPA frame in it parses (RFC 5044 section 7.1);
- ``reachability``: no node is seen in a state the transition table marks unreachable,
  and every state change is allowed by a reachable row;
- ``timer``: no timer is left once 3000 s of virtual time have run out;
- ``leak``: every node left behind is a leak the kernel itself has, named.

A failing case is shrunk (steps removed, then simplified, keeping the same invariant
broken) and written as a reproducer: ``NAME.json`` (the script) run by
``mpa-emu fuzz --reproduce NAME.json``, and ``NAME.pcapng`` (the frames in and out).
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mpa_emu import codec, mpa
from mpa_emu.campaign.generators import (
    OPTIONS,
    REQ,
    S_NS,
    RandomDraw,
    Script,
    SegStep,
    Step,
    VerbStep,
    Wait,
    script,
)
from mpa_emu.cm.config import CmConfig, Quirks
from mpa_emu.cm.core import CmCore
from mpa_emu.cm.errors import CmError
from mpa_emu.cm.states import CmState, Input
from mpa_emu.cm.transitions import NEVER_SET, TRANSIENT, row
from mpa_emu.segment import ACK, SYN, Segment
from mpa_emu.trace import Trace

MAC_A = bytes.fromhex("020000000001")
MAC_P = bytes.fromhex("020000000002")
IP_A = bytes([10, 0, 0, 1])
IP_P = bytes([10, 0, 0, 2])
PORT = 4791
PEER_PORTS = (5000, 5001)
ACTIVE_PEER_PORT = 6000
ACTIVE_LOCAL_PORT = 49152
BOUND_NS = 3000 * S_NS
"""Virtual time run after the script; every timer must be gone by then."""
CHUNK = 200
"""Cases per task: fixed, so the cases shrunk and reported do not depend on -j."""

PLANT_ENV = "MPA_EMU_FUZZ_PLANT"
"""Test-only switch: ``reply-checksum`` spoils the TCP checksum of every frame carrying
an MPA reply (accept), so the ``frame`` invariant breaks; the fuzzer's own tests use it
to show a defect is found, shrunk and written."""


def config(index: int) -> CmConfig:
    """The core configurations the scripts choose from."""
    return [CmConfig(retrans=8), CmConfig(retrans=8, gen=1),
            CmConfig(retrans=8, ah_latency_ns=S_NS // 2),
            CmConfig(retrans=8, quirks=Quirks(zero_len_option_loop=False)),
            CmConfig(retrans=8, hz=250, host_stack_rst=True)][index]


@dataclass(frozen=True, slots=True)
class Violation:
    """A broken invariant: which one and what happened."""

    invariant: str
    message: str


class _Broken(Exception):
    def __init__(self, violation: Violation) -> None:
        super().__init__(violation.message)
        self.violation = violation


@dataclass
class _Run:
    core: CmCore
    trace: Trace
    plant: str | None
    now: int = 0
    frames: list[tuple[int, bytes, bool]] | None = None  # (time, bytes, sent by core)
    stuck: set[int] = field(default_factory=set)

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

    def guarded(self, what: str, call: Callable[[], object]) -> None:
        try:
            call()
        except _Broken:
            raise
        except Exception as exc:
            raise _Broken(Violation("escape", f"{type(exc).__name__} escaped {what}: "
                                    f"{exc}")) from None

    def feed(self, seg: Segment) -> None:
        if self.frames is not None:
            self.frames.append((self.now, codec.encode(seg), False))
        self.guarded(f"receive({seg.flag_text})", lambda: self.core.receive(seg, self.now))
        self.drain()

    def tick(self, now: int) -> None:
        self.now = now
        self.guarded("handle_timer", lambda: self.core.handle_timer(now))
        self.drain()

    def drain(self) -> None:
        for tx in self.core.frames_to_send():
            self.check_frame(tx.segment)
        while self.core.next_event() is not None:
            pass
        self.check_states()

    def check_frame(self, seg: Segment) -> None:
        try:
            raw = codec.encode(seg)
        except codec.EncodeError as exc:
            raise _Broken(Violation("frame", f"emitted segment does not encode: {exc}")) \
                from None
        if self.plant == "reply-checksum" and _is_accept_reply(seg.payload):
            # the TCP checksum: Ethernet 14 + IPv4 20 bytes + offset 16 (RFC 9293 3.1)
            raw = raw[:50] + bytes([raw[50] ^ 0xFF, raw[51]]) + raw[52:]
        if self.frames is not None:
            self.frames.append((self.now, raw, True))
        try:
            back = codec.decode(raw)
        except codec.DecodeError as exc:
            raise _Broken(Violation("frame", f"emitted {seg.flag_text} does not decode: "
                                    f"{exc}")) from None
        if back != seg:
            raise _Broken(Violation("frame", f"emitted {seg.flag_text} decodes to a "
                                    "different segment"))
        if mpa.looks_like_mpa(seg.payload):
            try:
                mpa.decode_frame(seg.payload)
            except mpa.MpaFormatError as exc:
                raise _Broken(Violation("frame", f"emitted MPA frame does not parse: "
                                        f"{exc}")) from None

    def check_states(self) -> None:
        for rec in self.trace.records:
            if rec.kind == "kernel_bug" and rec.fields.get("conn") is not None:
                self.stuck.add(rec.fields["conn"])
        for c in self.core.conns():
            view = self.core.node(c)
            # a node the kernel itself leaves mid-call (the irdma_process_options loop
            # on a zero-length option) keeps the transient state it hung in
            if view is not None and c not in self.stuck and (
                    view.state in NEVER_SET or view.state in TRANSIENT):
                raise _Broken(Violation("reachability", f"node {c} held in "
                                        f"{view.state.name}, a state the table marks "
                                        "unreachable"))
        for rec in self.trace.records:
            if rec.kind == "state_changed":
                old, new = CmState[rec.fields["old"]], CmState[rec.fields["new"]]
                if old not in TRANSIENT and not any(
                        r.reachable and new in r.allowed
                        for r in (row(old, inp) for inp in Input)):
                    raise _Broken(Violation("reachability", f"{rec.fn}: {old.name} -> "
                                            f"{new.name} is allowed by no reachable row"))
        self.trace.records.clear()


def _is_accept_reply(payload: bytes) -> bool:
    if not mpa.looks_like_mpa(payload):
        return False
    try:
        frame = mpa.decode_frame(payload)
    except mpa.MpaFormatError:
        return False
    return not frame.request and not frame.reject


def plant() -> str | None:
    """The planted defect named by the test-only environment switch, if any."""
    return os.environ.get(PLANT_ENV) or None


def execute(sc: Script, *, plant_name: str | None = None,
            frames: list[tuple[int, bytes, bool]] | None = None) -> Violation | None:
    """Run one script; the first broken invariant, or None."""
    trace = Trace()
    core = CmCore("P", MAC_P, config(sc.config), seed=11, trace=trace)
    run = _Run(core, trace, plant_name, frames=frames)
    try:
        _execute(run, sc)
    except _Broken as broken:
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
        raise _Broken(Violation("timer", f"a timer is still set at {left / 1e9:.3f} s, "
                                f"{BOUND_NS // S_NS} s after the script"))
    unexplained = [(c, s.name) for c, s, why in core.leak_report() if why is None]
    if unexplained:
        raise _Broken(Violation("leak", "nodes left with no kernel leak to explain them: "
                                + ", ".join(f"{c} in {s}" for c, s in unexplained)))


def _verb(run: _Run, step: VerbStep, lid: int) -> int:
    core, now = run.core, run.now
    conns = core.conns()
    conn = conns[step.pick % len(conns)] if conns else step.pick
    before = [core.node(c) for c in conns]
    target = core.node(conn)
    try:
        if step.verb == "accept":
            core.accept(conn, private_data=step.data, now_ns=now)
        elif step.verb == "reject":
            core.reject(conn, private_data=step.data, now_ns=now)
        elif step.verb == "close":
            core.close(conn, now_ns=now)
        elif step.verb == "disconnect":
            core.disconnect(conn, graceful=bool(step.pick & 1), now_ns=now)
        elif step.verb == "connect":
            core.connect(IP_P, IP_A, ACTIVE_PEER_PORT, local_port=ACTIVE_LOCAL_PORT,
                         now_ns=now)
        elif step.verb == "destroy_listen":
            core.destroy_listen(lid, now_ns=now)
        else:
            lid = core.create_listen(IP_P, PORT, backlog=step.pick, now_ns=now)
    except CmError:
        # irdma_accept runs its error path (the node released) before returning
        # -EINVAL/-ECONNRESET; every other refusal leaves everything as it was
        if not (step.verb == "accept" and target is not None
                and target.state in (CmState.MPAREQ_RCVD, CmState.LISTENER_DESTROYED)) \
                and ([core.node(c) for c in conns] != before or core.conns() != conns):
            raise _Broken(Violation("escape", f"refused {step.verb} on conn {conn} changed "
                                    "the node table")) from None
    except Exception as exc:
        raise _Broken(Violation("escape", f"{type(exc).__name__} escaped {step.verb}: "
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
    runs = 0

    def fails(candidate: Script) -> bool:
        nonlocal runs
        runs += 1
        got = execute(candidate, plant_name=plant_name)
        return got is not None and got.invariant == violation.invariant

    best = sc
    progress = True
    while progress and runs < budget:
        progress = False
        size = max(len(best.steps) // 2, 1)
        while size >= 1 and runs < budget:
            i = 0
            while i < len(best.steps) and runs < budget:
                candidate = replace(best, steps=best.steps[:i] + best.steps[i + size:])
                if fails(candidate):
                    best, progress = candidate, True
                else:
                    i += size
            size //= 2
        if best.config and runs < budget and fails(replace(best, config=0)):
            best, progress = replace(best, config=0), True
        for candidate in (replace(best, deep_passive=False), replace(best, deep_active=False)):
            if candidate != best and runs < budget and fails(candidate):
                best, progress = candidate, True
        for i in range(len(best.steps)):
            for simpler in _simpler(best.steps[i]):
                if runs >= budget:
                    break
                candidate = replace(best, steps=(*best.steps[:i], simpler, *best.steps[i + 1:]))
                if fails(candidate):
                    best, progress = candidate, True
                    break
    return best


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


@dataclass(frozen=True, slots=True)
class Failure:
    """A failing case, shrunk."""

    index: int
    violation: Violation
    original_steps: int
    script: Script


@dataclass(frozen=True, slots=True)
class ChunkResult:
    """How many cases of a chunk ran, its failing cases per invariant, and the first
    failure of each invariant, shrunk."""

    ran: int
    failures: tuple[Failure, ...]
    counts: tuple[tuple[str, int], ...]


def run_chunk(chunk: Chunk) -> ChunkResult:
    """Run a chunk's cases; shrink the first failure of each invariant."""
    ran = 0
    failures: list[Failure] = []
    counts: dict[str, int] = {}
    for index in range(chunk.start, chunk.start + chunk.count):
        if chunk.deadline is not None and time.time() > chunk.deadline:
            break
        sc = case_script(chunk.seed, index)
        got = execute(sc, plant_name=chunk.plant)
        ran += 1
        if got is None:
            continue
        counts[got.invariant] = counts.get(got.invariant, 0) + 1
        if counts[got.invariant] > 1:
            continue
        small = shrink(sc, got, chunk.plant)
        final = execute(small, plant_name=chunk.plant) or got
        failures.append(Failure(index, final, len(sc.steps), small))
    return ChunkResult(ran, tuple(failures), tuple(sorted(counts.items())))


# ---- reproducers ----------------------------------------------------------------------

def write_reproducer(folder: Path, seed: int, failure: Failure,
                     plant_name: str | None) -> Path:
    """``fuzz-SEED-INDEX.json`` (the shrunk script, the invariant, the command) and
    ``.pcapng`` (the frames the core received and sent) in ``folder``; the JSON path."""
    from mpa_emu.capture import PcapngWriter

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
    if plant_name:
        data["planted_defect"] = plant_name
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    frames: list[tuple[int, bytes, bool]] = []
    execute(failure.script, plant_name=plant_name, frames=frames)
    with open(stem.with_suffix(".pcapng"), "wb") as stream, PcapngWriter(stream) as out:
        for t, raw, sent in frames:
            out.write(t, raw, interface="fuzz",
                      comment="sent by the core" if sent else "from the fuzzer's peer")
    return path


def load_reproducer(path: str | Path) -> tuple[Script, str | None, dict[str, Any]]:
    """The script of a reproducer file, its planted defect, and the whole record
    (OSError, ValueError, KeyError or TypeError on a bad file)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError("not a fuzz reproducer (a JSON object)")
    return Script.from_json(data["script"]), data.get("planted_defect"), data
