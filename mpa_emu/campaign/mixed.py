"""``mpa-emu fuzz --mixed``: two hosts of any registered stacks through a hostile
middlebox, with random verbs, until both go quiet.

Case ``i`` of seed ``S`` (drawn from ``random.Random(f"{S}:mixed:{i}")``) takes the
ordered pair ``i mod n^2`` of :data:`mpa_emu.stacks.STACKS` (so every ordered pair gets
its share), draws each side's parameters (mostly defaults, else values inside their
ranges, and now and then one just outside: ``minimum - 1``, ``maximum + 1`` or 2 for a
switch), a wire that loses, duplicates, reorders and corrupts frames, segments forged
on the connection (any flags, sequence and acknowledgement numbers in and out of the
window) and verbs on both sides (connects with ports and IRD/ORD in and out of range,
accept, reject, graceful and abortive disconnects, close). The network then runs until
idle, for at most three days of virtual time and :data:`MAX_EVENTS` events.

Invariants (each failing case is counted under the first it breaks):

- ``refusal``: a parameter or verb argument outside its range is refused with an
  ``MpaEmuError`` or ``ValueError`` of one line; anything else escaping is ``escape``;
- ``escape``: no other exception escapes a verb or the network's run;
- ``unbounded``: the run ends idle, not at the event bound (a loop the kernel has too,
  cxgb4's retry with MPA v1 after every reset under ``mpa_rev=0``, is counted apart as
  ``kernel-loop``, as its kernel log line names it) nor with a timer still set after
  three days (``timer``; the same loop paced by a long timer is ``kernel-loop`` too);
- ``acks``: no host sends more than :data:`ACKS_PER_SEGMENT` pure ACKs per segment it
  received (plus a few): Linux rate-limits its answers to out-of-window segments
  (tcp_oow_rate_limited), no TCP answers an ACK with an ACK;
- ``iwcm-bug``: no upcall meets an iw_cm id in a state where iwcm.c would ``BUG()``;
- ``kernel-bug`` (counted apart, not a failure): a bug the stack reproduces because the
  kernel has it, named by a ``kernel_bug`` trace record on the connection (siw
  upcalling CLOSE before ESTABLISHED, where iwcm.c ``BUG()``s; irdma freeing a node its
  application holds); that connection is left out of the iw_cm, rdma_cm and leak
  checks, the kernel having gone wrong there first;
- ``rdma-cm``: each connection's rdma_cm events are a sequence the application can get
  (cma_iw_handler): a passive id starts with CONNECT_REQUEST, an active one with the
  outcome of its connect; ESTABLISHED and DISCONNECTED at most once, nothing after
  DISCONNECTED or after a failed connect;
- ``leak``: once idle, no node the kernel would have freed: irdma's ``leak_report``
  names each node it keeps and why; for the other stacks a node still there whose
  iw_cm id is neither connected nor waiting for its application is one.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mpa_emu.errors import MpaEmuError
from mpa_emu.net import Accept, Host, Manual, Network, Reject
from mpa_emu.net.faults import FaultConfig
from mpa_emu.stacks import STACKS
from mpa_emu.ulp.iwcm import IwCmState
from mpa_emu.ulp.rdma_cm import RdmaCmEventType as Ev
from mpa_emu.wire.codec import encode
from mpa_emu.wire.segment import ACK, FIN, PSH, RST, SYN, Segment

S_NS = 1_000_000_000
HORIZON_NS = 3 * 86_400 * S_NS
"""Virtual time a case may take: past every stack timer a parameter can set (cxgb4's
ep_timeout_secs goes up to a day)."""
MAX_EVENTS = 30_000
ACKS_PER_SEGMENT = 2
ACK_SLACK = 16
PORT = 4791
KERNEL_LOOP_LINES = ("Retrying with mpav1",)
"""Kernel log lines of loops the kernel has too (cxgb4 peer_abort under mpa_rev=0)."""
KERNEL_OWN = ("kernel-loop", "kernel-bug")
"""Invariants whose cases the kernel breaks too: reported, not failures of the model."""
VERBS = ("connect", "accept", "reject", "disconnect", "abort", "close", "forge", "wait")
CHUNK = 50


@dataclass(frozen=True, slots=True)
class MixedCase:
    """What one case is: the two sides and what happens (for the failure report)."""

    index: int
    initiator: str
    responder: str
    params: tuple[dict[str, int | bool], dict[str, int | bool]]
    policy: str
    steps: tuple[tuple[int, str, int], ...]


@dataclass(frozen=True, slots=True)
class MixedFailure:
    """A failing case: its index, invariant, message and what the case was."""

    index: int
    invariant: str
    message: str
    case: str


@dataclass(frozen=True, slots=True)
class MixedChunk:
    """Cases ``start .. start + count - 1`` of ``seed``; none started past ``deadline``."""

    seed: int
    start: int
    count: int
    deadline: float | None = None


@dataclass(slots=True)
class MixedResult:
    """A chunk's outcome: cases run, failing cases per invariant, the first failures,
    steps (verbs and forged segments) and events run."""

    ran: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    failures: list[MixedFailure] = field(default_factory=list)
    steps: int = 0
    events: int = 0
    refused: int = 0
    """Cases whose parameters were outside their ranges and refused as they must be."""


class Broken(MpaEmuError):
    """An invariant a case broke."""

    def __init__(self, invariant: str, message: str) -> None:
        super().__init__(message)
        self.invariant = invariant
        self.message = message


def pairs() -> list[tuple[str, str]]:
    """Every ordered pair of registered stacks."""
    names = sorted(STACKS)
    return [(a, b) for a in names for b in names]


def draw_params(rng: random.Random, stack: str) -> tuple[dict[str, int | bool], bool]:
    """A side's parameters and whether one of them is just outside its range."""
    out: dict[str, int | bool] = {}
    params = STACKS[stack].params
    for p in params:
        if rng.random() < 0.7:
            continue
        if p.kind is bool:
            out[p.name] = rng.random() < 0.5
        else:
            out[p.name] = rng.choice([p.minimum, p.maximum,
                                      rng.randint(p.minimum, min(p.maximum,
                                                                 p.minimum + 4096))])
    outside = bool(params) and rng.random() < 0.08
    if outside:
        p = rng.choice(params)
        out[p.name] = 2 if p.kind is bool else rng.choice([p.minimum - 1, p.maximum + 1])
    return out, outside


