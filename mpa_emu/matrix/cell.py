"""One matrix cell: two emulated hosts, one scenario, and what each application saw.

:func:`run_cell` is a module-level function of a picklable :class:`CellSpec` returning a
picklable :class:`CellResult`, so the campaign executors (``-j N``, ``--scheduler``)
run cells anywhere with the same results.
"""

from __future__ import annotations

import contextlib
import gc
import os
from dataclasses import dataclass, field
from typing import Any

from mpa_emu.capture.decode import LINK_ETHERNET, RawFrame
from mpa_emu.judge.profile import Profiles
from mpa_emu.matrix.catalogue import BY_NAME, Scenario, overlay
from mpa_emu.matrix.sides import Side
from mpa_emu.net import Accept, Host, Manual, Network, NvmeTarget, Reject, SmbdClient, SmbdServer
from mpa_emu.net.host import VerbFailure
from mpa_emu.net.network import RunResult
from mpa_emu.stacks import STACKS, parse_params
from mpa_emu.stacks.contract.events import IwEvent, Upcall
from mpa_emu.views.inspection import inspect_frames
from mpa_emu.views.ladder import ladder
from mpa_emu.wire import ddp
from mpa_emu.wire.codec import encode
from mpa_emu.wire.interning import forget
from mpa_emu.wire.mpa import frame_fpdu, looks_like_mpa
from mpa_emu.wire.segment import ACK, FIN, PSH, RST, SYN, Segment

INITIATOR_IP = "192.0.2.1"  # RFC 5737 documentation addresses
RESPONDER_IP = "192.0.2.2"
PORT = 31010
NVME_TARGET_QUEUE = 128
"""The queue limit of the nvme-queue-too-big scenario's target (entries)."""
"""A port no tshark 4.0 dissector claims (Wireshark's MPA dissector is heuristic only)."""
MS = 1_000_000
BUDGET_NS = 3_600_000 * MS
"""Virtual time a cell may take. A cell runs until its network is idle: every
connection has its outcome by its stacks' own timers (cxgb4's 60 s ep_timeout, siw's
MPA timer, irdma's 32 CM retransmissions that give up at about 316 s,
irdma_cm_timer_tick). An hour of virtual time is far past all of them; a cell still busy
then says its time ran out and when its next timer is due."""
SETTLE_NS = 2_000 * MS
"""How long after both sides are established the scenario's last act comes."""
MAX_EVENTS = 20_000
"""The safety bound on events per cell: the busiest cell of the catalogue that ends on
its own takes under a hundred. A cell that reaches it says so (status ``event-bound``)
with the kernel log line it repeats, e.g. cxgb4 with ``mpa_rev=0``, whose peer_abort
retries with MPA v1 after every reset without limit."""
INVALID_STAG = 0xDEAD00
"""An STag no emulated stack hands out: a tagged Write to it is a DDP tagged-buffer
error (RFC 5041 section 7.2: invalid STag)."""


@dataclass(frozen=True, slots=True)
class CellSpec:
    """What one cell runs: the two sides as chosen, the scenario, the seed, and the file
    its capture goes to (None: not written)."""

    initiator: Side
    responder: Side
    scenario: str
    seed: int = 0
    capture: str | None = None


