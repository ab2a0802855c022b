"""Drive one stack's core (irdma's ``CmCore``, or siw's or cxgb4's
through :mod:`mpa_emu.replay.stacks`) with the frames of a recording.

The emulated host is that stack's node (``--profile``). Frames it did not send are
injected at their recorded times on the virtual clock; the application around it is
scripted from the recording itself:

* passive flows: a listener on every port that receives a SYN; each MPA request is
  accepted or rejected at the time the recorded host answered it, with the recorded
  private data (``on_request="auto"``), or always accepted / rejected;
* active flows: ``connect`` at the recorded first SYN, to the recorded peer, from the
  recorded port, with the private data and IRD/ORD of the recorded MPA request;
* after offload: a disconnect (graceful for a FIN, abortive for a RST) when the recorded
  host's NIC sent its first FIN or RST.

Sequence numbers: each connection's ISN is the one of the recorded host's SYN or SYN-ACK
of that connection (the core's ISN chooser), so the emulator's frames line up seq for seq
with the recording. Where the core picks its own ISN (a connection the recorded host never
opened), the connection gets an offset from the emulator's sequence space to the
recording's, fixed by the first SYN or SYN-ACK the emulator sends and the recorded one
(or by the first frames when the recorded host sent no SYN). Emitted ``seq`` values are
compared through it and injected ``ack`` values are translated back through it, so the
peer's frames acknowledge what the emulator sent.

Re-basing (``rebase``, semantic mode): when the emulator's byte stream differs in length
from the recorded host's (a rev 2 request of 24 bytes where the recording has 20), the
peer's acknowledgement numbers are moved by the difference, so they acknowledge what the
emulator sent and the conversation continues past it (otherwise irdma_check_seq would
drop every later segment of the peer).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Final, Literal, Protocol, TypeVar

from mpa_emu.gc_tuning import streaming
from mpa_emu.replay import application, stacks
from mpa_emu.replay.recording import Frame, Recording, seq_len, stream_ends
from mpa_emu.stacks import STACKS
from mpa_emu.stacks.base import HostConfig
from mpa_emu.stacks.contract.api import CoreApi
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.events import IwEvent, Upcall
from mpa_emu.stacks.contract.trace import Trace, TraceRecord
from mpa_emu.wire import erdma_mpa
from mpa_emu.wire.flow import FlowKey, flow_key
from mpa_emu.wire.mpa import MpaFormatError, mpa_kind
from mpa_emu.wire.segment import ACK, RST, SYN, Segment
from mpa_emu.wire.seq import MASK as MASK32
from mpa_emu.wire.seq import after
from mpa_emu.wire.seq import diff as seq_diff

_RESTART_WINDOW = 1 << 16
"""A recorded SYN whose seq is within this distance after the previous one continues the
same connection (a v2 to v1 retry SYN carries ISN+1+L); further away it starts a new one."""
_TIMER_LOOP_GUARD = 1_000_000
# Per-frame names as Final constants: the compiled build reads them directly.
_SYN: Final = SYN
_ACK: Final = ACK
_MASK32: Final = MASK32

OnRequest = Literal["auto", "accept", "reject"]
"""The scripted application's answer to an MPA request: as recorded, or always the one
verb (``--on-request``)."""


@dataclass(frozen=True, slots=True)
class EngineOptions:
    """How the scripted application behaves and how long to run."""

    on_request: OnRequest = "auto"
    backlog: int = 4096
    horizon_ns: int = 400_000_000_000
    """How long past the capture's last frame timers keep running (extra frames)."""
    seed: int = 0
    config: HostConfig | None = field(default_factory=stacks.default_config)
    """The default stack's configuration record, when :attr:`stack` is None."""
    stack: stacks.StackChoice | None = None
    """The emulated side's stack (None: the default stack with :attr:`config`)."""
    rebase: bool = False
    """Move the peer's acknowledgements onto the emulator's stream where its length
    differs from the recording (semantic mode)."""
    trace: bool = True
    """Give the core a trace: node states for the report and the reason behind every
    dropped frame. Without it the core runs about a third faster and the report can
    only say whether frames matched."""