def case_of(seed: int, index: int) -> MixedCase:
    """Case ``index`` of ``seed``."""
    rng = random.Random(f"{seed}:mixed:{index}")
    every = pairs()
    ini, resp = every[index % len(every)]
    pi, _ = draw_params(rng, ini)
    pr, _ = draw_params(rng, resp)
    policy = rng.choice(["accept", "accept", "reject", "manual"])
    steps = tuple((rng.randint(0, 3_000_000_000) if rng.random() < 0.7
                   else rng.randint(0, 400 * S_NS), rng.choice(VERBS),
                   rng.randint(0, 1 << 30)) for _ in range(rng.randint(0, 12)))
    return MixedCase(index, ini, resp, (pi, pr), policy, steps)


def describe(case: MixedCase) -> str:
    """One line naming the case."""
    return (f"{case.initiator}{case.params[0] or ''} -> {case.responder}"
            f"{case.params[1] or ''}, listener {case.policy}, {len(case.steps)} steps")


def _refused(exc: BaseException, what: str) -> None:
    """An out-of-range value must be refused in one line by MpaEmuError or ValueError."""
    if not isinstance(exc, (MpaEmuError, ValueError)):
        raise Broken("escape", f"{what}: {type(exc).__name__}: {exc}")
    if "\n" in str(exc) or not str(exc):
        raise Broken("refusal", f"{what}: refused with a message not of one line: {exc!r}")


