"""Checking a scenario's expectations against a finished run. Each result names the
scenario line and, when it fails, what happened instead."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from mpa_emu.net.host import Host
from mpa_emu.net.network import CapturedFrame
from mpa_emu.scenario.conns import RunLike, conn_ids
from mpa_emu.stacks.contract.events import IwEvent, Upcall
from mpa_emu.stacks.contract.trace import TraceRecord
from mpa_emu.ulp.rdma_cm import RdmaCmEvent
from mpa_emu.views.describe import errno_text, rdma_cm_label, rdma_cm_text, upcall_label
from mpa_emu.wire import erdma_mpa, mpa
from mpa_emu.wire.segment import flags_text

if TYPE_CHECKING:
    from mpa_emu.scenario.model import (
        CmEventExpect,
        FailureExpect,
        FrameExpect,
        ListenerExpect,
        StateExpect,
        TraceExpect,
        UpcallExpect,
    )

MAX_LISTED = 6

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ExpectResult:
    """One expectation: where it is, what it asks, whether it holds, and what was seen."""

    line: int | None
    what: str
    ok: bool
    actual: str = ""

    def text(self, path: str) -> str:
        """``file:line: PASS upcall ...`` or ``... FAIL ...: instead ...``."""
        where = f"{path}:{self.line}" if self.line is not None else path
        verdict = "ok  " if self.ok else "FAIL"
        tail = "" if self.ok or not self.actual else f"\n      instead: {self.actual}"
        return f"{where}: {verdict} {self.what}{tail}"


def check_all(run: RunLike) -> list[ExpectResult]:
    """Every expectation of the scenario, in file order."""
    sc = run.scenario
    results = [*(_upcall(run, e) for e in sc.upcalls), *(_state(run, e) for e in sc.states),
               *(_cm_event(run, e) for e in sc.cm_events),
               *(_frame(run, e) for e in sc.frames), *(_failure(run, e) for e in sc.failures),
               *(_trace(run, e) for e in sc.traces),
               *(_listener(run, e) for e in sc.listeners)]
    if run.result.bounded:
        results.append(ExpectResult(None, "run finishes within max_events", False,
                                    f"stopped after {run.result.events} events at "
                                    f"{run.result.now_ns / 1e9:.6f} s"))
    return sorted(results, key=lambda r: r.line or 0)


def _count_ok(n: int, count: int | None, lo: int | None = None,
              hi: int | None = None) -> bool:
    if count is not None:
        return n == count
    if lo is not None or hi is not None:
        return (lo is None or n >= lo) and (hi is None or n <= hi)
    return n >= 1


def _count_text(count: int | None, lo: int | None = None, hi: int | None = None) -> str:
    if count is not None:
        return f"exactly {count}"
    if lo is not None and hi is not None:
        return f"{lo} to {hi}"
    if lo is not None:
        return f"at least {lo}"
    if hi is not None:
        return f"at most {hi}"
    return "at least 1"


def _short(data: bytes) -> str:
    """Private data for a one-line message: its repr, cut after 40 bytes."""
    if len(data) <= 40:
        return repr(data)
    return f"{data[:40]!r}... ({len(data)} bytes)"


class _Sample(Generic[T]):
    """The first :data:`MAX_LISTED` of a stream of items and how many there were: a
    failed expectation lists a few of what it saw, whatever the run's length."""

    def __init__(self) -> None:
        self.count = 0
        self.first: list[T] = []

    def add(self, item: T) -> None:
        self.count += 1
        if len(self.first) < MAX_LISTED:
            self.first.append(item)

    def listed(self, text: Callable[[T], str], none: str) -> str:
        """``a; b; c (+4 more)``, or ``none`` when the stream was empty."""
        if not self.count:
            return none
        more = f" (+{self.count - MAX_LISTED} more)" if self.count > MAX_LISTED else ""
        return "; ".join(map(text, self.first)) + more


def _sample(items: Iterable[T]) -> _Sample[T]:
    sample: _Sample[T] = _Sample()
    for item in items:
        sample.add(item)
    return sample


def _listed(items: list[str], none: str) -> str:
    return _sample(items).listed(str, none)


def _upcall_text(u: Upcall, rdma: dict[int, str]) -> str:
    text = f"{upcall_label(u)} (private_data_len {u.private_data_len}) at {u.time_ns / 1e9:.6f}s"
    beside = rdma.get(id(u))
    return f"{text} {beside}" if beside else text


def _rdma_cm_beside(host: Host) -> dict[int, str]:
    """The rdma_cm label (``=> RDMA_CM_EVENT_...``) of each of the host's upcalls."""
    return {id(step.upcall): rdma_cm_label(step.trace_fields()) for step in host.ulp_steps}


