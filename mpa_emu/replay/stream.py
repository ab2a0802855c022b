"""Replay a capture as a stream, in memory bounded by the connections open at once.

The whole-capture replay (:func:`mpa_emu.replay.recording.load` and
:class:`~mpa_emu.replay.engine.Engine`) keeps every frame, every emitted frame and every
comparison until the end. Most replays are clean matches whose report is a verdict line
and counts, so :func:`stream_replay` tries that case first: it reads the capture one
record at a time with the fast codec, keeps a window of frames read ahead (the scripted
application needs a few: the ISN of the recorded SYN-ACK when the peer's SYN arrives, the
private data of the recorded MPA request at connect), compares each emitted frame with
the recorded one as soon as both exist and forgets both, and forgets a flow once its
frames are replayed and the core has freed its node.

Whenever the streamed pass cannot be sure to tell what the whole-capture replay tells
(any difference between the two sides, an emulator note, frames out of time order, a
look-ahead beyond the window, a flow coming back after it was forgotten), it raises
:class:`Fallback` and the caller replays the capture the whole-capture way, whose report
names every divergence. Both ways drive the same core with the same calls at the same
times, so a clean streamed pass reports exactly what the other would.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO

from mpa_emu.capture.decode import Undecodable, after_refusal
from mpa_emu.capture.pcap import LINKTYPE_ETHERNET, CaptureError, CaptureRecord, read_capture
from mpa_emu.capture.spool import RecordSpool as Spool
from mpa_emu.cm.errors import CmError
from mpa_emu.cm.events import IwEvent, Upcall
from mpa_emu.gc_tuning import fewer_young_collections
from mpa_emu.replay.compare import Comparison
from mpa_emu.replay.engine import (
    _RESTART_WINDOW,
    AppAction,
    Emitted,
    Engine,
    EngineOptions,
    FlowRun,
    Injection,
    RunResult,
    with_ack,
)
from mpa_emu.replay.recording import FlowKey, Frame, OffloadClassifier, Recording, nic_verdict
from mpa_emu.replay.report import ReplayOptions, ReplayReport
from mpa_emu.views.describe import mpa_kind
from mpa_emu.wire.codec import DecodeError, decode
from mpa_emu.wire.segment import ACK, FIN, RST, SYN, Segment
from mpa_emu.wire.seq import MASK as MASK32

WINDOW = 1024
"""Frames read ahead of the one being replayed."""
MAX_LOOKAHEAD = 1 << 16
"""A look-ahead not answered within this many frames sends the replay the whole-capture
way."""
MAX_UNPAIRED = 4096
"""Emitted (or recorded) frames of one flow waiting for their counterpart."""
EVICT_EVERY = 512
"""Replayed frames between two passes over the flows that may be forgotten."""

_CONNECT, _ANSWER, _CLOSE = 1, 2, 4

class Fallback(Exception):
    """The streamed pass cannot vouch for the outcome: replay the whole capture."""


@dataclass(slots=True)
class StreamFlow(FlowRun):
    """A flow of the streamed pass: the engine's bookkeeping plus what was read ahead."""

    order: int = 0
    """Position of the flow's first frame among the flows (the listeners' order)."""
    window: deque[Frame] = field(default_factory=deque)
    """Frames of the flow read but not replayed yet."""
    active: bool | None = None
    """Whether the recorded host sent the flow's first SYN (None: no SYN seen yet)."""
    assumed_passive: bool = False
    last_syn: int | None = None
    first_out_seq: int | None = None
    expected: deque[Frame] = field(default_factory=deque)
    """Recorded frames of the host waiting for the emulator's counterpart."""
    sent: deque[Emitted] = field(default_factory=deque)
    """Emitted frames waiting for the recorded counterpart."""
    classifier: OffloadClassifier = field(default_factory=OffloadClassifier)
    nic_closed: bool = False
    answered: set[int] = field(default_factory=set)
    answer_times: list[int] = field(default_factory=list)
    conns: set[int] = field(default_factory=set)
    idle: bool = False
    """All read frames are replayed (the flow waits in the engine's idle queue)."""
    queued: bool = False
    """The flow is in the engine's idle queue (once at most)."""
    reader: Callable[[StreamFlow], None] | None = None
    """Reads ahead until the flow's next recorded connection start is known."""

    def next_isn(self) -> int | None:
        if self.next_start >= len(self.starts) and self.reader is not None:
            self.reader(self)
        return FlowRun.next_isn(self)