def run_case(case: MixedCase, seed: int = 0) -> tuple[int, int]:
    """Run one case; raises :class:`Broken` on the first invariant broken. Returns the
    steps and events run (steps -1: a parameter outside its range, refused)."""
    rng = random.Random(f"{seed}:mixed-run:{case.index}")
    faults = FaultConfig(loss=rng.choice([0.0, 0.0, 0.05, 0.2]),
                         duplicate=rng.choice([0.0, 0.05, 0.2]),
                         reorder=rng.choice([0.0, 0.05, 0.2]),
                         corrupt=rng.choice([0.0, 0.02, 0.1]))
    net = Network(seed=case.index, faults=faults)
    hosts: list[Host] = []
    for name, ip, stack, params in (("a", "10.0.0.1", case.initiator, case.params[0]),
                                    ("p", "10.0.0.2", case.responder, case.params[1])):
        try:
            hosts.append(net.add_host(name, ip, stack=stack, params=dict(params)))
        except Exception as exc:
            _refused(exc, f"add_host(stack={stack!r}, params={params})")
            return -1, 0
    a, p = hosts
    policy: Any = (Accept(b"ok") if case.policy == "accept" else
                   Reject(b"no") if case.policy == "reject" else Manual())
    p.listen(PORT, policy=policy)
    a.guarded("connect", a.connect, p, PORT, private_data=b"hello")
    for at, verb, arg in case.steps:
        net.at(at, _verb, net, a, p, verb, arg)
    try:
        result = net.run(HORIZON_NS, max_events=MAX_EVENTS)
    except Broken:
        raise
    except Exception as exc:
        raise Broken("escape", f"{type(exc).__name__} escaped Network.run: {exc}") from None
    if result.bounded:
        line = _repeated_log(net)
        if any(known in line for known in KERNEL_LOOP_LINES):
            raise Broken("kernel-loop", f"the event bound ({MAX_EVENTS} events): the "
                         f"kernel's own loop, \"{line}\"")
        raise Broken("unbounded", f"the hosts never went quiet ({MAX_EVENTS} events, "
                     f"{len(net.frames)} frames); most repeated log line: \"{line}\"")
    if result.reason == "until":
        line = _repeated_log(net)
        if any(known in line for known in KERNEL_LOOP_LINES):
            # the same loop at the pace of a long timer (the peer's ep_timeout_secs
            # between resets: peer_abort retries with MPA v1 after each one)
            raise Broken("kernel-loop", "a timer still set after three days of virtual "
                         f"time: the kernel's own loop, \"{line}\"")
        raise Broken("timer", "a timer is still set after three days of virtual time")
    _check_acks(net)
    bugs = _kernel_bugs(net)
    for host in hosts:
        _check_ulp(host, bugs.get(host.name, {}))
        _check_leaks(host, bugs.get(host.name, {}))
    if bugs:
        name, conns = next(iter(sorted(bugs.items())))
        conn, what = next(iter(sorted(conns.items())))
        raise Broken("kernel-bug", f"{name} ({net.hosts[name].stack}) conn {conn}: the "
                     f"kernel's own bug: {what}")
    return len(case.steps), result.events


def _kernel_bugs(net: Network) -> dict[str, dict[int, str]]:
    """Per host, the connections a ``kernel_bug`` trace record names and what it says:
    conditions the stack reproduces because the kernel has them."""
    out: dict[str, dict[int, str]] = {}
    for entry in net.journal or ():
        record = entry.item
        if entry.kind == "trace" and record.kind == "kernel_bug":
            conn = record.fields.get("conn")
            if isinstance(conn, int):
                what = record.fields.get("what") or record.fields.get("reason") or ""
                out.setdefault(entry.host, {}).setdefault(conn, f"{record.fn}: {what}")
    return out


