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
from typing import IO, Final, Generic, TypeVar

from mpa_emu.capture.decode import Undecodable, after_refusal
from mpa_emu.capture.pcap import LINKTYPE_ETHERNET, CaptureError, CaptureReader
from mpa_emu.capture.spool import RecordSpool
from mpa_emu.errors import MpaEmuError
from mpa_emu.gc_tuning import streaming
from mpa_emu.replay.compare import Comparison
from mpa_emu.replay.engine import (
    _RESTART_WINDOW,
    AppAction,
    Emitted,
    Engine,
    EngineOptions,
    FlowRun,
    Injection,
    Log,
    RunResult,
    Sink,
)
from mpa_emu.replay.recording import Frame, OffloadClassifier, Recording, nic_verdict
from mpa_emu.replay.report import ReplayOptions, ReplayReport
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.events import Upcall
from mpa_emu.wire.codec import DecodeError, decode
from mpa_emu.wire.flow import NO_VLAN, FlowKey, flow_key, flow_vlan
from mpa_emu.wire.mpa import mpa_kind
from mpa_emu.wire.segment import ACK, FIN, RST, SYN, Segment
from mpa_emu.wire.seq import MASK as MASK32

T = TypeVar("T")

WINDOW: Final = 1024
"""Frames read ahead of the one being replayed."""
MAX_LOOKAHEAD: Final = 1 << 16
"""A look-ahead not answered within this many frames sends the replay the whole-capture
way."""
MAX_UNPAIRED: Final = 4096
"""Emitted (or recorded) frames of one flow waiting for their counterpart."""
EVICT_EVERY: Final = 512
"""Replayed frames between two passes over the flows that may be forgotten."""

_CONNECT: Final = 1
_ANSWER: Final = 2
_CLOSE: Final = 4
# The names the per-frame path reads, as constants of this module (the compiled build
# reads a Final name directly, an imported one from the module's namespace).
_SYN: Final = SYN
_ACK: Final = ACK
_FIN_RST: Final = FIN | RST
_MASK32: Final = MASK32
_RESTART: Final = _RESTART_WINDOW
_ETHERNET: Final = LINKTYPE_ETHERNET
_UNTAGGED: Final = NO_VLAN

class Fallback(MpaEmuError):
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

    def __init__(self, key: FlowKey, starts: list[int], next_start: int = 0,
                 delta: int | None = None, delta_conn: int | None = None,
                 conn: int | None = None, states: list[tuple[int, str]] | None = None,
                 log: list[tuple[bool, Segment]] | None = None, em_nxt: int | None = None,
                 shift: int = 0, order: int = 0, window: deque[Frame] | None = None,
                 active: bool | None = None, assumed_passive: bool = False,
                 last_syn: int | None = None, first_out_seq: int | None = None,
                 expected: deque[Frame] | None = None, sent: deque[Emitted] | None = None,
                 classifier: OffloadClassifier | None = None, nic_closed: bool = False,
                 answered: set[int] | None = None, answer_times: list[int] | None = None,
                 conns: set[int] | None = None, idle: bool = False, queued: bool = False,
                 reader: Callable[[StreamFlow], None] | None = None) -> None:
        # Written out (one is made per flow): the generated one is interpreted code in
        # the compiled build too.
        self.key = key
        self.starts = starts
        self.next_start = next_start
        self.delta = delta
        self.delta_conn = delta_conn
        self.conn = conn
        self.states = [] if states is None else states
        self.log = [] if log is None else log
        self.em_nxt = em_nxt
        self.shift = shift
        self.order = order
        self.window = deque() if window is None else window
        self.active = active
        self.assumed_passive = assumed_passive
        self.last_syn = last_syn
        self.first_out_seq = first_out_seq
        self.expected = deque() if expected is None else expected
        self.sent = deque() if sent is None else sent
        self.classifier = OffloadClassifier() if classifier is None else classifier
        self.nic_closed = nic_closed
        self.answered = set() if answered is None else answered
        self.answer_times = [] if answer_times is None else answer_times
        self.conns = set() if conns is None else conns
        self.idle = idle
        self.queued = queued
        self.reader = reader

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