@dataclass(slots=True)
class Emitted:
    """A frame the emulator sent."""

    index: int
    time_ns: int
    seg: Segment
    comment: str
    conn: int | None
    flow: FlowKey
    seq_delta: int
    after_frame: int
    """Capture frame number processed last before this frame was emitted (0: none)."""
    state: str

    @property
    def mapped_seq(self) -> int:
        """``seq`` in the recording's sequence space."""
        return (self.seg.seq + self.seq_delta) & MASK32


@dataclass(slots=True)
class Injection:
    """What happened to one injected frame."""

    frame: Frame
    seg: Segment
    """The segment as injected (ack translated to the emulator's sequence space)."""
    state_before: str
    state_after: str
    records: list[TraceRecord]
    upcalls: list[Upcall]
    skipped: str = ""


@dataclass(slots=True)
class AppAction:
    """A verb the scripted application called."""

    time_ns: int
    frame: int
    verb: str
    flow: FlowKey
    detail: str
    error: str = ""


@dataclass(slots=True)
class FlowRun:
    """Per-flow bookkeeping during a run."""

    key: FlowKey
    starts: list[int]
    next_start: int = 0
    delta: int | None = None
    delta_conn: int | None = None
    conn: int | None = None
    states: list[tuple[int, str]] = field(default_factory=list)
    log: list[tuple[bool, Segment]] = field(default_factory=list)
    """Frames of the flow in the order the emulator saw them: (sent by emulator, seg)."""
    em_nxt: int | None = None
    """End of the emulator's byte stream so far, in the recording's sequence space."""
    shift: int = 0
    """Bytes the peer's acknowledgements were last moved by (re-basing)."""

    def next_isn(self) -> int | None:
        if self.next_start < len(self.starts):
            isn = self.starts[self.next_start]
            self.next_start += 1
            return isn
        return None

    def peek_isn(self) -> int | None:
        """The recorded ISN of the next connection of the flow, without taking it."""
        return self.starts[self.next_start] if self.next_start < len(self.starts) else None


@dataclass(frozen=True, slots=True)
class NicEvent:
    """An asynchronous event the emulated NIC raised (``irdma_process_aeq``)."""

    time_ns: int
    after_frame: int
    """Capture frame processed last when it was raised."""
    conn: int
    flow: FlowKey | None
    ae: str
    """The kernel's IRDMA_AE_* name."""


@dataclass(frozen=True, slots=True)
class Rebase:
    """The peer's acknowledgements moved onto the emulator's stream from a frame on."""

    frame: int
    flow: FlowKey
    shift: int
    """Bytes added to the recorded ack (negative: the emulator's stream is shorter)."""


T = TypeVar("T")


class Log(Protocol[T]):
    """What a run keeps its verbs, upcalls and upcall frames in: a list, or in the
    streamed pass a spool on disk or a log that keeps nothing."""

    def append(self, item: T, /) -> None: ...

    def __iter__(self) -> Iterator[T]: ...

    def __len__(self) -> int: ...


@dataclass(slots=True)
class RunResult:
    """Everything the comparison and the report need."""

    emitted: list[Emitted]
    injections: list[Injection]
    actions: Log[AppAction]
    upcalls: Log[Upcall]
    flows: dict[FlowKey, FlowRun]
    last_frame: int
    notes: list[str]
    failure: str = ""
    """An exception that escaped the core (an emulator bug), or empty."""
    failure_frame: int = 0
    """Capture frame processed last before the failure."""
    nic_events: list[NicEvent] = field(default_factory=list)
    upcall_frames: Log[int] = field(default_factory=list)
    """For each upcall, the capture frame processed last when it was delivered."""
    rebases: list[Rebase] = field(default_factory=list)
    assumptions: list[tuple[FlowKey, str]] = field(default_factory=list)
    """What the scripted application assumed of the recorded one, per flow
    (:mod:`mpa_emu.replay.application`)."""

    @property
    def failed_during_capture(self) -> bool:
        """True when the core failed before the capture's last frame was replayed."""
        return bool(self.failure) and self.failure_frame < self.last_frame