def _verb(net: Network, a: Host, p: Host, verb: str, arg: int) -> None:
    host = a if arg & 1 else p
    conns = host.core.conns()
    conn = conns[(arg >> 1) % len(conns)] if conns else arg
    try:
        if verb == "connect":
            other = p if host is a else a
            port = (arg >> 3) % 70_000 - 2 if arg & 4 else None
            ird = (arg >> 5) % 300 - 2 if arg & 2 else 16
            what = f"connect(local_port={port}, ird=ord={ird}) on {host.stack}"
            try:
                host.connect(other, PORT, local_port=port, ird=ird, ord=ird)
            except Exception as exc:
                if _cm_refusal(exc):
                    return
                _refused(exc, what)
        elif verb == "accept":
            host.guarded("accept", host.accept, conn, b"acc")
        elif verb == "reject":
            host.guarded("reject", host.reject, conn, b"rej")
        elif verb in ("disconnect", "abort"):
            host.guarded("disconnect", host.disconnect, conn, graceful=verb == "disconnect")
        elif verb == "close":
            host.guarded("close", host.close, conn)
        elif verb == "forge":
            _forge(net, a, p, arg)
    except Broken:
        raise
    except Exception as exc:
        raise Broken("escape", f"{type(exc).__name__} escaped {verb} on {host.stack}: "
                     f"{exc}") from None


def _cm_refusal(exc: BaseException) -> bool:
    from mpa_emu.stacks.contract.errors import CmError

    return isinstance(exc, CmError)


FORGED_FLAGS = (ACK, ACK | PSH, RST, RST | ACK, FIN | ACK, SYN, SYN | ACK, 0)


def _forge(net: Network, a: Host, p: Host, arg: int) -> None:
    """A segment on the case's connection, as a middlebox would forge it: flags, and
    sequence and acknowledgement numbers at, near or far from where the flow is."""
    frames = net.frames
    last = next((f for f in reversed(frames) if f.segment is not None), None)
    if last is None:
        return
    seg = last.segment
    assert seg is not None
    flip = arg & 1
    src_mac, dst_mac = (seg.dst_mac, seg.src_mac) if flip else (seg.src_mac, seg.dst_mac)
    src_ip, dst_ip = (seg.dst_ip, seg.src_ip) if flip else (seg.src_ip, seg.dst_ip)
    sport, dport = (seg.dport, seg.sport) if flip else (seg.sport, seg.dport)
    seq, ack = (seg.ack, seg.seq) if flip else (seg.seq, seg.ack)
    shift = [0, 1, -1, 1 << 20, -(1 << 20), 1 << 31][(arg >> 1) % 6]
    flags = FORGED_FLAGS[(arg >> 4) % len(FORGED_FLAGS)]
    payload = [b"", b"", b"MPA ID Req Frame", bytes(24)][(arg >> 7) % 4]
    forged = Segment(src_mac, dst_mac, src_ip, dst_ip, sport, dport,
                     (seq + shift) & 0xFFFFFFFF, (ack - shift) & 0xFFFFFFFF if flags & ACK
                     else 0, flags, window=seg.window, payload=payload)
    sender = a if src_ip == a.address() else p
    net.inject(encode(forged), via=sender, comment="fuzz: forged by the middlebox")


def _repeated_log(net: Network) -> str:
    counts: dict[str, int] = {}
    for entry in net.journal or ():
        record = entry.item
        if entry.kind == "trace" and record.kind == "kernel_log" \
                and not record.fields.get("dynamic_debug"):
            text = str(record.fields.get("text", ""))
            counts[text] = counts.get(text, 0) + 1
    return max(counts, key=lambda k: counts[k]) if counts else ""


def _check_acks(net: Network) -> None:
    received: dict[str, int] = {}
    acks: dict[str, int] = {}
    by_address = {host.address(): host.name for host in net.hosts.values()}
    for frame in net.frames:
        seg = frame.segment
        if seg is None:
            continue
        to = by_address.get(seg.dst_ip)
        if to is not None:
            received[to] = received.get(to, 0) + 1
        if seg.flags == ACK and not seg.payload and frame.sender in net.hosts:
            acks[frame.sender] = acks.get(frame.sender, 0) + 1
    for name, sent in acks.items():
        limit = ACKS_PER_SEGMENT * received.get(name, 0) + ACK_SLACK
        if sent > limit:
            raise Broken("acks", f"{name} ({net.hosts[name].stack}) sent {sent} pure ACKs "
                         f"for {received.get(name, 0)} segments received")