@dataclass(slots=True)
class CellResult:
    """What happened in one cell (JSON-ready through :meth:`to_json`)."""

    initiator: str
    responder: str
    scenario: str
    status: str = "ran"
    """``ran`` (the network went idle: every connection has its outcome), ``n/a`` (the
    scenario cannot be expressed for these stacks: ``reason``), ``error`` (the emulator
    failed: ``reason``), ``event-bound`` (stopped at :data:`MAX_EVENTS`: ``reason``
    says what repeats) or ``time-out`` (still busy after :data:`BUDGET_NS` of virtual
    time: ``reason`` says when the next timer is due)."""
    reason: str = ""
    initiator_event: str | None = None
    initiator_status: int | None = None
    initiator_events: list[str] = field(default_factory=list)
    responder_events: list[str] = field(default_factory=list)
    initiator_upcalls: list[str] = field(default_factory=list)
    responder_upcalls: list[str] = field(default_factory=list)
    initiator_failures: list[str] = field(default_factory=list)
    """Verbs the initiator's driver refused (``connect: ... (-ENOMEM)``)."""
    responder_failures: list[str] = field(default_factory=list)
    """Verbs the responder's driver refused (a reject with too much private data)."""
    rtr: str | None = None
    terminate: str | None = None
    frames: int = 0
    initiator_event_s: float | None = None
    """Virtual time (seconds) of the initiator's first rdma_cm event."""
    last_frame_s: float | None = None
    """Virtual time (seconds) of the cell's last frame."""
    capture: str | None = None
    mpa_rev: int | None = None
    rejected_pd: int | None = None
    refused_by: str | None = None
    """The first rule of a side's own stack that the MPA exchange on the wire breaks, as
    the judge reads it with each side judged as its stack (:mod:`mpa_emu.judge.rules`):
    ``"siw responder: siw_recv_mpa_rr"``; None when no rule is broken."""
    ladder: str = ""
    """The cell's ladder (every frame with the transitions and upcalls behind it), kept
    here only when the cell writes no capture; otherwise it is in ``ladder_file``."""
    ladder_file: str | None = None
    """``CAPTURE.ladder.txt`` beside the capture."""

    def ladder_text(self) -> str:
        """The ladder, from memory or from its file (empty when the file is gone)."""
        if self.ladder_file is None:
            return self.ladder
        try:
            with open(self.ladder_file, encoding="utf-8") as f:
                return f.read()
        except OSError:
            return ""

    def to_json(self) -> dict[str, Any]:
        """The cell as the JSON contract writes it (``docs/matrix.md``); the ladder is
        left to the HTML page and the ladder file."""
        return {"initiator": self.initiator, "responder": self.responder,
                "scenario": self.scenario, "status": self.status, "reason": self.reason,
                "initiator_event": self.initiator_event,
                "initiator_status": self.initiator_status,
                "initiator_events": self.initiator_events,
                "responder_events": self.responder_events,
                "initiator_upcalls": self.initiator_upcalls,
                "responder_upcalls": self.responder_upcalls,
                "initiator_failures": self.initiator_failures,
                "responder_failures": self.responder_failures,
                "rtr": self.rtr, "terminate": self.terminate, "frames": self.frames,
                "initiator_event_s": self.initiator_event_s, "last_frame_s": self.last_frame_s,
                "mpa_rev": self.mpa_rev, "rejected_pd": self.rejected_pd,
                "refused_by": self.refused_by, "capture": self.capture,
                "ladder_file": self.ladder_file}


COLLECT_EVERY = 64
"""Cells between two full garbage collections in a process running cells: a cell's
network is a web of reference cycles that the young-generation collections of a run
promote, and only a full collection frees; without it a long matrix grows until the
interpreter happens to run one."""
_cells_run = 0


def run_cell(spec: CellSpec) -> CellResult:
    """Run one cell; never raises (an emulator failure is a cell with status ``error``)."""
    global _cells_run
    _cells_run += 1
    if _cells_run % COLLECT_EVERY == 0:
        # Cells share nothing: the shared-value tables start over, then the garbage goes.
        forget()
        gc.collect()
    scenario = BY_NAME[spec.scenario]
    ini = overlay(spec.initiator, scenario.initiator_overlay)
    resp = overlay(spec.responder, scenario.responder_overlay)
    result = CellResult(spec.initiator.label, spec.responder.label, spec.scenario)
    for side in (ini, resp):
        if isinstance(side, str):
            result.status, result.reason = "n/a", side
            return result
    assert isinstance(ini, Side) and isinstance(resp, Side)
    try:
        _run(spec, scenario, ini, resp, result)
    except Exception as exc:  # an emulator bug must not take the whole matrix down
        result.status, result.reason = "error", f"{type(exc).__name__}: {exc}"
    return result


class CellRun:
    """The network of one cell while its scenario runs."""

    def __init__(self, spec: CellSpec, ini: Side, resp: Side) -> None:
        self.net = Network(seed=spec.seed)
        self.initiator: Host = self.net.add_host("initiator", INITIATOR_IP, stack=ini.stack,
                                                 params=dict(ini.params))
        self.responder: Host = self.net.add_host("responder", RESPONDER_IP, stack=resp.stack,
                                                 params=dict(resp.params))
        self.conn: int | None = None
        self.established = False
        self.injected = False

    def sent_next(self, host: str) -> int:
        """The next sequence number ``host`` would send on the cell's connection, as the
        capture shows it (SYN and FIN count one)."""
        nxt = 0
        for frame in self.net.frames:
            seg = frame.segment
            if seg is None or frame.sender != host:
                continue
            end = seg.seq + len(seg.payload) + (1 if seg.flags & (SYN | FIN) else 0)
            nxt = end & 0xFFFFFFFF
        return nxt

    def inject_from(self, sender: Host, receiver: Host, flags: int,
                    payload: bytes = b"") -> None:
        """A segment from ``sender`` to ``receiver`` on the cell's connection, at the
        sequence numbers both are at; the sending stack does not know of it."""
        template = next(f.segment for f in self.net.frames
                        if f.segment is not None and f.sender == sender.name)
        seg = Segment(template.src_mac, template.dst_mac, template.src_ip, template.dst_ip,
                      template.sport, template.dport, self.sent_next(sender.name),
                      self.sent_next(receiver.name) if flags & ACK else 0, flags,
                      window=template.window, payload=payload)
        self.net.inject(encode(seg), via=sender, comment="matrix: injected by the scenario")
        self.injected = True