def _upcall(run: RunLike, e: UpcallExpect) -> ExpectResult:
    host = run.net.host(e.host)
    want = IwEvent[e.event]
    parts = [f"{e.event} on {e.host}"]
    if e.connection is not None:
        parts.append(f"for {e.connection}")
    if e.status is not None:
        parts.append(f"status {errno_text(e.status) if e.status else 0}")
    if e.private_data is not None:
        parts.append(f"private data {_short(e.private_data)}")
    if e.private_data_len is not None:
        parts.append(f"private_data_len {e.private_data_len}")
    if e.ird is not None:
        parts.append(f"IRD {e.ird}")
    if e.ord is not None:
        parts.append(f"ORD {e.ord}")
    conns = set(conn_ids(run, e.connection, e.host)) if e.connection is not None else None
    # One pass over the upcalls (they may be on disk): the candidates are counted and a
    # few kept for the message.
    candidates: _Sample[Upcall] = _Sample()
    beside: dict[int, str] = {}
    """The rdma_cm label of each upcall kept for the message (one step per kept upcall)."""
    matched = 0
    for u, step in zip(host.upcalls, host.ulp_steps, strict=False):
        if u.event != want or (conns is not None and u.conn not in conns):
            continue
        if len(candidates.first) < MAX_LISTED:
            beside[id(u)] = rdma_cm_label(step.trace_fields())
        candidates.add(u)
        matched += ((e.status is None or u.status == e.status)
                    and (e.private_data is None or u.private_data == e.private_data)
                    and (e.private_data_len is None
                         or u.private_data_len == e.private_data_len)
                    and (e.ird is None or u.ird == e.ird) and (e.ord is None or u.ord == e.ord))
    what = f"upcall {' '.join(parts)} ({_count_text(e.count)})"
    ok = _count_ok(matched, e.count)
    actual = ""
    if not ok:
        if candidates.count:
            shown = candidates
        else:
            shown = _Sample()
            for u, step in zip(host.upcalls, host.ulp_steps, strict=False):
                if len(shown.first) < MAX_LISTED:
                    beside[id(u)] = rdma_cm_label(step.trace_fields())
                shown.add(u)
        label = "" if candidates.count else f"no {e.event}; upcalls on {e.host}: "
        actual = f"{matched} matching; " + label + shown.listed(
            lambda u: _upcall_text(u, beside), f"no upcalls on {e.host}")
    return ExpectResult(e.line, what, ok, actual)


def _cm_event_text(ev: RdmaCmEvent) -> str:
    status = f" ({errno_text(ev.status)})" if ev.status else ""
    return f"{rdma_cm_text(ev)}{status} at {ev.time_ns / 1e9:.6f}s"


def _cm_event(run: RunLike, e: CmEventExpect) -> ExpectResult:
    host = run.net.host(e.host)
    parts = [f"{e.event} on {e.host}"]
    if e.connection is not None:
        parts.append(f"for {e.connection}")
    if e.status is not None:
        parts.append(f"status {errno_text(e.status) if e.status else 0}")
    if e.at_ns is not None:
        parts.append(f"at {e.at_ns / 1e9:.6f}s")
    conns = set(conn_ids(run, e.connection, e.host)) if e.connection is not None else None
    events = host.cm_events
    candidates = [ev for ev in events if ev.name == e.event
                  and (conns is None or ev.conn in conns)]
    matched = [ev for ev in candidates if (e.status is None or ev.status == e.status)
               and (e.at_ns is None or ev.time_ns == e.at_ns)]
    what = f"rdma_cm event {' '.join(parts)} ({_count_text(e.count)})"
    ok = _count_ok(len(matched), e.count)
    actual = ""
    if not ok:
        shown = candidates if candidates else events
        label = "" if candidates else f"no {e.event}; rdma_cm events on {e.host}: "
        actual = f"{len(matched)} matching; " + label + _listed(
            [_cm_event_text(ev) for ev in shown], f"no rdma_cm events on {e.host}")
    return ExpectResult(e.line, what, ok, actual)