class StreamSource:
    """The capture read as a stream: a window of frames read ahead of the one being
    replayed, the scripted verbs marked on the frames they belong to, and flows forgotten
    once replayed. Build with a capture source (it reads up to the host's first frame),
    then :meth:`bind` the engine it feeds."""

    vlan: int | None = None
    """The emulated host's VLAN, from its first frame. Not set in ``__init__``: after a
    store of None there, the type checker (and so the compiled build) would take the
    attribute for None until the end of ``__init__``, though reading frames sets it."""

    def __init__(self, source: str | IO[bytes], label: str, options: ReplayOptions,
                 size: int | None = None) -> None:
        self.label = label
        self.ropt = options
        self.size = size
        self.reader = CaptureReader(source)
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
        self.flow_counter = 0
        self.frame: Frame | None = None
        self.flows: dict[FlowKey, FlowRun] = {}
        """The flows read so far (the engine's flows are this very dict)."""
        self.by_ports: dict[tuple[int, bytes, int], FlowKey] = {}
        self._early_listens: list[tuple[int, int | None]] = []
        self._need = self._need_start
        self._engine: Engine | None = None
        self.compare = CompareAndForget(options.time_tolerance_ns)
        # Prime: the core needs the host's MAC, known from its first frame.
        try:
            while not self.mac and not self.eof:
                self._read_one()
            if not self.mac:
                raise Fallback("no frame of the address")
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Close the capture file (the reader's)."""
        self.reader.close()

    def bind(self, engine: Engine) -> None:
        """From now on the frames read feed ``engine``'s core."""
        self._engine = engine

    def setup(self, engine: Engine) -> None:
        """The address, the neighbours and listeners of the frames read so far (later ones
        as they are read)."""
        engine.core.add_address(self.ip, vlan=self.vlan, now_ns=0)
        for ip, mac in self.nb.items():
            engine.core.set_neighbour(ip, mac)
        for port, vlan in self._early_listens:
            self._listen(engine, port, vlan)

    # ---- reading -----------------------------------------------------------------

    def _read_one(self) -> None:
        """Read and classify the capture's next record (the per-frame hot path: one
        decode, one :class:`Frame`, no text)."""
        reader = self.reader
        try:
            data = reader.next_frame()
        except CaptureError as damaged:
            if self.total == 0:
                raise Fallback(str(damaged)) from None
            self.damage = (f"the capture is damaged after frame {self.total} ({damaged}); "
                           "replayed up to it")
            self.eof = True
            return
        if data is None:
            self.eof = True
            return
        self.total = number = self.total + 1
        self.consumed += len(data) + 32
        if reader.linktype != _ETHERNET:
            raise Fallback("not Ethernet")
        stamp = reader.time_ns
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
        vid = _UNTAGGED if seg.vlan is None else seg.vlan  # the FlowKey's VLAN id
        if src == ip:
            outbound = True
            key: FlowKey = (ip, seg.sport, dst, seg.dport, vid)
            nic_dropped = ""
            if not self.mac:
                self.mac, self.vlan = seg.src_mac, seg.vlan
            if dst not in self.nb:
                self._neighbour(dst, seg.dst_mac)
        elif dst == ip:
            outbound = False
            key = (ip, seg.dport, src, seg.sport, vid)
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
        run = self.flows.get(key)
        if run is None:
            run = self._new_flow(key)
        assert isinstance(run, StreamFlow)
        run.idle = False
        run.window.append(frame)
        marks = 0
        flags = seg.flags
        if flags & _SYN:
            if outbound:
                if run.last_syn is None or (seg.seq - run.last_syn) & _MASK32 >= _RESTART:
                    run.starts.append(seg.seq)
                    if not flags & _ACK:
                        marks |= _CONNECT
                run.last_syn = seg.seq
            if not flags & _ACK:
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
            self.compare.recorded(frame, run)
            if kind == "reply" or kind == "reject":
                if run.active is None:
                    run.assumed_passive = True
                if not run.active and seg.seq not in run.answered:
                    run.answered.add(seg.seq)
                    run.answer_times.append(time_ns)
                    marks |= _ANSWER
            if run.classifier.feed(True, seg, kind) and flags & _FIN_RST \
                    and not run.nic_closed:
                run.nic_closed = True
                marks |= _CLOSE
        elif payload or flags & _SYN:
            # A received frame without payload or SYN leaves the classifier as it is.
            run.classifier.feed(False, seg, mpa_kind(payload) if payload else "")
        self.pending.append((frame, marks, run))

    def _new_flow(self, key: FlowKey) -> StreamFlow:
        ports = _ports(key)
        if hash(ports) in self.evicted:
            raise Fallback("a flow comes back after it was forgotten")
        if ports in self.by_ports:
            raise Fallback("two flows on the same ports")
        self.flow_counter += 1
        run = self.flows[key] = StreamFlow(key, [], order=self.flow_counter,
                                             reader=self._need)
        self.by_ports[ports] = key
        return run

    def _need_start(self, run: StreamFlow) -> None:
        self._read_ahead(lambda: run.next_start < len(run.starts))

    def _neighbour(self, ip: bytes, mac: bytes) -> None:
        self.nb[ip] = mac
        if self._engine is not None:
            self._engine.core.set_neighbour(ip, mac)

    def _want_listener(self, key: FlowKey, run: StreamFlow) -> None:
        where = (key[1], flow_vlan(key))
        order = self.listening.get(where)
        if order is None:
            self.listening[where] = run.order
            if self._engine is not None:
                self._listen(self._engine, *where)
            else:
                self._early_listens.append(where)
        elif run.order < order:
            self.listening[where] = run.order

    def _listen(self, engine: Engine, port: int, vlan: int | None) -> None:
        backlog = engine.opt.backlog
        try:
            engine.core.create_listen(self.ip, port, backlog=backlog,
                                      ipv6=len(self.ip) == 16, vlan=vlan, now_ns=engine.now)
        except CmError as exc:
            raise Fallback(f"listen on port {port} refused: {exc}") from None
        self.listens.append(((port, vlan), AppAction(
            0, 0, "listen", flow_key(self.ip, port, b"", 0, vlan),
            f"port {port} backlog {backlog}")))

    def _read_ahead(self, done: Callable[[], bool]) -> None:
        """Read until ``done()`` or the end of the capture; past the look-ahead limit the
        answer is beyond the streamed pass."""
        while not done() and not self.eof:
            if len(self.pending) > MAX_LOOKAHEAD:
                raise Fallback("a look-ahead beyond the window")
            self._read_one()

    # ---- what the engine asks ahead of the frames ------------------------------------

    def recorded_isn(self, lport: int, remote: bytes, rport: int) -> int | None:
        """The ISN of the recorded host's next SYN or SYN-ACK on these ports, read ahead."""
        key = self.by_ports.get((lport, remote, rport))
        if key is None:
            if not self.eof or hash((lport, remote, rport)) in self.evicted:
                raise Fallback("an ISN asked for a flow the capture has not shown")
            return None
        run = self.flows[key]
        self._read_ahead(lambda: run.peek_isn() is not None)
        return run.peek_isn()

    def first_outbound_seq(self, key: FlowKey) -> int | None:
        """The seq of the first frame the recorded host sent in the flow, read ahead."""
        run = self._stream_flow(key)
        self._read_ahead(lambda: run.first_out_seq is not None)
        return run.first_out_seq

    def recorded_request(self, key: FlowKey, number: int) -> Frame | None:
        """The first MPA request the recorded host sent in the flow after ``number``,
        read ahead."""
        run = self._stream_flow(key)

        def find() -> Frame | None:
            return next((f for f in run.window if f.outbound and f.number > number
                         and mpa_kind(f.seg.payload) == "request"), None)
        self._read_ahead(lambda: find() is not None)
        return find()

    def answer_pending(self, key: FlowKey, now: int) -> bool:
        """True when the recording holds an answer of this flow's host at ``now`` or
        later, read ahead."""
        run = self._stream_flow(key)
        self._read_ahead(lambda: any(t >= now for t in run.answer_times))
        return any(t >= now for t in run.answer_times)

    def flow_of(self, ports: tuple[int, bytes, int]) -> FlowKey | None:
        """The flow of an upcall's ports; a forgotten one sends the replay the
        whole-capture way."""
        key = self.by_ports.get(ports)
        if key is None and hash(ports) in self.evicted:
            raise Fallback("an upcall for a forgotten flow")
        return key

    def sending_flow(self, key: FlowKey) -> FlowRun:
        """The flow of a frame the emulator sends: one the capture has shown."""
        return self._stream_flow(key)

    def _stream_flow(self, key: FlowKey) -> StreamFlow:
        run = self.flows.get(key)
        if not isinstance(run, StreamFlow):
            raise Fallback("the emulator sends on a flow the capture has not shown")
        return run

    # ---- forgetting ---------------------------------------------------------------

    def _evict(self, engine: Engine) -> None:
        """Forget up to :data:`EVICT_EVERY` flows whose frames are all replayed and
        whose nodes the core has freed; the others go to the back of the queue (a pass
        costs the same however many connections linger)."""
        core = engine.core
        # A core whose node table answers directly (irdma's has_node: iwqp->cm_node);
        # another stack's core by its node view.
        direct: Callable[[int], bool] | None = getattr(core, "has_node", None)
        has_node = direct if direct is not None else (
            lambda conn: core.node(conn) is not None)
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
                engine.forget(run, run.conns)
                self.evicted.add(hash(_ports(run.key)))

    # ---- run -----------------------------------------------------------------------

    def report(self, engine: Engine) -> ReplayReport:
        """The report of the clean match the streamed pass found (Fallback otherwise)."""
        if engine.notes or engine.failure:
            raise Fallback("notes")
        for run in self.flows.values():
            assert isinstance(run, StreamFlow)
            if run.expected or run.sent:
                raise Fallback("unpaired frames")
        if self.relevant == 0:
            raise Fallback("no frame of the address")
        if engine.progress is not None:
            engine.progress(self.relevant, self.relevant)
        assert self.t0 is not None
        end_ns = max(self.last_time, self.last_ns - self.t0)
        rec = Recording(self.label, self.ip, [], {}, self.mac, self.vlan, {}, self.total,
                        self.ignored, end_ns, self.t0, self.damage, self.ropt.checksums,
                        self.artefacts, frame_count=self.relevant)
        # The whole-capture replay makes every listener before the first frame, in the
        # order of the flows' first frames.
        listens = [action for _where, action in sorted(
            self.listens, key=lambda it: self.listening[it[0]])]
        result = RunResult([], [], _Actions(listens, engine.actions), engine.upcalls, {},
                           self.last_number, [], "", 0, [], [], [])
        compare = self.compare
        cmp = Comparison([], [], [], compare.compared_count, False,
                         matched_count=compare.matched)
        return ReplayReport(rec, result, cmp, self.ropt, None)

    def play(self, engine: Engine) -> None:
        """Read and replay the capture frame by frame, the scripted verbs at the frames
        they belong to, then run the timers up to the horizon."""
        due: int | None = None
        due_known = False  # the core has not been called since ``due`` was read
        done = 0
        pending = self.pending
        idle = self.idle
        progress = engine.progress
        since_evict = 0
        while True:
            if len(pending) < WINDOW and not self.eof:
                while len(pending) < WINDOW and not self.eof:
                    self._read_one()
            if not pending:
                break
            frame, marks, run = pending.popleft()
            self.frame = frame
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
                for what, name in ((_CONNECT, "connect"), (_ANSWER, "answer"),
                                   (_CLOSE, "disconnect")):
                    if marks & what:
                        due = engine.catch_up(time_ns, due, due_known)
                        engine.run_verb(name, frame.flow, frame)
                        due_known = False
            due = engine.catch_up(time_ns, due, due_known, inbound=not frame.outbound)
            due_known = True
            engine.position = number
            done += 1
            if progress is not None and done % 2048 == 0:
                progress(done, self._estimate(done))
            if not frame.outbound:
                engine.inject(frame, run)
                due_known = False
            since_evict += 1
            if since_evict >= EVICT_EVERY:
                since_evict = 0
                self._evict(engine)
        engine.position = self.last_number
        assert self.t0 is not None
        engine.advance(max(self.last_time, self.last_ns - self.t0) + engine.opt.horizon_ns)

    def _estimate(self, done: int) -> int:
        if self.size is None or not self.consumed:
            return done + len(self.pending)
        return max(done + len(self.pending), self.relevant * self.size // self.consumed)


class CompareAndForget:
    """The streamed pass's sink: each emitted frame is compared field by field with its
    recorded counterpart as soon as both exist, and both are forgotten; any difference
    sends the replay the whole-capture way (:class:`Fallback`)."""

    traced = False

    def __init__(self, tolerance_ns: int) -> None:
        self.tolerance_ns = tolerance_ns
        self.compared_count = 0
        self.matched = 0

    def recorded(self, frame: Frame, run: StreamFlow) -> None:
        """The recorded host sent ``frame``: pair it with the emulator's or keep it."""
        self.compared_count += 1
        if run.sent:
            em = run.sent.popleft()
            self._match(frame, em.seg, em.seq_delta, em.time_ns)
        else:
            run.expected.append(frame)
            if len(run.expected) > MAX_UNPAIRED:
                raise Fallback("recorded frames wait too long for the emulator's")

    def emitted(self, engine: Engine, run: FlowRun, seg: Segment, comment: str,
                conn: int | None, delta: int) -> None:
        """Pair the emulator's frame with the recorded one, or keep it until it comes."""
        assert isinstance(run, StreamFlow)
        if conn is not None:
            run.conns.add(conn)
        if run.expected:
            self._match(run.expected.popleft(), seg, delta, engine.now)
        else:
            run.sent.append(Emitted(engine.emitted_count, engine.now, seg, comment, conn,
                                    run.key, delta, engine.position, ""))
            if len(run.sent) > MAX_UNPAIRED:
                raise Fallback("emitted frames wait too long for the recorded ones")

    def _match(self, e: Frame, a: Segment, delta: int, time_ns: int) -> None:
        """The recorded frame ``e`` against the emulator's ``a`` (sent at ``time_ns``,
        ``delta`` from its sequence space to the recording's): field by field, no text."""
        r = e.seg
        if (r.flags != a.flags or r.seq != (a.seq + delta) & _MASK32 or r.ack != a.ack
                or r.window != a.window or r.payload != a.payload
                or abs(time_ns - e.time_ns) > self.tolerance_ns
                or (r.options != a.options and r.options + b"\x00" * (-len(r.options) % 4)
                    != a.options + b"\x00" * (-len(a.options) % 4))):
            raise Fallback(f"frame {e.number} differs")
        self.matched += 1

    def received(self, run: FlowRun, seg: Segment) -> None:
        """Nothing kept of an injected frame."""

    def skipped(self, engine: Engine, frame: Frame, run: FlowRun) -> Injection | None:
        """A frame the NIC drops is not injected, and nothing is kept of it."""
        return None

    def upcall(self, ev: Upcall, run: FlowRun, current: Injection | None) -> None:
        """Note the connection on its flow (a flow is forgotten once its nodes are)."""
        if isinstance(run, StreamFlow):
            run.conns.add(ev.conn)

    def connected(self, run: FlowRun) -> None:
        """Note the connection on its flow."""
        if run.conn is not None and isinstance(run, StreamFlow):
            run.conns.add(run.conn)


class _Discard(Generic[T]):
    """What no output of the run reads: not kept (upcall frame numbers, which only the
    semantic verdict reads; the upcalls when no JSON report lists them)."""

    def append(self, item: T, /) -> None:
        pass

    def __iter__(self) -> Iterator[T]:
        return iter(())

    def __len__(self) -> int:
        return 0


class _Refused:
    """The scripted verbs when no JSON report lists them all: only the refused ones,
    which the text report notes (on disk past a few hundred). A verb is logged once its
    outcome is known."""

    def __init__(self) -> None:
        self.kept: RecordSpool[AppAction] = RecordSpool(AppAction)

    def append(self, item: AppAction, /) -> None:
        if item.error:
            self.kept.append(item)

    def __iter__(self) -> Iterator[AppAction]:
        return iter(self.kept)

    def __len__(self) -> int:
        return len(self.kept)


class _Actions:
    """A streamed run's verbs as the report lists them: the listeners first (the
    whole-capture replay makes them before the first frame), then the engine's log."""

    def __init__(self, listens: list[AppAction], log: Log[AppAction]) -> None:
        self.listens = listens
        self.log = log

    def append(self, item: AppAction, /) -> None:
        self.log.append(item)

    def __iter__(self) -> Iterator[AppAction]:
        yield from self.listens
        yield from self.log

    def __len__(self) -> int:
        return len(self.listens) + len(self.log)


def stream_engine(source: str | IO[bytes], label: str, options: ReplayOptions,
                  progress: Callable[[int, int], None] | None = None, *,
                  size: int | None = None, sink: Sink | None = None, journal: bool = True
                  ) -> tuple[StreamSource, Engine]:
    """A streamed source of ``source`` and the engine it feeds, set up and ready to
    :meth:`StreamSource.play`. The sink compares and forgets (``sink`` None) or is the
    one given (a :class:`~mpa_emu.replay.engine.KeepAll` keeps every emitted frame).
    ``journal``: keep every scripted verb and upcall (the JSON report lists them); else
    only the refused verbs, which the text report notes."""
    frames = StreamSource(source, label, options, size)
    skeleton = Recording(label, frames.ip, [], {}, frames.mac, frames.vlan, {}, 0, {}, 0, 0)
    engine = Engine(skeleton, EngineOptions(
        on_request=options.on_request, backlog=options.backlog,
        horizon_ns=options.horizon_ns, seed=options.seed, config=options.config,
        stack=options.stack, rebase=False, trace=False), progress, source=frames,
        sink=frames.compare if sink is None else sink)
    # Sequences, not lists: only the JSON report reads them all again.
    if journal:
        engine.actions = RecordSpool(AppAction)
        engine.upcalls = RecordSpool(Upcall)
    else:
        engine.actions = _Refused()
        engine.upcalls = _Discard()
    engine.upcall_frames = _Discard()
    frames.bind(engine)
    frames.setup(engine)
    return frames, engine


def stream_replay(source: str | IO[bytes], label: str, options: ReplayOptions,
                  progress: Callable[[int, int], None] | None = None, *,
                  journal: bool = True) -> ReplayReport:
    """The report of a clean match of the capture, replayed as a stream; raises
    :class:`Fallback` when the whole-capture replay must tell the outcome. ``journal``:
    see :func:`stream_engine` (without it, the report is for the text only)."""
    size: int | None = None
    if isinstance(source, str):
        try:
            size = os.path.getsize(source)
        except OSError:
            raise Fallback("unreadable") from None
    with streaming():
        frames, engine = stream_engine(source, label, options, progress, size=size,
                                       journal=journal)
        try:
            frames.play(engine)
        except Fallback:
            raise
        except Exception as exc:
            raise Fallback(f"{type(exc).__name__}: {exc}") from None
        finally:
            frames.close()
        return frames.report(engine)


__all__ = ["CompareAndForget", "Fallback", "StreamSource", "stream_engine", "stream_replay"]