def _run(spec: CellSpec, scenario: Scenario, ini: Side, resp: Side,
         result: CellResult) -> None:
    run = CellRun(spec, ini, resp)
    net, initiator, responder = run.net, run.initiator, run.responder
    if scenario.listener == "reject":
        policy: Any = Reject(b"R" * scenario.reject_pd)
    elif scenario.listener == "manual":
        policy = Manual()
    elif scenario.listener == "nvme-target":
        policy = NvmeTarget(max_queue_size=NVME_TARGET_QUEUE)
    elif scenario.listener == "smbd-server":
        policy = SmbdServer()
    else:
        policy = Accept(b"accepted")
    responder.listen(PORT, policy=policy)

    if scenario.during_mpa:
        flags = RST if scenario.during_mpa == "rst" else FIN | ACK

        def tap(host: Host, data: bytes | Segment) -> None:
            if run.injected or host is not responder:
                return
            payload = data.payload if isinstance(data, Segment) else b""
            if not isinstance(data, Segment):
                with contextlib.suppress(ValueError):
                    from mpa_emu.wire.codec import decode

                    payload = decode(data).payload
            if payload and looks_like_mpa(payload):
                run.injected = True
                net.after(1_000, run.inject_from, responder, initiator, flags)

        net.delivery_tap = tap

    if scenario.after_established:
        def on_reply(host: Host, up: Upcall) -> None:
            if up.status != 0 or run.established:
                return
            run.established = True
            net.after(SETTLE_NS, _after_established, run, scenario, up.conn)

        initiator.on(on_reply, IwEvent.CONNECT_REPLY)

    ird = 16 if scenario.ird is None else scenario.ird
    if ird == -1:
        ird = max_ird(ini)
    # rdma_connect() returning an error is what the application sees when the driver
    # refuses the verb (siw_connect, c4iw_connect, irdma_connect): no event follows.
    run.conn = initiator.guarded("connect", initiator.connect, responder, PORT,
                                 private_data=scenario.private_data, ird=ird, ord=ird)
    if scenario.listener == "smbd-server" and run.conn is not None:
        SmbdClient().attach(initiator, run.conn)  # smbd_negotiate once established
    outcome = net.run(until_ns=BUDGET_NS, max_events=MAX_EVENTS)
    _collect(run, result, spec)
    stopped(run, outcome, result)


def stopped(run: CellRun, outcome: RunResult, result: CellResult) -> None:
    """Mark a cell that a safety bound stopped: the event bound (with the kernel log
    line it repeats most, the loop a reader can look up) or the virtual-time budget
    (with when the next timer of each busy host is due)."""
    frames = run.net.frames
    result.last_frame_s = frames[-1].time_ns / 1e9 if len(frames) else None
    if outcome.bounded:
        result.status = "event-bound"
        result.reason = (f"stopped at the event bound ({MAX_EVENTS:,} events, "
                         f"{outcome.now_ns / 1e9:.3f} s of virtual time, {result.frames:,} "
                         "frames): the hosts never went quiet" + _repeated(run))
    elif outcome.reason == "until":
        due = [(deadline, host) for host in (run.initiator, run.responder)
               if (deadline := host.core.get_timer()) is not None]
        when = "; ".join(f"{host.name}'s {host.stack} timer is due at {t / 1e9:.3f} s"
                         for t, host in sorted(due, key=lambda d: d[0]))
        result.status = "time-out"
        result.reason = (f"virtual time ran out at {BUDGET_NS / 1e9:.0f} s before every "
                         "connection had its outcome" + (f": {when}" if when else ""))


def _repeated(run: CellRun) -> str:
    """``; most repeated kernel log line: "..." (N times on HOST)`` from the journal."""
    journal = run.net.journal
    if not journal:
        return ""
    counts: dict[tuple[str, str], int] = {}
    for entry in journal:
        record = entry.item
        # pr_debug lines (dynamic debug) are left out: every state change makes one.
        if entry.kind == "trace" and record.kind == "kernel_log" \
                and not record.fields.get("dynamic_debug"):
            key = (record.host, str(record.fields.get("text", "")))
            counts[key] = counts.get(key, 0) + 1
    if not counts:
        return ""
    (host, text), n = max(counts.items(), key=lambda kv: kv[1])
    return f"; most repeated kernel log line: \"{text}\" ({n:,} times on the {host})"