def _state(run: RunLike, e: StateExpect) -> ExpectResult:
    host = run.net.host(e.host)
    wanted = [f"{label} {value}" for label, value in (
        ("state", e.state), ("iwarp_state", e.iwarp_state), ("tcp_state", e.tcp_state))
        if value is not None]
    what = f"{' and '.join(wanted)} of {e.connection} on {e.host}"
    records = run.connections.get(e.connection, [])
    if not records:
        return ExpectResult(e.line, what, False, f"{e.connection} was never created "
                            f"(connect refused: {connect_refusal(run, e.connection)})")
    ids = conn_ids(run, e.connection, e.host)
    if not ids:
        return ExpectResult(e.line, what, e.state == "freed",
                            f"no node on {e.host} for {e.connection}")
    seen = []
    for conn in ids:
        view = host.node(conn)
        got = []
        if e.state is not None:
            got.append(("freed" if view is None else _state_name(view), e.state))
        if e.iwarp_state is not None or e.tcp_state is not None:
            qp = host.qp_state(conn)
            if e.iwarp_state is not None:
                got.append(("none" if qp is None else qp.iwarp_state, e.iwarp_state))
            if e.tcp_state is not None:
                got.append(("none" if qp is None else qp.tcp_state, e.tcp_state))
        seen.append(got)
    ok = all(have == want for got in seen for have, want in got)
    return ExpectResult(e.line, what, ok, ", ".join(
        f"#{c}: " + "/".join(have for have, _ in got) for c, got in zip(ids, seen, strict=True)))


def connect_refusal(run: RunLike, name: str) -> str:
    """Why the named ``[[connect]]`` made no connection: the errno name and message of
    its connect verb's failures on its host (``EADDRNOTAVAIL: ...``)."""
    specs = [c for c in run.scenario.connects if (c.name or f"line {c.line}") == name]
    reasons: list[str] = []
    for c in specs:
        times = {c.at_ns + i * c.interval_ns for i in range(c.count)}
        for f in run.net.host(c.host).failures:
            if f.verb == "connect" and f.time_ns in times:
                reason = f"{errno_text(-f.errno).lstrip('-')}: {f.message}" if f.errno \
                    else f.message
                if reason not in reasons:
                    reasons.append(reason)
    return "; ".join(reasons) if reasons else "see verb failures"


def _listener(run: RunLike, e: ListenerExpect) -> ExpectResult:
    want = "installed" if e.syn_qhash else "not installed"
    what = f"SYN qhash of listener {e.listener} on {e.host} {want}"
    found = run.listeners.get(e.listener)
    if found is None:
        return ExpectResult(e.line, what, False, f"{e.listener} was never created")
    view = run.net.host(found[0]).listener(found[1])
    if view is not None and not hasattr(view, "syn_qhash_installed"):
        # the loader refuses this; a Scenario built in Python reaches here
        return ExpectResult(e.line, what, False, f"not for this stack: {found[0]}'s "
                            "listeners have no TCP_SYN qhash entry")
    installed = view is not None and bool(view.syn_qhash_installed)
    actual = "gone" if view is None else ("installed" if installed else "not installed")
    return ExpectResult(e.line, what, installed == e.syn_qhash, actual)


def _state_name(view: object) -> str:
    state = getattr(view, "state", None)
    name = getattr(state, "name", None)
    return str(name if name is not None else state)


def _frame_mpa(frame: CapturedFrame) -> mpa.MpaFrame | None:
    """The MPA request/reply a frame carries (None for any other payload)."""
    seg = frame.segment
    if seg is None or not mpa.looks_like_mpa(seg.payload):
        return None
    try:
        return mpa.decode_frame(seg.payload)
    except mpa.MpaFormatError:
        return None


def _frame_pdata(frame: CapturedFrame) -> bytes | None:
    seg = frame.segment
    if seg is not None and erdma_mpa.looks_like_erdma(seg.payload):
        # erdma's dialect: the private data follows its 8-byte extension (erdma_cm.h)
        try:
            return erdma_mpa.parse(seg.payload).private_data
        except mpa.MpaFormatError:
            return None
    decoded = _frame_mpa(frame)
    return None if decoded is None else decoded.private_data


def _frame_rtr(frame: CapturedFrame) -> tuple[str, ...] | None:
    """The RTR types in an MPA frame's RFC 6581 block, sorted (None without a block)."""
    decoded = _frame_mpa(frame)
    block = None if decoded is None else decoded.rtr
    if block is None:
        return None
    return tuple(sorted(n for ok, n in ((block.zero_len_send, "send"), (block.write0, "write"),
                                        (block.read0, "read")) if ok))


LOST_NOTES = ("wire: lost", "wire: dropped", "dropped by", "not delivered")
"""Notes the network puts on a frame that did not reach its receiver."""


def _lost(frame: CapturedFrame) -> bool:
    return any(n.startswith(LOST_NOTES) for n in frame.notes)