_ACTIVE_FIRST = {Ev.ESTABLISHED, Ev.REJECTED, Ev.CONNECT_ERROR, Ev.UNREACHABLE}
_FAILED = {Ev.REJECTED, Ev.CONNECT_ERROR, Ev.UNREACHABLE}


def _check_ulp(host: Host, kernel_bugs: dict[int, str]) -> None:
    for step in host.ulp_steps:
        if step.iwcm.bug and step.upcall.conn not in kernel_bugs:
            raise Broken("iwcm-bug", f"{host.name} ({host.stack}): {step.iwcm.note} "
                         f"({step.upcall.event.name} on conn {step.upcall.conn})")
    seen: dict[int, list[Ev]] = {}
    for ev in host.cm_events:
        if ev.conn not in kernel_bugs:
            seen.setdefault(ev.conn, []).append(ev.event)
    for conn, events in seen.items():
        problem = _sequence_problem(events)
        if problem:
            names = ", ".join(e.name for e in events)
            raise Broken("rdma-cm", f"{host.name} ({host.stack}) conn {conn}: {problem} "
                         f"({names})")


def _sequence_problem(events: list[Ev]) -> str:
    first = events[0]
    if first != Ev.CONNECT_REQUEST and first not in _ACTIVE_FIRST:
        return f"{first.name} before any connect outcome or request"
    for before, after in itertools.pairwise(events):
        if before == Ev.DISCONNECTED:
            return f"{after.name} after DISCONNECTED"
        if before in _FAILED:
            return f"{after.name} after the failed connect ({before.name})"
    for once in (Ev.ESTABLISHED, Ev.DISCONNECTED, Ev.CONNECT_REQUEST):
        if events.count(once) > 1:
            return f"{once.name} {events.count(once)} times"
    return ""


_LIVE = (IwCmState.ESTABLISHED, IwCmState.CONN_RECV)


def _check_leaks(host: Host, kernel_bugs: dict[int, str]) -> None:
    core = host.core
    report: Callable[[], list[tuple[int, Any, str | None]]] | None = \
        getattr(core, "leak_report", None)
    if report is not None:
        unexplained = [(c, s) for c, s, why in report()
                       if why is None and c not in kernel_bugs]
        if unexplained:
            raise Broken("leak", f"{host.name} ({host.stack}): nodes left with no kernel "
                         "leak to explain them: " + ", ".join(f"{c} in {s}"
                                                              for c, s in unexplained))
        return
    for conn in core.conns():
        state = host.rdma_cm.state(conn)
        if state not in _LIVE and conn not in kernel_bugs:
            node = core.node(conn)
            raise Broken("leak", f"{host.name} ({host.stack}): conn {conn} is still there "
                         f"after the network went quiet (node {node}; iw_cm "
                         f"{state.name if state is not None else 'never told'})")


def run_mixed_chunk(chunk: MixedChunk) -> MixedResult:
    """Run a chunk of mixed-stack cases (picklable in and out)."""
    out = MixedResult()
    for index in range(chunk.start, chunk.start + chunk.count):
        if chunk.deadline is not None and time.time() > chunk.deadline:
            break
        case = case_of(chunk.seed, index)
        out.ran += 1
        try:
            steps, events = run_case(case, chunk.seed)
            if steps < 0:
                out.refused += 1
                continue
            out.steps += steps
            out.events += events
        except Broken as broken:
            out.counts[broken.invariant] = out.counts.get(broken.invariant, 0) + 1
            if sum(1 for f in out.failures if f.invariant == broken.invariant) < 3:
                out.failures.append(MixedFailure(index, broken.invariant, broken.message,
                                                 describe(case)))
    return out
