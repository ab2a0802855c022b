"""Random scripts for one CM core: peer segments (well-formed, mutated MPA frames,
random bytes), verbs and waits, drawn from any source of choices.

The same generator serves ``mpa-emu fuzz`` (a seeded :class:`random.Random` per case)
and the property tests (hypothesis draws, which it can shrink): both implement
:class:`Draw`. A :class:`Script` is plain data and round-trips through JSON, so a
failing case is written as a reproducer file.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from mpa_emu.stacks import STACKS
from mpa_emu.stacks.base import FuzzModel
from mpa_emu.stacks.contract.api import CoreApi
from mpa_emu.wire import mpa
from mpa_emu.wire.segment import ACK, FIN, PSH, RST, SYN

T = TypeVar("T")
S_NS = 1_000_000_000


class Draw(Protocol):
    """A source of choices."""

    def integer(self, lo: int, hi: int) -> int:
        """An integer in ``lo..hi`` (both included)."""
        ...

    def pick(self, options: list[T]) -> T:
        """One of ``options``."""
        ...

    def binary(self, max_size: int) -> bytes:
        """Random bytes, at most ``max_size``."""
        ...


class RandomDraw:
    """:class:`Draw` from a seeded :class:`random.Random`."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def integer(self, lo: int, hi: int) -> int:
        """An integer in ``lo..hi``."""
        return self.rng.randint(lo, hi)

    def pick(self, options: list[T]) -> T:
        """One of ``options``."""
        return options[self.rng.randrange(len(options))]

    def binary(self, max_size: int) -> bytes:
        """Random bytes, at most ``max_size``."""
        return self.rng.randbytes(self.rng.randint(0, max_size))


def _frame(**kw: Any) -> bytes:
    return mpa.MpaFrame(**kw).to_bytes()


RTR = mpa.RtrBlock(16, 16, write0=True, read0=True)
REQ = _frame(request=True, rev=2, rtr=RTR, flags=0x50, private_data=b"r")
REP = _frame(request=False, rev=2, rtr=mpa.RtrBlock(16, 16, read0=True), flags=0x50)
REJ = _frame(request=False, rev=2, rtr=mpa.RtrBlock(16, 16, read0=True), flags=0x70,
             private_data=b"no")
V1REQ = _frame(request=True, rev=1)


def _with(frame: bytes, offset: int, value: bytes) -> bytes:
    return frame[:offset] + value + frame[offset + len(value):]


def _spoiled(frame: bytes, other: bytes, other_key: str) -> dict[str, bytes]:
    """``frame`` (a request or a reply) spoiled one field at a time, named: the RFC 5044
    section 7.1 header (key 0-15, flags 16, rev 17, PD_Length 18-19) and the RFC 6581
    section 3 IRD/ORD block (the first 4 bytes of private data). ``other`` lends its key."""
    return {
        "bad key": _with(frame, 15, b"X"),
        other_key: _with(frame, 0, other[:16]),
        "rev 0": _with(frame, 17, b"\x00"),
        "rev 3": _with(frame, 17, b"\x03"),
        "pd_length 513": _with(frame, 18, (513).to_bytes(2, "big")) + bytes(513),
        "pd_length 0xffff": _with(frame, 18, b"\xff\xff"),
        "pd_length beyond the bytes": _with(frame, 18, (40).to_bytes(2, "big")),
        "pd_length 0 with data": _with(frame, 18, b"\x00\x00"),
        "unknown flags": _with(frame, 16, b"\x5f"),
        "no marker/crc flags": _with(frame, 16, b"\x00"),
        "no rtr bits": _with(frame, 20, b"\x80\x10\x00\x10"),
        "ird 0x3fff ord 0x3fff": _with(frame, 20, b"\xbf\xff\x7f\xff"),
        "no p2p bit": _with(frame, 20, b"\x00\x10\x00\x10"),
    }


MUTATED_MPA: dict[str, bytes] = {
    **_spoiled(REQ, REP, "reply key on a request"),
    "v1 request": V1REQ,
    "half header": REQ[:10],
    "trailing byte": REQ + b"x",
    "short reply": REP[:22],
    "reply": REP,
    "reject": REJ,
    "request": REQ,
}
"""Mutated and well-formed MPA frames, named (the live fuzzer uses the same list)."""

MUTATED_REPLIES: dict[str, bytes] = {
    # what a responder answers, spoiled; the live fuzzer's accept mode sends these to an
    # initiator
    "reply": REP,
    "reject": REJ,
    **_spoiled(REP, REQ, "request key on a reply"),
    "v1 reply": _frame(request=False, rev=1),
    "half header": REP[:10],
    "trailing byte": REP + b"x",
}
"""Mutated and well-formed MPA replies and rejects, named."""

FLAGS = [SYN, SYN | ACK, ACK, ACK | FIN, FIN, RST, RST | ACK, 0, SYN | FIN, SYN | RST,
         ACK | PSH, FIN | RST]
OPTIONS = [b"", bytes.fromhex("020405b403030200"), bytes.fromhex("0203"),
           bytes.fromhex("0204010003030200"), bytes.fromhex("01010303"),
           bytes.fromhex("0300"), bytes.fromhex("080a000000010000000004020000"),
           bytes.fromhex("02040218")]
VERBS = ["accept", "reject", "close", "connect", "destroy_listen", "listen", "disconnect"]
WAITS = [0, 1_000_000, 100_000_000, S_NS, 13 * S_NS]


def _fuzzed() -> tuple[str, FuzzModel]:
    for name, st in STACKS.items():
        if st.fuzz is not None:
            return name, st.fuzz
    raise LookupError("no registered stack has a FuzzModel")