def with_ack(s: Segment, ack: int) -> Segment:
    """``s`` with another acknowledgement number (one constructor call: several times
    faster than ``dataclasses.replace``; a test checks it copies every other field)."""
    return Segment(s.src_mac, s.dst_mac, s.src_ip, s.dst_ip, s.sport, s.dport, s.seq, ack,
                   s.flags, s.window, s.options, s.payload, s.vlan, s.pcp, s.ttl, s.tos,
                   s.ip_id, s.df, s.urg_ptr, s.flow_label)


def connection_starts(frames: list[Frame]) -> list[Frame]:
    """The SYN or SYN-ACK frames of the emulated host that open a new connection in a
    flow: the first one, and any later one whose seq is not a resend or a v2 to v1 retry
    of the previous (port reuse)."""
    starts: list[Frame] = []
    last: int | None = None
    for f in frames:
        if f.outbound and f.seg.flags & SYN:
            if last is None or (f.seg.seq - last) & MASK32 >= _RESTART_WINDOW:
                starts.append(f)
            last = f.seg.seq
    return starts


class FrameSource(Protocol):
    """Where a run's frames come from, and what the recording says ahead of them: the whole
    recording (:class:`RecordingSource`) or a window read ahead of a streamed capture
    (:class:`mpa_emu.replay.stream.StreamSource`)."""

    flows: dict[FlowKey, FlowRun]
    """The recorded flows (the streamed source adds them as it reads)."""
    by_ports: dict[tuple[int, bytes, int], FlowKey]
    """Flow keys by (local port, remote address, remote port)."""

    def setup(self, engine: Engine) -> None:
        """Give the core its address, its neighbours and the listeners the capture needs."""

    def play(self, engine: Engine) -> None:
        """Feed the engine every frame and scripted verb in capture order (through
        :meth:`Engine.catch_up`, :meth:`Engine.inject`, :meth:`Engine.run_verb` and
        :meth:`Engine.drain`), then run its timers up to the horizon."""

    def recorded_isn(self, lport: int, remote: bytes, rport: int) -> int | None:
        """The ISN of the recorded host's next SYN or SYN-ACK on these ports."""

    def first_outbound_seq(self, key: FlowKey) -> int | None:
        """The seq of the first frame the recorded host sent in the flow, if any."""

    def recorded_request(self, key: FlowKey, number: int) -> Frame | None:
        """The first MPA request the recorded host sent in the flow after ``number``."""

    def answer_pending(self, key: FlowKey, now: int) -> bool:
        """True when the recording holds an answer of this flow's host at ``now`` or later."""

    def flow_of(self, ports: tuple[int, bytes, int]) -> FlowKey | None:
        """The flow of an upcall's ports (None: the capture has none)."""

    def sending_flow(self, key: FlowKey) -> FlowRun:
        """The flow of a frame the emulator sends."""


class Sink(Protocol):
    """What a run does with what the emulator does: keep everything for the full report
    (:class:`KeepAll`) or compare each frame with the recorded one and forget it
    (:class:`mpa_emu.replay.stream.CompareAndForget`)."""

    traced: bool
    """Each injected frame is recorded with the core's trace records and node states."""

    def emitted(self, engine: Engine, run: FlowRun, seg: Segment, comment: str,
                conn: int | None, delta: int) -> None:
        """The emulator sent ``seg`` on ``run`` (``delta`` maps its seq to the recording's);
        it is frame :attr:`Engine.emitted_count`."""

    def received(self, run: FlowRun, seg: Segment) -> None:
        """``seg`` (its ack mapped to the emulator's space) went into the core."""

    def skipped(self, engine: Engine, frame: Frame, run: FlowRun) -> Injection | None:
        """The emulated NIC drops ``frame`` (a bad checksum): what becomes of it."""

    def upcall(self, ev: Upcall, run: FlowRun, current: Injection | None) -> None:
        """An upcall of ``run``'s connection, delivered while ``current`` was injected."""

    def connected(self, run: FlowRun) -> None:
        """The scripted application called connect on ``run`` (``run.conn`` when it
        succeeded)."""