def _ports(key: FlowKey) -> tuple[int, bytes, int]:
    return (key[1], key[2], key[3])


class _Tee:
    """A binary stream that copies what is read from ``src`` into ``copy`` (stdin kept
    for the whole-capture replay should the streamed pass fall back)."""

    def __init__(self, src: IO[bytes], copy: IO[bytes]) -> None:
        self.src = src
        self.copy = copy

    def read(self, n: int = -1) -> bytes:
        data = self.src.read(n)
        self.copy.write(data)
        return data


class StreamEngine(Engine):
    """One streamed replay: build with a capture source, call :meth:`replay`."""

    vlan: int | None = None
    """The emulated host's VLAN, from its first frame. Not set in ``__init__``: after a
    store of None there, the type checker (and so the compiled build) would take the
    attribute for None until the end of ``__init__``, though reading frames sets it."""

    def __init__(self, source: str | IO[bytes], label: str, options: ReplayOptions,
                 progress: Callable[[int, int], None] | None = None,
                 size: int | None = None) -> None:
        self.label = label
        self.ropt = options
        self.size = size
        self.records: Iterator[CaptureRecord] = read_capture(source)
        self.ip = options.emulate
        self.eof = False
        self.total = 0
        self.relevant = 0
        self.consumed = 0
        self.t0: int | None = None
        self.last_ns = 0
        self.last_time = 0
        self.last_number = 0
        self.damage = ""
        self.ignored: dict[str, int] = {}
        self.artefacts: dict[bytes, int] = {}
        self.mac = b""
        self.nb: dict[bytes, bytes] = {}
        self.pending: deque[tuple[Frame, int, StreamFlow]] = deque()
        """Frames read, not replayed yet: each with its scripted verbs and its flow."""
        self.evicted: set[int] = set()
        self.idle: deque[StreamFlow] = deque()
        """Flows whose read frames are all replayed, oldest first."""
        self.listening: dict[tuple[int, int | None], int] = {}
        self.listens: list[tuple[tuple[int, int | None], AppAction]] = []
        self.compared_count = 0
        self.matched = 0
        self.flow_counter = 0
        self.frame: Frame | None = None
        self.started = False
        # The flows read so far; the engine's ``flows`` and ``_by_ports`` become these
        # very dicts once it is built.
        self._sflows: dict[FlowKey, FlowRun] = {}
        self._sports: dict[tuple[int, bytes, int], FlowKey] = {}
        self._early_listens: list[tuple[int, int | None]] = []
        self._need = self._need_start
        # Prime: the core needs the host's MAC, known from its first frame.
        while not self.mac and not self.eof:
            self._read_one()
        if not self.mac:
            raise Fallback("no frame of the address")
        skeleton = Recording(label, self.ip, [], {}, self.mac, self.vlan, {}, 0, {}, 0, 0)
        pre = self.pending
        super().__init__(skeleton, EngineOptions(
            on_request=options.on_request, backlog=options.backlog,
            horizon_ns=options.horizon_ns, seed=options.seed, config=options.config,
            rebase=False, trace=False), progress)
        self.started = True
        self.flows = self._sflows
        self._by_ports = self._sports
        self.pending = pre
        # Sequences, not lists: only the JSON report reads them again.
        self.actions = Spool(AppAction)
        self.upcalls = Spool(Upcall)
        self.upcall_frames = _Discard()
        self.core.add_address(self.ip, vlan=self.vlan, now_ns=0)
        for ip, mac in self.nb.items():
            self.core.set_neighbour(ip, mac)
        for port, vlan in self._early_listens:
            self._listen(port, vlan)

    # ---- reading -----------------------------------------------------------------

    def _read_one(self) -> None:
        """Read and classify the capture's next record (the per-frame hot path: one
        decode, one :class:`Frame`, no text)."""
        try:
            raw = next(self.records)
        except StopIteration:
            self.eof = True
            return
        except CaptureError as damaged:
            if self.total == 0:
                raise Fallback(str(damaged)) from None
            self.damage = (f"the capture is damaged after frame {self.total} ({damaged}); "
                           "replayed up to it")
            self.eof = True
            return
        self.total = number = self.total + 1
        data = raw.frame
        self.consumed += len(data) + 32
        if raw.linktype != LINKTYPE_ETHERNET:
            raise Fallback("not Ethernet")
        stamp = raw.time_ns
        t0 = self.t0
        if stamp is not None:
            if t0 is None:
                self.t0 = t0 = stamp
            self.last_ns = stamp
        elif t0 is None:
            raise Fallback("a frame without a timestamp before the first timestamp")
        ip = self.ip
        nic_dropped = ""
        try:
            seg = decode(data)
        except DecodeError as exc:
            lenient = after_refusal(data, exc)
            if isinstance(lenient, Undecodable):
                self.ignored[lenient.reason] = self.ignored.get(lenient.reason, 0) + 1
                return
            seg = lenient.seg
            if seg.dst_ip == ip:
                nic_dropped, artefact = nic_verdict(lenient, self.ropt.checksums)
                if artefact:
                    self.artefacts[seg.src_ip] = self.artefacts.get(seg.src_ip, 0) + 1
        src, dst = seg.src_ip, seg.dst_ip
        if src == ip:
            outbound = True
            key: FlowKey = (ip, seg.sport, dst, seg.dport, seg.vlan)
            nic_dropped = ""
            if not self.mac:
                self.mac, self.vlan = seg.src_mac, seg.vlan
            if dst not in self.nb:
                self._neighbour(dst, seg.dst_mac)
        elif dst == ip:
            outbound = False
            key = (ip, seg.dport, src, seg.sport, seg.vlan)
            if not self.mac:
                self.mac, self.vlan = seg.dst_mac, seg.vlan
            known = self.nb.get(src)
            if known is None:
                self._neighbour(src, seg.src_mac)
            elif known != seg.src_mac:
                raise Fallback("a neighbour's MAC changes")  # the last one wins there
        else:
            self.ignored["other hosts"] = self.ignored.get("other hosts", 0) + 1
            return
        time_ns = self.last_ns - t0
        if time_ns < self.last_time:
            raise Fallback("frames out of time order")
        self.last_time = time_ns
        self.last_number = number
        self.relevant += 1
        frame = Frame(number, time_ns, seg, outbound, key, nic_dropped)
        run = self._sflows.get(key)
        if run is None:
            run = self._new_flow(key)
        assert isinstance(run, StreamFlow)
        run.idle = False
        run.window.append(frame)
        marks = 0
        flags = seg.flags
        if flags & SYN:
            if outbound:
                if run.last_syn is None or (seg.seq - run.last_syn) & MASK32 >= _RESTART_WINDOW:
                    run.starts.append(seg.seq)
                    if not flags & ACK:
                        marks |= _CONNECT
                run.last_syn = seg.seq
            if not flags & ACK:
                if run.active is None:
                    if run.assumed_passive and outbound:
                        raise Fallback("a flow's first SYN comes after its MPA answer")
                    run.active = outbound
                if not outbound:
                    self._want_listener(key, run)
        payload = seg.payload
        if outbound:
            kind = mpa_kind(payload) if payload else ""
            if run.first_out_seq is None:
                run.first_out_seq = seg.seq
            self.compared_count += 1
            if run.sent:
                self._pair(frame, run.sent.popleft())
            else:
                run.expected.append(frame)
                if len(run.expected) > MAX_UNPAIRED:
                    raise Fallback("recorded frames wait too long for the emulator's")
            if kind == "reply" or kind == "reject":
                if run.active is None:
                    run.assumed_passive = True
                if not run.active and seg.seq not in run.answered:
                    run.answered.add(seg.seq)
                    run.answer_times.append(time_ns)
                    marks |= _ANSWER
            if run.classifier.feed(True, seg, kind) and flags & (FIN | RST) \
                    and not run.nic_closed:
                run.nic_closed = True
                marks |= _CLOSE
        elif payload or flags & SYN:
            # A received frame without payload or SYN leaves the classifier as it is.
            run.classifier.feed(False, seg, mpa_kind(payload) if payload else "")
        self.pending.append((frame, marks, run))

    def _new_flow(self, key: FlowKey) -> StreamFlow:
        ports = _ports(key)
        if hash(ports) in self.evicted:
            raise Fallback("a flow comes back after it was forgotten")
        if ports in self._sports:
            raise Fallback("two flows on the same ports")
        self.flow_counter += 1
        run = self._sflows[key] = StreamFlow(key, [], order=self.flow_counter,
                                             reader=self._need)
        self._sports[ports] = key
        return run

    def _need_start(self, run: StreamFlow) -> None:
        self._read_ahead(lambda: run.next_start < len(run.starts))

    def _neighbour(self, ip: bytes, mac: bytes) -> None:
        self.nb[ip] = mac
        if self.started:
            self.core.set_neighbour(ip, mac)

    def _want_listener(self, key: FlowKey, run: StreamFlow) -> None:
        where = (key[1], key[4])
        order = self.listening.get(where)
        if order is None:
            self.listening[where] = run.order
            if self.started:
                self._listen(*where)
            else:
                self._early_listens.append(where)
        elif run.order < order:
            self.listening[where] = run.order

    def _listen(self, port: int, vlan: int | None) -> None:
        try:
            self.core.create_listen(self.ip, port, backlog=self.opt.backlog,
                                    ipv6=len(self.ip) == 16, vlan=vlan, now_ns=self.now)
        except CmError as exc:
            raise Fallback(f"listen on port {port} refused: {exc}") from None
        self.listens.append(((port, vlan), AppAction(
            0, 0, "listen", (self.ip, port, b"", 0, vlan),
            f"port {port} backlog {self.opt.backlog}")))

    def _read_ahead(self, done: Callable[[], bool]) -> None:
        """Read until ``done()`` or the end of the capture; past the look-ahead limit the
        answer is beyond the streamed pass."""
        while not done() and not self.eof:
            if len(self.pending) > MAX_LOOKAHEAD:
                raise Fallback("a look-ahead beyond the window")
            self._read_one()

    # ---- comparison -----------------------------------------------------------------

    def _pair(self, e: Frame, em: Emitted) -> None:
        self._match(e, em.seg, em.seq_delta, em.time_ns)

    def _match(self, e: Frame, a: Segment, delta: int, time_ns: int) -> None:
        """The recorded frame ``e`` against the emulator's ``a`` (sent at ``time_ns``,
        ``delta`` from its sequence space to the recording's): field by field, no text."""
        r = e.seg
        if (r.flags != a.flags or r.seq != (a.seq + delta) & MASK32 or r.ack != a.ack
                or r.window != a.window or r.payload != a.payload
                or abs(time_ns - e.time_ns) > self.ropt.time_tolerance_ns
                or (r.options != a.options and r.options + b"\x00" * (-len(r.options) % 4)
                    != a.options + b"\x00" * (-len(a.options) % 4))):
            raise Fallback(f"frame {e.number} differs")
        self.matched += 1

    # ---- engine hooks ---------------------------------------------------------------

    def _drain(self) -> None:
        """:meth:`Engine._drain` for the streamed pass (no trace, no kept frames): each
        emitted frame is compared with its recorded counterpart as soon as both exist."""
        core = self.core
        out = core.frames_to_send()
        if out:
            flows = self.flows
            for tx in out:
                if tx.loopback:
                    continue
                seg = tx.segment
                key: FlowKey = (seg.src_ip, seg.sport, seg.dst_ip, seg.dport, seg.vlan)
                run = flows.get(key)
                if not isinstance(run, StreamFlow):
                    raise Fallback("the emulator sends on a flow the capture has not shown")
                conn = tx.conn
                if seg.flags & SYN and (run.delta is None or conn != run.delta_conn):
                    isn = run.next_isn()
                    if isn is not None:
                        run.delta = (isn - seg.seq) & MASK32
                        run.delta_conn = conn
                delta = run.delta
                if delta is None:
                    first = self._first_outbound_seq(key)
                    run.delta = delta = ((first - seg.seq) & MASK32) if first is not None else 0
                    run.delta_conn = conn
                if conn is not None and conn != run.conn:
                    run.conn = conn
                    self._conn_flow[conn] = key
                elif conn is None:
                    conn = run.conn
                self._emitted_count += 1
                if conn is not None:
                    run.conns.add(conn)
                if run.expected:
                    self._match(run.expected.popleft(), seg, delta, self.now)
                else:
                    run.sent.append(Emitted(self._emitted_count, self.now, seg, tx.comment,
                                            conn, key, delta, self.position, ""))
                    if len(run.sent) > MAX_UNPAIRED:
                        raise Fallback("emitted frames wait too long for the recorded ones")
        self._take_upcalls()  # upcall_frames is a log that keeps nothing here

    def _first_outbound_seq(self, key: FlowKey) -> int | None:
        run = self.flows.get(key)
        if not isinstance(run, StreamFlow):
            raise Fallback("the emulator sends on a flow the capture has not shown")
        self._read_ahead(lambda: run.first_out_seq is not None)
        return run.first_out_seq

    def _recorded_request(self, key: FlowKey, number: int) -> Frame | None:
        run = self.flows[key]
        assert isinstance(run, StreamFlow)

        def find() -> Frame | None:
            return next((f for f in run.window if f.outbound and f.number > number
                         and mpa_kind(f.seg.payload) == "request"), None)
        self._read_ahead(lambda: find() is not None)
        return find()

    def _recorded_isn(self, local: bytes, lport: int, remote: bytes, rport: int
                      ) -> int | None:
        key = self._by_ports.get((lport, remote, rport))
        if key is None:
            if not self.eof or hash((lport, remote, rport)) in self.evicted:
                raise Fallback("an ISN asked for a flow the capture has not shown")
            return None
        run = self.flows[key]
        self._read_ahead(lambda: run.peek_isn() is not None)
        return run.peek_isn()

    def _answer_pending(self, key: FlowKey) -> bool:
        run = self.flows[key]
        assert isinstance(run, StreamFlow)
        self._read_ahead(lambda: any(t >= self.now for t in run.answer_times))
        return any(t >= self.now for t in run.answer_times)

    def _frame(self, number: int) -> Frame:
        assert self.frame is not None and self.frame.number == number
        return self.frame

    def _flow_of(self, ev: Upcall) -> FlowKey | None:
        ports = (ev.local_port, ev.remote_ip, ev.remote_port)
        key = self._by_ports.get(ports)
        if key is None and hash(ports) in self.evicted:
            raise Fallback("an upcall for a forgotten flow")
        return key

    def _on_upcall(self, ev: Upcall) -> None:
        # Engine._on_upcall without the injection record (the streamed pass keeps none),
        # plus the connection noted on its flow for forgetting.
        conn = ev.conn
        key = self._conn_flow.get(conn) or self._flow_of(ev)
        if key is None:
            return
        self._conn_flow[conn] = key
        run = self.flows[key]
        run.conn = conn
        if isinstance(run, StreamFlow):
            run.conns.add(conn)
        if ev.event == IwEvent.CONNECT_REQUEST and self.opt.on_request != "auto" \
                and not self._answer_pending(key):
            self._pending.append((self.opt.on_request, key, b""))

    def _connect(self, key: FlowKey, number: int) -> None:
        super()._connect(key, number)
        run = self.flows[key]
        assert isinstance(run, StreamFlow)
        if run.conn is not None:
            run.conns.add(run.conn)

    def _inject(self, frame: Frame) -> Injection | None:
        if frame.nic_dropped:
            return None
        delta = self.flows[frame.flow].delta
        seg = frame.seg
        # A zero delta leaves the acknowledgement as recorded: no copy needed.
        if delta and (seg.flags & ACK or seg.ack):
            seg = with_ack(seg, (seg.ack - delta) & MASK32)
        self.core.receive(seg, self.now)
        return None

    # ---- forgetting ---------------------------------------------------------------

    def _evict(self) -> None:
        """Forget up to :data:`EVICT_EVERY` flows whose frames are all replayed and
        whose nodes the core has freed; the others go to the back of the queue (a pass
        costs the same however many connections linger)."""
        has_node = self.core.has_node
        idle = self.idle
        for _ in range(min(EVICT_EVERY, len(idle))):
            run = idle.popleft()
            if not run.idle:
                run.queued = False
                continue  # replayed again since
            if run.window or run.expected or run.sent \
                    or (run.conn is not None and has_node(run.conn)):
                idle.append(run)
                continue
            for c in run.conns:
                if has_node(c):
                    idle.append(run)
                    break
            else:
                run.idle = run.queued = False
                key = run.key
                del self.flows[key]
                ports = _ports(key)
                del self._by_ports[ports]
                self.evicted.add(hash(ports))
                for c in run.conns:
                    self._conn_flow.pop(c, None)
                    self._states.pop(c, None)

    # ---- run -----------------------------------------------------------------------

    def replay(self) -> ReplayReport:
        """Replay the capture; the report of a clean match, else :class:`Fallback`."""
        try:
            self._stream()
        except Fallback:
            raise
        except Exception as exc:
            raise Fallback(f"{type(exc).__name__}: {exc}") from None
        if self.notes or self.failure:
            raise Fallback("notes")
        for run in self.flows.values():
            assert isinstance(run, StreamFlow)
            if run.expected or run.sent:
                raise Fallback("unpaired frames")
        if self.relevant == 0:
            raise Fallback("no frame of the address")
        if self.progress is not None:
            self.progress(self.relevant, self.relevant)
        assert self.t0 is not None
        end_ns = max(self.last_time, self.last_ns - self.t0)
        rec = Recording(self.label, self.ip, [], {}, self.mac, self.vlan, {}, self.total,
                        self.ignored, end_ns, self.t0, self.damage, self.ropt.checksums,
                        self.artefacts, frame_count=self.relevant)
        actions: Spool[AppAction] = Spool(AppAction)
        # The whole-capture replay makes every listener before the first frame, in the
        # order of the flows' first frames.
        for _where, action in sorted(self.listens, key=lambda it: self.listening[it[0]]):
            actions.append(action)
        for action in self.actions:
            actions.append(action)
        result = RunResult([], [], actions, self.upcalls, {},
                        self.last_number, [], "", 0, [], [], [])
        cmp = Comparison([], [], [], self.compared_count, False, matched_count=self.matched)
        return ReplayReport(rec, result, cmp, self.ropt, None)

    def _stream(self) -> None:
        due: int | None = None
        due_known = False  # the core has not been called since ``due`` was read
        done = 0
        pending = self.pending
        idle = self.idle
        receive = self.core.receive
        catch_up = self._catch_up
        drain = self._drain
        progress = self.progress
        since_evict = 0
        while True:
            if len(pending) < WINDOW and not self.eof:
                read = self._read_one
                while len(pending) < WINDOW and not self.eof:
                    read()
            if not pending:
                break
            frame, marks, run = pending.popleft()
            self.frame = frame
            key = frame.flow
            window = run.window
            window.popleft()
            if not window:
                run.idle = True
                if not run.queued:
                    run.queued = True
                    idle.append(run)
            time_ns, number = frame.time_ns, frame.number
            if marks:
                # The scripted verbs at this frame, in the whole-capture replay's order.
                for what in (_CONNECT, _ANSWER, _CLOSE):
                    if not marks & what:
                        continue
                    due = catch_up(time_ns, due, due_known)
                    if what == _CONNECT:
                        self._connect(key, number)
                    elif what == _ANSWER:
                        self._answer(key, number, frame)
                    else:
                        self._disconnect(key, number)
                    due_known = False
                    drain()
            due = catch_up(time_ns, due, due_known)
            due_known = True
            self.position = number
            done += 1
            if progress is not None and done % 2048 == 0:
                progress(done, self._estimate(done))
            if not frame.outbound:
                if not frame.nic_dropped:
                    seg = frame.seg
                    delta = run.delta
                    # A zero delta leaves the acknowledgement as recorded: no copy needed.
                    if delta and (seg.flags & ACK or seg.ack):
                        seg = with_ack(seg, (seg.ack - delta) & MASK32)
                    receive(seg, self.now)
                due_known = False
                drain()
            since_evict += 1
            if since_evict >= EVICT_EVERY:
                since_evict = 0
                self._evict()
        self.position = self.last_number
        assert self.t0 is not None
        self._advance(max(self.last_time, self.last_ns - self.t0) + self.opt.horizon_ns)

    def _catch_up(self, time_ns: int, due: int | None, due_known: bool) -> int | None:
        """Bring the core's timers and the clock up to ``time_ns``; returns the next
        deadline. ``due`` is the deadline last read when ``due_known`` (the core has not
        run since), so the core is asked only when it may have changed."""
        if not due_known:
            due = self.core.get_timer()
        if due is not None and due <= time_ns:
            due = self._advance(time_ns)
        if self.now < time_ns:
            self.now = time_ns
        return due

    def _estimate(self, done: int) -> int:
        if self.size is None or not self.consumed:
            return done + len(self.pending)
        return max(done + len(self.pending), self.relevant * self.size // self.consumed)


class _Discard:
    """Upcall frame numbers, which only the semantic verdict reads: not kept."""

    def append(self, item: int, /) -> None:
        pass

    def __iter__(self) -> Iterator[int]:
        return iter(())

    def __len__(self) -> int:
        return 0


def stream_replay(source: str | IO[bytes], label: str, options: ReplayOptions,
                  progress: Callable[[int, int], None] | None = None) -> ReplayReport:
    """The report of a clean match of the capture, replayed as a stream; raises
    :class:`Fallback` when the whole-capture replay must tell the outcome."""
    size: int | None = None
    if isinstance(source, str):
        try:
            size = os.path.getsize(source)
        except OSError:
            raise Fallback("unreadable") from None
    with fewer_young_collections():
        return StreamEngine(source, label, options, progress, size).replay()


__all__ = ["Fallback", "Spool", "StreamEngine", "stream_replay"]