def _frame_matches(frame: CapturedFrame, e: FrameExpect) -> bool:
    seg = frame.segment
    if e.lost is not None and _lost(frame) != e.lost:
        return False
    if e.kind is not None and frame.kind != e.kind:
        return False
    if e.sender is not None and frame.sender != e.sender:
        return False
    if e.flags is not None and (seg is None or set(flags_text(seg.flags)) != set(e.flags)):
        return False
    if e.private_data is not None and _frame_pdata(frame) != e.private_data:
        return False
    if e.mpa_rev is not None:
        if seg is None or not mpa.looks_like_mpa(seg.payload):
            return False
        if seg.payload[mpa.KEY_SIZE + 1] != e.mpa_rev:
            return False
    return e.rtr is None or _frame_rtr(frame) == e.rtr


def _frame(run: RunLike, e: FrameExpect) -> ExpectResult:
    parts = [e.kind or "frames"]
    if e.sender:
        parts.append(f"from {e.sender}")
    if e.flags:
        parts.append(f"flags {e.flags}")
    if e.mpa_rev is not None:
        parts.append(f"MPA rev {e.mpa_rev}")
    if e.private_data is not None:
        parts.append(f"private data {_short(e.private_data)}")
    if e.rtr is not None:
        parts.append(f"RTR {' '.join(e.rtr) or 'none'}")
    if e.lost is not None:
        parts.append("lost on the way" if e.lost else "delivered")
    # One pass over the frames (they may be on disk): matches counted, a few of the
    # frames of the kind kept for the message.
    matched = 0
    same_kind: _Sample[CapturedFrame] = _Sample()
    for f in run.net.frames:
        if f.loopback:
            continue
        matched += _frame_matches(f, e)
        if e.kind is None or f.kind == e.kind:
            same_kind.add(f)
    what = f"frame {' '.join(parts)} ({_count_text(e.count, e.min, e.max)})"
    ok = _count_ok(matched, e.count, e.min, e.max)
    actual = ""
    if not ok:
        actual = f"{matched} matching; " + same_kind.listed(
            _frame_text, f"no {e.kind or ''} frames on the wire".replace("  ", " "))
    return ExpectResult(e.line, what, ok, actual)


def _frame_text(f: CapturedFrame) -> str:
    return (f"#{f.index} {f.kind} from {f.sender}"
            + (f" flags {flags_text(f.segment.flags)}" if f.segment is not None else "")
            + (f" pd={_short(pd)}" if (pd := _frame_pdata(f)) is not None else "")
            + (f" RTR {' '.join(r) or 'none'}" if (r := _frame_rtr(f)) is not None else ""))


def _failure(run: RunLike, e: FailureExpect) -> ExpectResult:
    host = run.net.host(e.host)
    matched = [f for f in host.failures if (e.verb is None or f.verb == e.verb)
               and (e.errno is None or f.errno == e.errno)]
    what = (f"verb failure on {e.host}" + (f" {e.verb}" if e.verb else "")
            + (f" errno {e.errno}" if e.errno is not None else "")
            + f" ({_count_text(e.count)})")
    ok = _count_ok(len(matched), e.count)
    actual = "" if ok else _listed([f"{f.verb}: errno {f.errno} {f.message}"
                                    for f in host.failures], f"no verb failures on {e.host}")
    return ExpectResult(e.line, what, ok, actual)


def _fields_text(fields: dict[str, object]) -> str:
    """A record's own fields as compact JSON, cut after 80 characters."""
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"),
                      default=lambda v: v.hex() if isinstance(v, bytes) else str(v))
    return text if len(text) <= 80 else text[:77] + "..."


def _trace(run: RunLike, e: TraceExpect) -> ExpectResult:
    records = run.net.trace.kept() if run.net.trace is not None else []
    # One pass over the records (they may be on disk).
    of_kind: _Sample[TraceRecord] = _Sample()
    matched = 0
    for r in records:
        if r.kind != e.kind or (e.host is not None and r.host != e.host):
            continue
        of_kind.add(r)
        matched += ((e.fn is None or r.fn == e.fn)
                    and (e.text is None or e.text in r.to_json()))
    parts = [f"trace {e.kind}"]
    if e.host:
        parts.append(f"on {e.host}")
    if e.fn:
        parts.append(f"from {e.fn}")
    if e.text:
        parts.append(f"containing {e.text!r}")
    ok = _count_ok(matched, e.count)
    actual = "" if ok else f"{matched} matching; " + of_kind.listed(
        lambda r: f"{r.host} {r.fn} {_fields_text(r.fields)}", f"no {e.kind} records")
    return ExpectResult(e.line, f"{' '.join(parts)} ({_count_text(e.count)})", ok, actual)