def to_core_ack(seg: Segment, delta: int | None, shift: int = 0) -> Segment:
    """A recorded segment of the peer with its acknowledgement moved into the emulator's
    sequence space: less ``delta`` (the emulator's ISN offset), plus ``shift`` (re-basing).
    A segment with neither an ACK flag nor an ack number, or nothing to move, is as
    recorded."""
    if (delta or shift) and (seg.flags & _ACK or seg.ack):
        return with_ack(seg, (seg.ack - (delta or 0) + shift) & _MASK32)
    return seg


class Engine:
    """The one replay driver: drives the emulated stack's core with the frames of
    a :class:`FrameSource` and hands what it does to a :class:`Sink`. The clock and timer
    catch-up, the ISN and ack mapping, the scripted application's verbs and the routing
    of upcalls live here once. Built with a recording alone, it replays the whole
    recording and keeps everything (``source=RecordingSource(rec)``): call :meth:`run`."""

    def __init__(self, rec: Recording, options: EngineOptions,
                 progress: Callable[[int, int], None] | None = None, *,
                 source: FrameSource, sink: Sink | None = None) -> None:
        self.rec = rec
        self.opt = options
        self.progress = progress
        self.source: FrameSource = source
        self.sink: Sink = KeepAll(options.trace) if sink is None else sink
        self.trace = Trace(keep=True)
        self.stack = options.stack or stacks.StackChoice(config=options.config)
        self.core: CoreApi
        self.core, notes = stacks.make_core(
            self.stack, rec.mac or b"\x02\x00\x00\x00\x00\x01", seed=options.seed,
            trace=self.trace if options.trace else None, isn=self._recorded_isn,
            watch=NodeStates(self) if options.trace else None)
        self.node_conns: bool = STACKS[self.stack.stack].replay.conn_is_node
        self.frames_first: bool = STACKS[self.stack.stack].replay.frames_before_due_work
        """``Transmit.conn`` names the core's node (irdma), else the socket, and a
        connection is found by its flow's ports (:attr:`ReplayFacts.conn_is_node
        <mpa_emu.stacks.base.ReplayFacts.conn_is_node>`)."""
        self.now = 0
        self.position = 0
        self.emitted: list[Emitted] = []
        self.emitted_count = 0
        self.injections: list[Injection] = []
        self.actions: Log[AppAction] = []
        self.upcalls: Log[Upcall] = []
        self.notes: list[str] = notes
        self.assumptions: list[tuple[FlowKey, str]] = []
        self._plans: dict[FlowKey, application.Plan] = {}
        self.failure = ""
        self.failure_frame = 0
        self.flows = self.source.flows
        self.by_ports = self.source.by_ports
        self.conn_flow: dict[int, FlowKey] = {}
        """The flow of each connection the core made."""
        self.states: dict[int, str] = {}
        """Each connection's CM state by name, as the core told :class:`NodeStates`."""
        self._current: Injection | None = None
        """The injection whose consequences are being drained (upcalls attach to it)."""
        self._pending: list[tuple[str, FlowKey, bytes]] = []
        self.nic_events: list[NicEvent] = []
        self.upcall_frames: Log[int] = []
        self.rebases: list[Rebase] = []
        self._rec_nxt: dict[FlowKey, list[tuple[int, int]]] = (
            {k: stream_ends(flow.frames) for k, flow in rec.flows.items()}
            if options.rebase else {})

    def _recorded_isn(self, local: bytes, lport: int, remote: bytes, rport: int
                      ) -> int | None:
        return self.source.recorded_isn(lport, remote, rport)

    # ---- run -------------------------------------------------------------------------

    def run(self) -> RunResult:
        """Replay the whole recording, then run timers up to the horizon.

        An exception escaping the core is an emulator bug (design: assertions); it ends
        the run and is reported as a note, so the user still gets a verdict.
        """
        try:
            # The recording's frames and segments never become garbage during the run:
            # kept out of every collection it triggers (about a third of a
            # 100,000-frame replay when they were walked).
            with streaming() as collector:
                collector.keep(collect=False)
                self.source.setup(self)
                self.source.play(self)
        except CmError as exc:
            self.notes.append(f"a verb was refused unexpectedly: {exc}")
        except Exception as failure:
            self.notes.append(f"emulator failure after frame {self.position}: "
                              f"{type(failure).__name__}: {failure}")
        if self.progress is not None:
            self.progress(len(self.rec.frames), len(self.rec.frames))
        last = max((f.number for f in self.rec.frames), default=0)
        return RunResult(self.emitted, self.injections, self.actions, self.upcalls,
                         self.flows, last, self.notes, self.failure, self.failure_frame,
                         self.nic_events, self.upcall_frames, self.rebases,
                         self.assumptions)

    def catch_up(self, time_ns: int, due: int | None, due_known: bool, *,
                 inbound: bool = False) -> int | None:
        """Bring the core's timers and the clock up to ``time_ns``; returns the next
        deadline. ``due`` is the deadline last read when ``due_known`` (the core has not
        run since), so the core is asked only when it may have changed.

        For a stack whose :attr:`~mpa_emu.stacks.base.ReplayFacts.frames_before_due_work`
        holds, before an ``inbound`` frame only the timers due strictly before it fire: a
        segment that arrives at the instant a deferred work falls due is taken first, as
        the softirq that receives it runs before the work queue's thread (and as the
        emulated network orders a delivery before a deadline at the same time):
        erdma_cm_llp_data_ready queues READ_MPAHDR for a reject, and the FIN that came
        with it is in the socket when erdma_cm_work_handler runs."""
        if not due_known:
            due = self.core.get_timer()
        inbound = inbound and self.frames_first
        if due is not None and (due < time_ns or (due == time_ns and not inbound)):
            due = self.advance(time_ns - 1 if inbound else time_ns)
        if self.now < time_ns:
            self.now = time_ns
        return due

    def advance(self, until_ns: int) -> int | None:
        """Fire every timer due at or before ``until_ns``; returns the next deadline."""
        guard = 0
        while True:
            due = self.core.get_timer()
            if due is None or due > until_ns:
                return due
            self.now = max(self.now, due)
            self.core.handle_timer(self.now)
            self.drain()
            guard += 1
            if guard > _TIMER_LOOP_GUARD:
                self.notes.append(f"timer loop stopped at {self.now} ns: the core kept a "
                                  "deadline in the past")
                return None

    def run_verb(self, what: str, key: FlowKey, frame: Frame) -> None:
        """The scripted application's verb at recorded frame ``frame`` (its connect, its
        answer to an MPA request, its disconnect after the NIC's FIN or RST), and what
        the core did about it."""
        if what == "connect":
            self._connect(key, frame.number)
        elif what == "answer":
            self._answer(key, frame.number, frame)
        elif what == "read":
            self._read(key, frame)
        else:
            self._disconnect(key, frame)
        self.drain()

    def plan_of(self, key: FlowKey) -> application.Plan:
        """The recorded application's data phase on ``key`` (read once per flow)."""
        made = self._plans.get(key)
        if made is None:
            flow = self.rec.flows.get(key)
            made = self._plans[key] = application.plan(flow.frames if flow else [])
        return made

    def issues_reads(self) -> bool:
        """The emulated stack's application can post RDMA Reads (siw: siw_post_send)."""
        return isinstance(self.core, stacks.IssuesReads)

    def state(self, conn: int | None) -> str:
        """The CM state of ``conn`` as the trace told it ("" unknown, "freed")."""
        return "" if conn is None else self.states.get(conn, "")

    def forget(self, run: FlowRun, conns: set[int]) -> None:
        """Forget a flow whose frames are replayed and whose nodes are freed."""
        key = run.key
        del self.flows[key]
        del self.by_ports[(key[1], key[2], key[3])]
        for c in conns:
            self.conn_flow.pop(c, None)
            self.states.pop(c, None)

    def _trim_trace(self) -> None:
        """Let the core's trace go once long (the injections keep their own records)."""
        records = self.trace.records
        if len(records) > 4096:
            records.clear()

    # ---- what the emulator sends -----------------------------------------------------

    def drain(self) -> None:
        """Take the core's frames (each mapped onto the recording's sequence space, then
        to the sink) and its upcalls."""
        if self.opt.trace:
            self._trim_trace()
        out = self.core.frames_to_send()
        if out:
            source, sink = self.source, self.sink
            for tx in out:
                if tx.loopback:
                    continue
                seg = tx.segment
                key = flow_key(seg.src_ip, seg.sport, seg.dst_ip, seg.dport, seg.vlan)
                run = source.sending_flow(key)
                conn = tx.conn if self.node_conns else run.conn
                if seg.flags & _SYN and (run.delta is None or conn != run.delta_conn):
                    isn = run.next_isn()
                    if isn is not None:
                        run.delta = (isn - seg.seq) & _MASK32
                        run.delta_conn = conn
                delta = run.delta
                if delta is None:
                    first = source.first_outbound_seq(key)
                    run.delta = delta = ((first - seg.seq) & _MASK32) if first is not None else 0
                    run.delta_conn = conn
                if conn is not None and conn != run.conn:
                    run.conn = conn
                    self.conn_flow[conn] = key
                elif conn is None:
                    conn = run.conn
                self.emitted_count += 1
                sink.emitted(self, run, seg, tx.comment, conn, delta)
        self._take_upcalls()

    def _take_upcalls(self) -> None:
        """The core's upcalls, to the scripted application; then the answers it was forced
        to give, and what they sent, at this same instant."""
        core = self.core
        while (ev := core.next_event()) is not None:
            self.upcalls.append(ev)
            self.upcall_frames.append(self.position)
            self._on_upcall(ev)
        if self._pending:
            while self._pending:
                verb, key, pdata = self._pending.pop(0)
                self._decide(key, verb, pdata, number=self.position)
            self.drain()

    def _on_upcall(self, ev: Upcall) -> None:
        conn = ev.conn
        key = self.conn_flow.get(conn) or self.source.flow_of(
            (ev.local_port, ev.remote_ip, ev.remote_port))
        if key is None:
            return
        self.conn_flow[conn] = key
        run = self.flows[key]
        run.conn = conn
        self.sink.upcall(ev, run, self._current)
        if self.opt.on_request != "auto" and ev.event == IwEvent.CONNECT_REQUEST \
                and not self.source.answer_pending(key, self.now):
            self._pending.append((self.opt.on_request, key, b""))

    # ---- what the peer sends ---------------------------------------------------------

    def inject(self, frame: Frame, run: FlowRun | None = None) -> None:
        """A recorded frame of the peer into the core at its time, its ack mapped onto
        the emulator's stream; then what the core did about it. ``run``: the frame's
        flow, when the caller has it at hand."""
        if run is None:
            run = self.flows[frame.flow]
        sink = self.sink
        if frame.nic_dropped:
            self._current = sink.skipped(self, frame, run)
        elif not sink.traced:
            seg = to_core_ack(frame.seg, run.delta)
            self.core.receive(seg, self.now)
            sink.received(run, seg)
        else:
            self._current = self._inject_traced(frame, run)
        self.drain()
        self._current = None

    def _inject_traced(self, frame: Frame, run: FlowRun) -> Injection:
        before = self.state(run.conn)
        seg = to_core_ack(frame.seg, run.delta, self._shift(frame, run))
        self._trim_trace()
        mark = len(self.trace.records)
        self.core.receive(seg, self.now)
        self.sink.received(run, seg)
        records = self.trace.records[mark:]
        self._trim_trace()
        after = self.state(run.conn)
        if after:
            run.states.append((self.now, after))
        injection = Injection(frame, seg, before, after, records, [])
        self.injections.append(injection)
        return injection

    def _shift(self, frame: Frame, run: FlowRun) -> int:
        """Bytes to add to the peer's ack so it lands on the emulator's stream: the
        difference between the emulator's stream end and the recorded host's stream end
        before this frame (re-basing, semantic mode only)."""
        if not self.opt.rebase or run.em_nxt is None or not frame.seg.flags & ACK:
            return 0
        rec_nxt = None
        for number, end in self._rec_nxt.get(frame.flow, ()):
            if number > frame.number:
                break
            rec_nxt = end
        if rec_nxt is None:
            return 0
        shift = seq_diff(run.em_nxt, rec_nxt)
        if shift != run.shift:
            run.shift = shift
            self.rebases.append(Rebase(frame.number, frame.flow, shift))
        return shift

    # ---- scripted application --------------------------------------------------------

    def _connect(self, key: FlowKey, number: int) -> None:
        request = self.source.recorded_request(key, number)
        pdata, ird, ord_ = b"", 16, 16
        detail = "no recorded MPA request: empty private data, IRD/ORD 16/16"
        if request is not None:
            try:
                mpa = erdma_mpa.decode_frame(request.seg.payload)[0]
                pdata = mpa.private_data
                if mpa.rtr is not None:
                    ird, ord_ = mpa.rtr.ird, mpa.rtr.ord
                detail = (f"private data {len(pdata)} bytes and IRD/ORD {ird}/{ord_} from "
                          f"frame {request.number}")
            except MpaFormatError as unreadable:
                detail = (f"recorded MPA request (frame {request.number}) unreadable: "
                          f"{unreadable}")
        action = AppAction(self.now, number, "connect", key, detail)
        run = self.flows[key]
        conn: int | None = None
        try:  # logged once its outcome is known (a spool keeps what it is given)
            try:
                conn = self.core.connect(key[0], key[2], key[3], local_port=key[1],
                                         private_data=pdata, ird=ird, ord=ord_,
                                         now_ns=self.now)
            except CmError as exc:
                action.error = str(exc)
        finally:
            self.actions.append(action)
        if conn is not None:
            run.conn = conn
            self.conn_flow[conn] = key
            self._post_receives(key, conn, number)
        self.sink.connected(run)

    def _answer(self, key: FlowKey, number: int, reply: Frame) -> None:
        verb = self.opt.on_request
        if verb == "auto":
            verb = "reject" if mpa_kind(reply.seg.payload) == "reject" else "accept"
        self._decide(key, verb, *stacks.reply_terms(reply.seg.payload), number=number)

    def _decide(self, key: FlowKey, verb: str, pdata: bytes,
                ird_ord: tuple[int, int] | None = None, *, number: int) -> None:
        run = self.flows[key]
        action = AppAction(self.now, number, verb, key,
                           f"private data {len(pdata)} bytes")
        if run.conn is None:
            action.error = "no connection request to answer"
            self.actions.append(action)
            return
        words = stacks.Prepared()
        try:
            try:
                if verb == "accept":
                    stacks.accept(self.core, self.stack, run.conn, pdata, ird_ord, self.now)
                    words = stacks.post_receives(self.core, self.stack, run.conn,
                                                 self.rec.flows.get(key), self.now,
                                                 self.plan_of)
                else:
                    self.core.reject(run.conn, private_data=pdata, now_ns=self.now)
            except CmError as exc:
                action.error = str(exc)
        finally:
            self.actions.append(action)
        self._prepared(key, number, words)

    def _prepared(self, key: FlowKey, number: int, done: stacks.Prepared) -> None:
        for what, text in done.verbs:
            self.actions.append(AppAction(self.now, number, what, key, text))
        self.assumptions += [(key, text) for text in done.assumptions
                             if (key, text) not in self.assumptions]

    def _post_receives(self, key: FlowKey, conn: int, number: int) -> None:
        self._prepared(key, number, stacks.post_receives(
            self.core, self.stack, conn, self.rec.flows.get(key), self.now, self.plan_of))

    def _read(self, key: FlowKey, frame: Frame) -> None:
        """The recorded host's RDMA Read Requests that end in ``frame``, issued again with
        the recorded sink and source (:mod:`mpa_emu.replay.application`)."""
        run = self.flows[key]
        flow = self.rec.flows.get(key)
        if flow is None or not isinstance(self.core, stacks.IssuesReads):
            return
        for read in self.plan_of(key).reads:
            if read.frame != frame.number:
                continue
            action = AppAction(self.now, frame.number, "post_read", key, read.words())
            if run.conn is None:
                action.error = "no connection"
            else:
                try:
                    self.core.post_read(run.conn, read.sink_stag, read.sink_to, read.length,
                                        read.src_stag, read.src_to, now_ns=self.now)
                except CmError as exc:
                    action.error = str(exc)
            self.actions.append(action)

    def _disconnect(self, key: FlowKey, frame: Frame) -> None:
        run = self.flows[key]
        graceful = not frame.seg.flags & RST
        action = AppAction(self.now, frame.number, "disconnect", key,
                           "graceful (FIN)" if graceful else "abortive (RST)")
        if run.conn is None:
            action.error = "no connection"
            self.actions.append(action)
            return
        try:
            try:
                self.core.disconnect(run.conn, graceful=graceful, now_ns=self.now)
            except CmError as exc:
                action.error = str(exc)
        finally:
            self.actions.append(action)