FUZZED_STACK, FUZZED = _fuzzed()
"""The stack the one- and two-core modes fuzz, and its model: the first registered
stack with a :class:`~mpa_emu.stacks.base.FuzzModel` (irdma)."""
CONFIGS = FUZZED.configs
"""Number of core configurations (:attr:`FuzzModel.configs
<mpa_emu.stacks.base.FuzzModel.configs>`; :func:`mpa_emu.campaign.invariants.make_core`)."""


@dataclass(frozen=True, slots=True)
class SegStep:
    """A segment from a peer: ``target`` 0, 1 (passive peers) or 2 (the active node's
    peer); seq/ack either the node's expected value plus a delta or arbitrary."""

    target: int
    flags: int
    seq_valid: bool
    seq_delta: int
    ack_valid: bool
    ack_delta: int
    payload: bytes
    options: bytes


@dataclass(frozen=True, slots=True)
class VerbStep:
    """A verb on the ``pick``-th connection (modulo their number)."""

    verb: str
    pick: int
    data: bytes


@dataclass(frozen=True, slots=True)
class Wait:
    """Let ``ns`` pass, firing the timers due."""

    ns: int


Step = SegStep | VerbStep | Wait


@dataclass(frozen=True, slots=True)
class Script:
    """One fuzz case: the core's configuration, where the prelude leaves it, the steps."""

    config: int
    deep_passive: bool
    deep_active: bool
    steps: tuple[Step, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        """Plain data (bytes as hex)."""
        def step(s: Step) -> dict[str, Any]:
            if isinstance(s, Wait):
                return {"wait": s.ns}
            if isinstance(s, VerbStep):
                return {"verb": s.verb, "pick": s.pick, "data": s.data.hex()}
            return {"seg": s.target, "flags": s.flags, "seq_valid": s.seq_valid,
                    "seq_delta": s.seq_delta, "ack_valid": s.ack_valid,
                    "ack_delta": s.ack_delta, "payload": s.payload.hex(),
                    "options": s.options.hex()}
        return {"config": self.config, "deep_passive": self.deep_passive,
                "deep_active": self.deep_active, "steps": [step(s) for s in self.steps]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Script:
        """The inverse of :meth:`to_json` (KeyError/ValueError/TypeError on bad data)."""
        steps: list[Step] = []
        for s in data["steps"]:
            if "wait" in s:
                steps.append(Wait(int(s["wait"])))
            elif "verb" in s:
                if s["verb"] not in VERBS:
                    raise ValueError(f"unknown verb {s['verb']!r}")
                steps.append(VerbStep(s["verb"], int(s["pick"]), bytes.fromhex(s["data"])))
            else:
                steps.append(SegStep(int(s["seg"]) % 3, int(s["flags"]) & 0xFF,
                                     bool(s["seq_valid"]), int(s["seq_delta"]),
                                     bool(s["ack_valid"]), int(s["ack_delta"]),
                                     bytes.fromhex(s["payload"]),
                                     bytes.fromhex(s["options"])))
        return cls(int(data["config"]) % CONFIGS, bool(data["deep_passive"]),
                   bool(data["deep_active"]), tuple(steps))


_MUTATED = list(MUTATED_MPA.values())


def payload(d: Draw) -> bytes:
    """Mostly empty, else a (mutated) MPA frame, a split of one, or random bytes."""
    kind = d.integer(0, 9)
    if kind < 4:
        return b""
    if kind < 7:
        return d.pick(_MUTATED)
    if kind < 8:
        frame = d.pick(_MUTATED)
        cut = d.integer(0, len(frame))
        return frame[:cut] if d.integer(0, 1) else frame[cut:]
    return d.binary(600)


def seg_step(d: Draw) -> SegStep:
    """A peer segment: mostly in-window and exactly acknowledging, so handshakes move."""
    flags = d.pick([ACK] * 6 + [ACK | FIN] * 2 + [SYN] * 2 + FLAGS)
    deltas = [0] * 8 + [1, -1, 2]
    return SegStep(d.integer(0, 2), flags, d.integer(0, 3) > 0, d.pick(deltas),
                   d.integer(0, 3) > 0, d.pick(deltas), payload(d),
                   d.pick(OPTIONS[:2] * 3 + OPTIONS[2:]))


def step(d: Draw) -> Step:
    """Three segments to one verb to one wait."""
    kind = d.integer(0, 4)
    if kind < 3:
        return seg_step(d)
    if kind == 3:
        return VerbStep(d.pick(VERBS), d.integer(0, 7), d.pick([b"", b"pd", bytes(300)]))
    return Wait(d.pick(WAITS))


def script(d: Draw, max_steps: int = 60) -> Script:
    """A whole case."""
    config = d.integer(0, CONFIGS - 1)
    deep_passive = bool(d.integer(0, 1))
    deep_active = bool(d.integer(0, 1))
    steps = tuple(step(d) for _ in range(d.integer(0, max_steps)))
    return Script(config, deep_passive, deep_active, steps)


CONN_VERBS = ("accept", "reject", "close", "disconnect")
"""The verbs the fuzzers apply to one connection, through :func:`conn_verb`."""


def conn_verb(core: CoreApi, verb: str, conn: int, *, data: bytes, pick: int,
              now: int) -> None:
    """Apply ``verb`` (one of :data:`CONN_VERBS`) to connection ``conn`` of ``core``; a
    disconnect is graceful when ``pick`` is odd. Raises what the verb raises."""
    if verb == "accept":
        core.accept(conn, private_data=data, now_ns=now)
    elif verb == "reject":
        core.reject(conn, private_data=data, now_ns=now)
    elif verb == "close":
        core.close(conn, now_ns=now)
    else:
        core.disconnect(conn, graceful=bool(pick & 1), now_ns=now)