def _after_established(run: CellRun, scenario: Scenario, conn: int) -> None:
    what = scenario.after_established
    host = run.initiator
    if what == "close":
        host.guarded("disconnect", host.disconnect, conn, graceful=True)
    elif what == "abort":
        host.guarded("disconnect", host.disconnect, conn, graceful=False)
    else:
        ulpdu = ddp.rdma_write(b"\x00" * 16, INVALID_STAG, 0)
        # Without negotiated CRC the field is sent as zero (RFC 5044 section 7.1).
        body = frame_fpdu(ulpdu, None if _crc_negotiated(run) else 0)
        run.inject_from(run.initiator, run.responder, ACK | PSH, body)


def _crc_negotiated(run: CellRun) -> bool:
    """Whether the MPA exchange on the wire negotiated CRC (C set in both frames,
    RFC 5044 section 7.1)."""
    frames = [RawFrame(f.index, f.time_ns / 1e9, LINK_ETHERNET, f.data, len(f.data))
              for f in run.net.frames]
    report = inspect_frames(frames)
    return any(bool(c.crc) for c in report.connections)


def max_ird(side: Side) -> int:
    """The most IRD/ORD a side's device offers an application (its device attributes,
    :attr:`MatrixFacts.max_ird <mpa_emu.stacks.base.MatrixFacts.max_ird>`): irdma's
    max_hw_ird on GEN_2 (127; 63 on GEN_1), siw's SIW_MAX_IRD_QP (128), cxgb4's
    c4iw_max_read_depth module parameter (32 by default)."""
    return STACKS[side.stack].matrix.max_ird(parse_params(side.stack, dict(side.params)))


def _event_text(up: Upcall) -> str:
    return f"{up.event.name} {up.status}"


def _failure_text(failure: VerbFailure) -> str:
    return f"{failure.verb}: {failure.message}"


def _collect(run: CellRun, result: CellResult, spec: CellSpec) -> None:
    net = run.net
    result.frames = len(net.frames)
    result.initiator_failures = [_failure_text(f) for f in run.initiator.failures]
    result.responder_failures = [_failure_text(f) for f in run.responder.failures]
    result.initiator_upcalls = [_event_text(u) for u in run.initiator.upcalls]
    result.responder_upcalls = [_event_text(u) for u in run.responder.upcalls]
    ini_events = [(e.name, e.status) for e in run.initiator.cm_events]
    result.initiator_events = [name for name, _ in ini_events]
    result.responder_events = [e.name for e in run.responder.cm_events]
    # The event that ends the initiator's rdma_connect(): the first one it receives; or
    # the error rdma_connect() itself returned.
    if ini_events:
        result.initiator_event, result.initiator_status = ini_events[0]
        result.initiator_event_s = run.initiator.cm_events[0].time_ns / 1e9
    elif run.conn is None and run.initiator.failures:
        result.initiator_status = -run.initiator.failures[0].errno
    frames = [RawFrame(f.index, f.time_ns / 1e9, LINK_ETHERNET, f.data, len(f.data))
              for f in net.frames]
    # Each side judged as the stack it runs: the refusals are then its own stack's.
    profiles = Profiles({INITIATOR_IP: spec.initiator.stack,
                         RESPONDER_IP: spec.responder.stack})
    report = inspect_frames(frames, profiles=profiles)
    for conn in report.connections:
        if conn.refusals and result.refused_by is None:
            first = conn.refusals[0]
            result.refused_by = f"{first.stack} {first.role}: {first.fn}"
        if conn.request is not None:
            result.mpa_rev = conn.request.rev
        if conn.reply is not None and conn.reply.reject:
            result.rejected_pd = conn.reply.pd_length
        result.rtr = result.rtr or _rtr_of(conn)
        for fp in conn.fpdu_list:
            if fp.opcode == ddp.Opcode.TERMINATE and result.terminate is None:
                result.terminate = f"frame {fp.frame} from the {fp.side}: {fp.what}"
    text = ladder(net)
    if spec.capture is None:
        result.ladder = text
        return
    # os.path, not pathlib: pathlib interns every part of a path, and a matrix names a
    # new file per cell.
    os.makedirs(os.path.dirname(spec.capture) or ".", exist_ok=True)
    net.write_pcapng(spec.capture)
    result.capture = spec.capture
    result.ladder_file = spec.capture + ".ladder.txt"
    with open(result.ladder_file, "w", encoding="utf-8") as f:
        f.write(text)


def _rtr_of(conn: Any) -> str | None:
    """The RTR of a connection that negotiated one (both MPA frames with the RFC 6581
    block and P2P): the initiator's first FPDU, a zero-length Write, Read or Send."""
    request, reply = conn.request, conn.reply
    if request is None or reply is None or reply.reject:
        return None
    if not (request.has_block and reply.has_block):
        return None
    for fp in conn.fpdu_list:
        if fp.side != "client":
            continue
        names = {ddp.Opcode.WRITE: "write", ddp.Opcode.READ_REQUEST: "read",
                 ddp.Opcode.SEND: "send"}
        return names.get(fp.opcode) if fp.opcode is not None else None
    return None