class NodeStates:
    """What the engine knows of the core's nodes, told by the core as it happens
    (:class:`~mpa_emu.stacks.contract.api.NodeWatch`): each connection's CM state by name (for the
    report), its flow, and the NIC's asynchronous events."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def node_created(self, conn: int, loc_port: int, rem: bytes, rem_port: int) -> None:
        """A new node starts UNKNOWN, on the recorded flow of its ports."""
        engine = self.engine
        engine.states[conn] = "UNKNOWN"
        key = engine.by_ports.get((loc_port, rem, rem_port))
        if key is not None:
            engine.flows[key].conn = conn
            engine.conn_flow[conn] = key

    def state_changed(self, conn: int, state: IntEnum) -> None:
        """Remember the node's new state; siw and cxgb4 also change state in queued work
        and timers, so their flow's history takes every change as it happens."""
        engine = self.engine
        engine.states[conn] = state.name
        if not engine.node_conns:
            key = engine.conn_flow.get(conn)
            if key is not None and key in engine.flows:
                engine.flows[key].states.append((engine.now, state.name))

    def node_freed(self, conn: int) -> None:
        """The node is gone."""
        self.engine.states[conn] = "freed"

    def qp_event(self, time_ns: int, conn: int, ae: str) -> None:
        """Keep the NIC's event with the capture frame replayed last."""
        engine = self.engine
        engine.nic_events.append(NicEvent(time_ns, engine.position, conn,
                                          engine.conn_flow.get(conn), ae))


