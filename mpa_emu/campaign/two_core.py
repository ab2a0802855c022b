"""``mpa-emu fuzz --two-cores``: an active and a passive CM core linked through a hostile
middlebox, with random verbs on both sides.

Host A (10.0.0.1) and host P (10.0.0.2) each run a :class:`CmCore`, each listens on
port 4791, and A connects to P before the script starts (with ``cross``, P connects to
A as well). Every frame a core emits is checked as it leaves the core (it encodes,
decodes back to the same segment with good checksums, an MPA frame in it parses) and
then waits in the middlebox's queue. The script's steps decide its fate: deliver the
next frame, drop it, duplicate it, swap it with the one behind it (reordering), flip a
bit in it (the receiving NIC drops a frame whose checksum fails), mutate it (a mutated
MPA frame from the generators' list in its payload, other TCP flags, a shifted sequence
or acknowledgement number, checksums recomputed), or deliver the whole queue; verbs run
on either side (connect, accept, reject, close, disconnect, address removal and back,
listener destroyed and created); waits fire the cores' timers.

After the script the middlebox turns honest: the queue is delivered and the timers run
for 3000 s of virtual time. The invariants are the one-core mode's (``escape``,
``frame``, ``reachability``, ``timer``, ``leak``, checked on both cores) plus
``quiet``: once the middlebox is honest the two cores stop sending within
:data:`SETTLE_FRAMES` frames. Case ``i`` of seed ``S`` is drawn from
``random.Random(f"{S}:two:{i}")``; failures are shrunk and written as JSON reproducers
(``"mode": "two-cores"``) that ``mpa-emu fuzz --reproduce`` runs.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any

from mpa_emu.campaign.generators import (
    CONFIGS,
    CONN_VERBS,
    FLAGS,
    FUZZED,
    MUTATED_MPA,
    S_NS,
    WAITS,
    Draw,
    RandomDraw,
    Wait,
    conn_verb,
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
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.trace import Trace
from mpa_emu.wire import codec
from mpa_emu.wire.segment import Segment

MACS = (bytes.fromhex("020000000001"), bytes.fromhex("020000000002"))
IPS = (bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]))
SIDES = "AP"
PORT = 4791
SETTLE_FRAMES = 20000
"""Frames delivered after the script before the cores count as never going quiet."""

NET_ACTIONS = ("pass", "drop", "dup", "swap", "corrupt", "mutate", "flush")
VERBS = ("connect", "accept", "reject", "close", "disconnect", "remove_address",
         "add_address", "destroy_listen", "listen")
_MUTATED = list(MUTATED_MPA.values())
MUTATIONS = len(_MUTATED) + len(FLAGS) + 4
"""Mutation numbers: a mutated MPA payload, other flags, seq +/-1, ack +/-1."""


@dataclass(frozen=True, slots=True)
class Net:
    """What the middlebox does to the frame at the head of its queue (``arg`` picks
    the bit to flip or the mutation)."""

    action: str
    arg: int = 0


@dataclass(frozen=True, slots=True)
class SideVerb:
    """A verb on side 0 (A) or 1 (P), on its ``pick``-th connection."""

    side: int
    verb: str
    pick: int
    data: bytes = b""


TwoStep = Net | SideVerb | Wait


@dataclass(frozen=True, slots=True)
class TwoScript:
    """One two-core case: each core's configuration, whether P connects to A too, the
    steps."""

    config_a: int
    config_p: int
    cross: bool
    steps: tuple[TwoStep, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        """Plain data (bytes as hex)."""
        def step(s: TwoStep) -> dict[str, Any]:
            if isinstance(s, Wait):
                return {"wait": s.ns}
            if isinstance(s, Net):
                return {"net": s.action, "arg": s.arg}
            return {"side": SIDES[s.side], "verb": s.verb, "pick": s.pick,
                    "data": s.data.hex()}
        return {"config_a": self.config_a, "config_p": self.config_p, "cross": self.cross,
                "steps": [step(s) for s in self.steps]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TwoScript:
        """The inverse of :meth:`to_json` (KeyError/ValueError/TypeError on bad data)."""
        steps: list[TwoStep] = []
        for s in data["steps"]:
            if "wait" in s:
                steps.append(Wait(int(s["wait"])))
            elif "net" in s:
                if s["net"] not in NET_ACTIONS:
                    raise ValueError(f"unknown middlebox action {s['net']!r}")
                steps.append(Net(s["net"], int(s["arg"])))
            else:
                if s["verb"] not in VERBS or s["side"] not in ("A", "P"):
                    raise ValueError(f"unknown verb {s['side']!r} {s['verb']!r}")
                steps.append(SideVerb(SIDES.index(s["side"]), s["verb"], int(s["pick"]),
                                      bytes.fromhex(s["data"])))
        return cls(int(data["config_a"]) % CONFIGS, int(data["config_p"]) % CONFIGS,
                   bool(data["cross"]), tuple(steps))


# ---- generation ----------------------------------------------------------------------

def two_step(d: Draw) -> TwoStep:
    """Mostly frames delivered, so handshakes move; the middlebox's other tricks, verbs
    on either side, waits."""
    kind = d.integer(0, 19)
    if kind < 9:
        return Net("pass")
    if kind < 12:
        action = d.pick(["drop", "dup", "swap", "corrupt", "mutate", "flush"])
        arg = d.integer(0, MUTATIONS - 1) if action == "mutate" else \
            d.integer(0, 4095) if action == "corrupt" else 0
        return Net(action, arg)
    if kind < 17:
        verb = d.pick(["accept"] * 3 + ["connect", "reject", "close", "disconnect"] * 2
                      + list(VERBS))
        return SideVerb(d.integer(0, 1), verb, d.integer(0, 7),
                        d.pick([b"", b"", b"pd", bytes(300)]))
    return Wait(d.pick(WAITS))


def two_script(d: Draw, max_steps: int = 80) -> TwoScript:
    """A whole two-core case."""
    return TwoScript(d.integer(0, CONFIGS - 1), d.integer(0, CONFIGS - 1),
                     d.integer(0, 3) == 0,
                     tuple(two_step(d) for _ in range(d.integer(0, max_steps))))


def case_two_script(seed: int, index: int) -> TwoScript:
    """The script of two-core case ``index`` of seed ``seed``."""
    return two_script(RandomDraw(random.Random(f"{seed}:two:{index}")))


# ---- running -------------------------------------------------------------------------

@dataclass
class _Pair:
    runs: tuple[CoreRun, CoreRun]
    queue: list[tuple[int, bytes]] = field(default_factory=list)  # (to side, bytes)
    now: int = 0
    lids: list[int] = field(default_factory=lambda: [0, 0])

    def emitted(self, side: int, raws: list[bytes]) -> None:
        for raw in raws:
            self.queue.append((1 - side, raw))

    def drain(self) -> None:
        for side in (0, 1):
            try:
                raws = self.runs[side].drain()
            except Broken as broken:
                raise Broken(Violation(broken.violation.invariant, f"{SIDES[side]}: "
                                       f"{broken.violation.message}")) from None
            self.emitted(side, raws)

    def deliver(self, to: int, raw: bytes) -> None:
        try:
            seg = codec.decode(raw)
        except codec.DecodeError:
            return  # the receiving NIC drops a frame it cannot parse or checksum
        run = self.runs[to]
        run.now = self.now
        run.guarded(f"receive({seg.flag_text}) on {SIDES[to]}",
                    lambda: run.core.receive(seg, self.now))
        self.drain()

    def tick_until(self, end: int) -> None:
        """Fire every timer due up to ``end`` in time order; the clock ends at ``end``."""
        while (due := self.next_timer()) is not None and due[0] <= end:
            t, side = due
            self.now = max(t, self.now)
            run = self.runs[side]
            run.now = self.now
            run.guarded(f"handle_timer on {SIDES[side]}", run.core_timer)
            self.drain()
        self.now = max(self.now, end)

    def next_timer(self) -> tuple[int, int] | None:
        timers = [(t, side) for side in (0, 1)
                  if (t := self.runs[side].core.get_timer()) is not None]
        return min(timers) if timers else None


def execute_two(sc: TwoScript, *, plant_name: str | None = None,
                frames: list[tuple[int, bytes, bool]] | None = None) -> Violation | None:
    """Run one two-core script; the first broken invariant, or None. ``frames`` gets
    every frame as emitted (True: sent by A)."""
    runs = []
    for side, cfg in enumerate((sc.config_a, sc.config_p)):
        trace = Trace()
        core = make_core(SIDES[side], MACS[side], cfg, seed=11 + side, trace=trace)
        runs.append(CoreRun(core, trace, plant_name, frames=frames, sent_mark=side == 0))
    pair = _Pair((runs[0], runs[1]))
    try:
        _execute(pair, sc)
    except Broken as broken:
        return broken.violation
    return None


def _execute(pair: _Pair, sc: TwoScript) -> None:
    for side in (0, 1):
        core = pair.runs[side].core
        core.add_address(IPS[side])
        core.set_neighbour(IPS[1 - side], MACS[1 - side])
        pair.lids[side] = core.create_listen(IPS[side], PORT, backlog=4)
    pair.drain()
    _verb(pair, SideVerb(0, "connect", 0))
    if sc.cross:
        _verb(pair, SideVerb(1, "connect", 0))
    for step in sc.steps:
        if isinstance(step, Wait):
            pair.tick_until(pair.now + step.ns)
        elif isinstance(step, SideVerb):
            _verb(pair, step)
        else:
            _middlebox(pair, step)
    end = pair.now + BOUND_NS
    delivered = 0
    while True:
        while pair.queue:
            delivered += 1
            if delivered > SETTLE_FRAMES:
                raise Broken(Violation("quiet", f"the cores still exchange frames after "
                                        f"{SETTLE_FRAMES} honest deliveries"))
            to, raw = pair.queue.pop(0)
            pair.deliver(to, raw)
        due = pair.next_timer()
        if due is None or due[0] > end:
            break
        pair.tick_until(due[0])
    for side in (0, 1):
        core = pair.runs[side].core
        left = core.get_timer()
        if left is not None:
            raise Broken(Violation("timer", f"{SIDES[side]}: a timer is still set at "
                                    f"{left / 1e9:.3f} s, {BOUND_NS // S_NS} s after the "
                                    "script"))
        unexplained = FUZZED.unexplained_leaks(core)
        if unexplained:
            raise Broken(Violation("leak", f"{SIDES[side]}: nodes left with no kernel leak "
                                    "to explain them: "
                                    + ", ".join(f"{c} in {s}" for c, s in unexplained)))


def _mutate(seg: Segment, arg: int) -> Segment:
    if arg < len(_MUTATED):
        return replace(seg, payload=_MUTATED[arg])
    arg -= len(_MUTATED)
    if arg < len(FLAGS):
        return replace(seg, flags=FLAGS[arg])
    arg -= len(FLAGS)
    if arg < 2:
        return replace(seg, seq=(seg.seq + (1 if arg else -1)) & 0xFFFFFFFF)
    return replace(seg, ack=(seg.ack + (1 if arg == 3 else -1)) & 0xFFFFFFFF)


def _middlebox(pair: _Pair, step: Net) -> None:
    queue = pair.queue
    if step.action == "flush":
        # what is queued now; frames it provokes wait for later steps
        for _ in range(len(queue)):
            if not queue:
                break
            pair.deliver(*queue.pop(0))
        return
    if not queue:
        return
    if step.action == "pass":
        pair.deliver(*queue.pop(0))
    elif step.action == "drop":
        queue.pop(0)
    elif step.action == "dup":
        queue.insert(1, queue[0])
    elif step.action == "swap":
        if len(queue) > 1:
            queue[0], queue[1] = queue[1], queue[0]
    elif step.action == "corrupt":
        to, raw = queue[0]
        bit = step.arg % ((len(raw) - 14) * 8)  # inside the IP packet, past Ethernet
        flipped = bytearray(raw)
        flipped[14 + bit // 8] ^= 1 << (bit % 8)
        queue[0] = (to, bytes(flipped))
    else:
        to, raw = queue[0]
        try:
            seg = _mutate(codec.decode(raw), step.arg)
            queue[0] = (to, codec.encode(seg))  # checksums recomputed: the receiver takes it
        except codec.DecodeError:
            pass  # a frame already corrupted stays as it is
        except codec.EncodeError:
            queue.pop(0)


def _verb(pair: _Pair, step: SideVerb) -> None:
    run = pair.runs[step.side]
    core, now = run.core, pair.now
    run.now = now
    ip, other = IPS[step.side], IPS[1 - step.side]
    conns = core.conns()
    conn = conns[step.pick % len(conns)] if conns else step.pick
    before = [core.node(c) for c in conns]
    target = core.node(conn)
    what = f"{step.verb} on {SIDES[step.side]}"
    try:
        if step.verb in CONN_VERBS:
            conn_verb(core, step.verb, conn, data=step.data, pick=step.pick, now=now)
        elif step.verb == "connect":
            core.connect(ip, other, PORT, private_data=step.data, now_ns=now)
        elif step.verb == "remove_address":
            core.remove_address(ip, now_ns=now)
        elif step.verb == "add_address":
            core.add_address(ip, now_ns=now)
        elif step.verb == "destroy_listen":
            core.destroy_listen(pair.lids[step.side], now_ns=now)
        else:
            pair.lids[step.side] = core.create_listen(ip, PORT, backlog=step.pick, now_ns=now)
    except CmError:
        refused(core, step.verb, conn, target, conns, before, SIDES[step.side])
    except Exception as exc:
        raise Broken(Violation("escape", f"{type(exc).__name__} escaped {what}: "
                                f"{exc}")) from None
    pair.drain()


# ---- shrinking -----------------------------------------------------------------------

def _simpler(step: TwoStep) -> list[TwoStep]:
    if isinstance(step, Wait):
        return [Wait(0)] if step.ns else []
    if isinstance(step, SideVerb):
        return [replace(step, data=b"")] if step.data else []
    return [Net("pass")] if step.action not in ("pass", "flush") else []


def shrink_two(sc: TwoScript, violation: Violation, plant_name: str | None,
               budget: int = 3000) -> TwoScript:
    """A smaller two-core script breaking the same invariant."""
    def fails(candidate: TwoScript) -> bool:
        got = execute_two(candidate, plant_name=plant_name)
        return got is not None and got.invariant == violation.invariant

    return shrink_script(sc, fails, _simpler, (
        lambda best: [replace(best, config_a=0, config_p=0)]
        if best.config_a or best.config_p else [],
        lambda best: [replace(best, cross=False)],
    ), budget)