class KeepAll:
    """The whole-capture replay's sink: every emitted frame, every injection (with the
    core's trace records and node states when ``traced``) and every flow's log is kept
    for the comparison and the full report."""

    def __init__(self, traced: bool) -> None:
        self.traced = traced

    def emitted(self, engine: Engine, run: FlowRun, seg: Segment, comment: str,
                conn: int | None, delta: int) -> None:
        """Keep the frame (the comparison reads them after the run)."""
        now = engine.now
        state = engine.state(conn)
        engine.emitted.append(Emitted(engine.emitted_count, now, seg, comment, conn,
                                      run.key, delta, engine.position, state))
        run.log.append((True, seg))
        if state:
            run.states.append((now, state))
        if engine.opt.rebase:
            end = (seg.seq + delta + seq_len(seg)) & MASK32
            if run.em_nxt is None or after(end, run.em_nxt):
                run.em_nxt = end

    def received(self, run: FlowRun, seg: Segment) -> None:
        """Log the injected frame on its flow."""
        run.log.append((False, seg))

    def skipped(self, engine: Engine, frame: Frame, run: FlowRun) -> Injection | None:
        """Record the frame as dropped by the NIC (its flow's state unchanged)."""
        before = engine.state(run.conn)
        skipped = Injection(frame, frame.seg, before, before, [], [],
                            f"dropped by the NIC: {frame.nic_dropped}")
        engine.injections.append(skipped)
        return skipped

    def upcall(self, ev: Upcall, run: FlowRun, current: Injection | None) -> None:
        """Attach the upcall to the injection that caused it."""
        if current is not None and current.frame.flow == run.key:
            current.upcalls.append(ev)

    def connected(self, run: FlowRun) -> None:
        """Nothing more to keep: the action is in :attr:`Engine.actions`."""
