"""What replay tells the user: a one-line verdict, the first divergence in readable
form, every divergence as JSON, and the merged conversation as pcapng."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mpa_emu.capture.checksums import Mode
from mpa_emu.capture.pcap import PcapngWriter
from mpa_emu.replay.compare import Comparison, Divergence, shape_text
from mpa_emu.replay.engine import AppAction, Emitted, Injection, OnRequest, Rebase, RunResult
from mpa_emu.replay.recording import Frame, Recording
from mpa_emu.replay.semantic import (
    SemanticVerdict,
    Story,
    emulated_name,
    rdma_cm_of,
)
from mpa_emu.replay.stacks import StackChoice, default_config, side_words
from mpa_emu.stacks import DEFAULT_STACK
from mpa_emu.stacks.base import HostConfig
from mpa_emu.stacks.contract.trace import TraceRecord
from mpa_emu.ulp.rdma_cm import UlpStep, steps_for
from mpa_emu.views.describe import (
    flags_joined,
    fpdu_summary,
    rdma_cm_label,
    segment_line,
    upcall_text,
)
from mpa_emu.wire import codec
from mpa_emu.wire.addr import ip_text
from mpa_emu.wire.flow import FlowKey, flow_vlan
from mpa_emu.wire.segment import Segment


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    """The command line's options, as values."""

    emulate: bytes
    on_request: OnRequest = "auto"
    backlog: int = 4096
    time_tolerance_ns: int = 10_000_000
    strict_offload: bool = False
    semantic: bool = False
    horizon_ns: int = 400_000_000_000
    seed: int = 0
    checksums: Mode = Mode.OFFLOAD
    """Which injected frames the NIC drops for their checksum (``--checksums``)."""
    config: HostConfig | None = field(default_factory=default_config)
    """The default stack's configuration record (``--mpa-rev``) when :attr:`stack` is
    None."""
    stack: StackChoice | None = None
    """The emulated side's stack (``--profile``); None: the default stack with
    :attr:`config`."""
    peers: tuple[tuple[bytes, StackChoice], ...] = ()
    """Stacks named for the other addresses (``--profile IP=STACK,...``): words only."""

    @property
    def emulated_stack(self) -> StackChoice:
        """The stack that plays the emulated side."""
        return self.stack or StackChoice(config=self.config)


def _t(ns: int) -> str:
    return f"{ns / 1e9:.6f}"


def flow_text(key: FlowKey) -> str:
    def ep(ip: bytes, port: int) -> str:
        text = ip_text(ip)
        return f"[{text}]:{port}" if len(ip) == 16 else f"{text}:{port}"
    tag = flow_vlan(key)
    vlan = f" vlan {tag}" if tag is not None else ""
    return f"{ep(key[0], key[1])} <-> {ep(key[2], key[3])}{vlan}"


def _emitted_text(em: Emitted) -> str:
    text = segment_line(em.seg)
    if em.seq_delta:
        text = text.replace(f"seq={em.seg.seq} ", f"seq={em.mapped_seq} ", 1)
    return text


def record_text(rec: TraceRecord) -> str:
    """A trace record in one line: function, kind and its fields."""
    fields = " ".join(f"{k}={v.hex() if isinstance(v, bytes) else v}"
                      for k, v in sorted(rec.fields.items()))
    return f"{rec.fn}: {rec.kind}" + (f" {fields}" if fields else "")


@dataclass(slots=True)
class ReplayReport:
    """The outcome of one replay."""

    recording: Recording
    run: RunResult
    comparison: Comparison
    options: ReplayOptions
    semantic: SemanticVerdict | None = None
    """Per connection outcomes and their differences (semantic mode)."""
    _labels: dict[int, str] | None = field(default=None, repr=False, compare=False)

    def ulp_steps(self) -> dict[int, UlpStep]:
        """Each upcall (by ``id``) through iw_cm and rdma_cm: the rdma_cm event the
        emulated host's application gets for it (:func:`mpa_emu.ulp.rdma_cm.steps_for`)."""
        return {id(step.upcall): step for step in steps_for(self.run.upcalls)}

    def rdma_cm_labels(self) -> dict[int, str]:
        """``=> RDMA_CM_EVENT_...`` for each upcall (by ``id``), computed once."""
        if self._labels is None:
            self._labels = {key: rdma_cm_label(step.trace_fields())
                            for key, step in self.ulp_steps().items()}
        return self._labels

    def injection_outcome(self, inj: Injection) -> str:
        """:func:`injection_text` with the rdma_cm event beside each upcall."""
        return injection_text(inj, self.rdma_cm_labels())

    @property
    def failed(self) -> bool:
        """A failing divergence, a different outcome (semantic mode), or an emulator
        failure before the capture's end."""
        return (bool(self.comparison.errors) or self.run.failed_during_capture
                or (self.semantic is not None and bool(self.semantic.divergences)))

    @property
    def first_divergence(self) -> str:
        """The first divergence in one line ("" when there is none): the first difference
        in outcome (semantic mode) or the first differing frame, whichever comes first, as
        the verdict line names it."""
        sem = self.semantic.first if self.semantic is not None else None
        d = self.first
        if sem is not None and (d is None or sem.frame <= d.frame):
            return sem.text
        if d is None:
            return ""
        names = ", ".join(f.name for f in d.fields)
        return f"frame {d.frame}: {d.kind}" + (f" ({names})" if names else "")

    @property
    def exit_code(self) -> int:
        """0 when everything matches, 1 on divergence."""
        return 1 if self.failed else 0

    @property
    def first(self) -> Divergence | None:
        """The first failing divergence in capture order."""
        errors = self.comparison.errors
        return errors[0] if errors else None

    def verdict(self) -> str:
        """The one-line verdict."""
        cmp = self.comparison
        ip = ip_text(self.recording.ip)
        mode = " (semantic)" if cmp.semantic else ""
        unread = cmp.sent_total - cmp.compared
        # Semantic mode leaves pure ACKs out of the comparison; the count says so.
        skipped = f" ({unread} pure ACK(s) not compared)" if unread else ""
        listed = " (listed below)" if cmp.warnings else ""
        tail = (f"{cmp.matched_total}/{cmp.sent_total} frames of {ip} matched{skipped}, "
                f"{len(cmp.warnings)} NIC warning(s){listed}, {len(cmp.extra)} extra "
                "frame(s) after the capture")
        sem = self.semantic.first if self.semantic is not None else None
        first = self.first
        if sem is not None and (first is None or sem.frame <= first.frame):
            return (f"DIVERGENCE{mode} at frame {sem.frame}: the outcome differs; "
                    f"{len(self.semantic.divergences) if self.semantic else 0} difference(s) "
                    f"in outcome, {len(cmp.errors)} frame divergence(s), {tail}")
        if first is None and self.run.failed_during_capture:
            return f"EMULATOR FAILURE at frame {self.run.failure_frame}: {tail}"
        if first is None and cmp.semantic:
            # The outcome is the verdict; the frame count is detail, not a failure.
            return f"MATCH{mode}: every connection has the recorded outcome; {tail}"
        if first is None:
            return f"MATCH{mode}: {tail}"
        names = [f.name for f in first.fields]
        what = {"mismatch": ", ".join(names) + (" differs" if len(names) == 1 else " differ"),
                "missing": "expected frame not sent",
                "unexpected": "frame sent that the capture does not show"}[first.kind]
        return (f"DIVERGENCE{mode} at frame {first.frame}: {what}; "
                f"{len(cmp.errors)} divergence(s), {tail}")

    def first_text(self) -> str:
        """The first divergence: frame numbers, expected and actual frame, CM state and
        the kernel function behind the emitted frame; in semantic mode the first
        difference in outcome when it comes first."""
        sem = self.semantic.first if self.semantic is not None else None
        d = self.first
        if sem is not None and (d is None or sem.frame <= d.frame):
            return (f"first divergence: {sem.text}\n"
                    f"  flow      {flow_text(sem.flow)}")
        if d is None:
            return ""
        lines = [f"first divergence: {d.kind} at frame {d.frame}, flow {flow_text(d.flow)}"]
        if d.expected is not None:
            lines.append(f"  expected  frame {d.expected.number} t={_t(d.expected.time_ns)}  "
                         f"{segment_line(d.expected.seg)}")
        else:
            lines.append("  expected  nothing (the capture shows no such frame)")
        if d.actual is not None:
            a = d.actual
            lines.append(f"  actual    emitted #{a.index} t={_t(a.time_ns)}  {_emitted_text(a)}")
        else:
            lines.append("  actual    nothing was sent")
        for f in d.fields:
            lines.append(f"  differs   {f.name}: expected {f.expected}, actual {f.actual}")
        if d.actual is not None:
            lines.append(f"  CM state  {d.actual.state or 'unknown'} after "
                         f"{d.actual.comment or 'an unnamed kernel function'}")
        else:
            lines.append(f"  CM state  {d.state or 'no node'} at t={_t(d.expected.time_ns)}"
                         if d.expected is not None else "")
            last = self._last_injection(d.flow, d.expected.time_ns if d.expected else 0)
            if last is not None:
                lines.append(f"  last in   frame {last.frame.number}: "
                             f"{self.injection_outcome(last)}")
        flow = self.run.flows.get(d.flow)
        if flow is not None and flow.delta:
            lines.append(f"  numbers   the emulator's ISN differs from the recorded one: recorded "
                         f"seq = emulator seq + {flow.delta} (mod 2^32); kernel messages "
                         "above use the emulator's numbers")
        return "\n".join(line for line in lines if line)

    def _last_injection(self, key: FlowKey, time_ns: int) -> Injection | None:
        found = None
        for inj in self.run.injections:
            if inj.frame.time_ns > time_ns:
                break
            if inj.frame.flow == key:
                found = inj
        return found

    def text(self) -> str:
        """Verdict, first divergence, and for --semantic what happened to each frame."""
        out = [self.verdict()]
        if self.names_stacks:
            out.append(self.stacks_line())
        first = self.first_text()
        if first:
            out.append(first)
        if self.recording.damage:
            out.append(f"note: {self.recording.damage}")
        if self.comparison.compared == 0 and self.first is None:
            out.append(f"note: the capture holds no frame sent by "
                       f"{ip_text(self.recording.ip)}: the match only says that the "
                       "emulator stayed silent while the capture lasted")
        out += self._warning_lines()
        out += self._checksum_notes()
        out += [f"note: {n}" for n in self.run.notes]
        out += self._rebase_notes()
        out += [f"note: {a.verb} at frame {a.frame} refused: {a.error}{self._gone(a)}"
                for a in self.run.actions if a.error]
        out += self.assumption_lines()
        if self.semantic is not None:
            out += self._semantic_text()
        if self.comparison.semantic:
            out.append("injected frames:")
            out += [f"  frame {inj.frame.number} t={_t(inj.frame.time_ns)} "
                    f"{shape_text(inj.frame.seg)}: {self.injection_outcome(inj)}"
                    for inj in self.run.injections]
            out.append("application (verbs and upcalls):")
            rdma = self.rdma_cm_labels()
            timeline = [(u.time_ns, 1, f"upcall {upcall_text(u)}", rdma.get(id(u), ""))
                        for u in self.run.upcalls]
            timeline += [(a.time_ns, 0, f"{a.verb} ({a.detail})"
                          + (f" refused: {a.error}{self._gone(a)}" if a.error else ""), "")
                         for a in self.run.actions if a.verb != "listen"]
            for t, _o, text, beside in sorted(timeline):
                out.append(f"  t={_t(t)} {text}")
                if beside:
                    out.append(f"  t={_t(t)}   {beside}")
        return "\n".join(out)

    def _warning_lines(self) -> list[str]:
        """The NIC warnings the verdict counts, one line each: frames after OFFLOADED,
        which the NIC sends (not the CM), differing from the recording."""
        warnings = self.comparison.warnings
        if not warnings:
            return []
        out = [f"NIC warnings ({len(warnings)}: frames after OFFLOADED, sent by the NIC, not "
               "the CM; not a failure without --strict-offload):"]
        for d in warnings:
            if d.kind == "missing":
                what = "the recording has it, the emulator did not send it"
            elif d.kind == "unexpected":
                what = "the emulator sent it, the recording does not show it"
            else:
                what = ", ".join(f"{f.name} {f.expected} / {f.actual}" for f in d.fields) \
                    or "differs"
            seg = d.expected.seg if d.expected is not None else \
                d.actual.seg if d.actual is not None else None
            fpdu = fpdu_summary(seg.payload, None) if seg is not None and seg.payload else None
            shown = (f": {shape_text(seg)}" + (f", {fpdu}" if fpdu else "")
                     if seg is not None else "")
            out.append(f"  frame {d.frame} {d.kind}{shown} ({what})")
        return out

    def _gone(self, action: AppAction) -> str:
        """Why a verb found no connection: where the flow's node was freed, and what the
        kernel function that ended it said; "" for any other refusal."""
        if "no connection" not in action.error:
            return ""
        for inj in self.run.injections:
            if inj.frame.flow != action.flow or inj.frame.number > action.frame:
                continue
            if inj.state_after == "freed" and inj.state_before != "freed":
                drop = next((f"{r.fn}: {r.fields.get('reason', 'no reason given')}"
                             for r in inj.records if r.kind == "segment_dropped"), "")
                how = f" after {drop}" if drop else ""
                return (f"; its node was freed at frame {inj.frame.number}{how} "
                        f"({inj.state_before or 'no state'} -> freed)")
        flow = self.run.flows.get(action.flow)
        if flow is not None and any(state == "freed" for _t, state in flow.states):
            return "; its node had been freed by then (a timer or the NIC, not a frame)"
        return "; no node was created for this connection"

    def _rebase_notes(self) -> list[str]:
        """One note per flow whose peer acknowledgements were re-based while its node
        lived (after the node is freed there is nothing left to re-base for)."""
        by_flow: dict[FlowKey, list[Rebase]] = {}
        for r in self.run.rebases:
            by_flow.setdefault(r.flow, []).append(r)
        out = []
        for flow, shifts in by_flow.items():
            freed = next((inj.frame.number for inj in self.run.injections
                          if inj.frame.flow == flow and inj.state_after == "freed"), None)
            live = [r for r in shifts if freed is None or r.frame <= freed]
            if not live:
                continue
            first, last = live[0], live[-1]
            text = (f"note: from frame {first.frame} on, the peer's acknowledgements of "
                    f"{flow_text(flow)} are re-based by {first.shift:+d} byte(s) onto the "
                    "emulator's stream, whose length differs from the recording's")
            if len(live) > 1:
                text += (f" ({len(live) - 1} later change(s), the last to {last.shift:+d} "
                         f"at frame {last.frame})")
            out.append(text)
        return out

    def _first_frame(self) -> int | None:
        frames = [d.frame for d in (self.first,) if d is not None]
        if self.semantic is not None and self.semantic.first is not None:
            frames.append(self.semantic.first.frame)
        return min(frames) if frames else None

    def _checksum_notes(self) -> list[str]:
        rec = self.recording
        if not rec.offload_artefacts:
            return []
        hosts = ", ".join(f"{ip_text(ip)} ({n})" for ip, n in
                          sorted(rec.offload_artefacts.items()))
        if rec.checksums is Mode.OFFLOAD:
            return [f"note: TX checksum offload artefacts on frames from {hosts} (the "
                    "capture was taken on that host): taken as the good checksums the "
                    "wire carried (--checksums strict drops them as the NIC would)"]
        if rec.checksums is Mode.STRICT:
            return [f"note: TX checksum offload artefacts on frames from {hosts}: dropped "
                    "by the NIC (--checksums strict); the default takes them as good"]
        return []

    def _semantic_text(self) -> list[str]:
        sem = self.semantic
        assert sem is not None
        who = emulated_name(self.options.emulated_stack)
        out = ["outcome per connection (recorded host | " + who + "):", f"  {FRAME_NUMBERS}"]
        for key, r in sem.recorded.items():
            e = sem.emulated[key]
            out.append(f"  {flow_text(key)} ({r.role})")
            past_mpa = self.options.emulated_stack.offloaded_state
            out.append(f"    recorded  {story_text(r, past_mpa)}")
            out.append(f"    emulated  {story_text(e, past_mpa, emulated=True)}")
        if sem.divergences:
            out.append("differences in outcome:")
            out += [f"  {d.text}" for d in sem.divergences]
        events = [ev for ev in self.run.nic_events]
        if events:
            out.append("NIC events (asynchronous events of the emulated node):")
            out += [f"  after frame {ev.after_frame} t={_t(ev.time_ns)} {ev.ae} (conn "
                    f"{ev.conn})" for ev in events]
        return out

    # ---- JSON --------------------------------------------------------------------

    def assumption_lines(self) -> list[str]:
        """``assumption: FLOW: ...`` for each thing the scripted application took as the
        recorded application's (what the recording cannot show)."""
        return [f"assumption: {flow_text(key)}: {text}" for key, text in self.run.assumptions]

    def to_json(self) -> dict[str, Any]:
        """Every divergence, extra frame, scripted verb and upcall, as plain data."""
        cmp = self.comparison
        o = self.options
        return {
            "capture": self.recording.path,
            "emulate": ip_text(o.emulate),
            "verdict": "divergence" if self.failed else "match",
            "exit": self.exit_code,
            "summary": self.verdict(),
            "options": {"on_request": o.on_request, "backlog": o.backlog,
                        "time_tolerance": o.time_tolerance_ns / 1e9,
                        "strict_offload": o.strict_offload, "semantic": o.semantic,
                        "horizon": o.horizon_ns / 1e9, "seed": o.seed},
            "frames": self.recording.total_frames,
            "frames_to_or_from_emulated_host": self.recording.relevant_frames,
            "ignored_frames": self.recording.ignored,
            "sent": cmp.sent_total,
            "compared": cmp.compared,
            "matched": cmp.matched_total,
            "first_divergence_frame": self._first_frame(),
            "divergences": [self._divergence_json(d) for d in cmp.divergences],
            "extra": [_emitted_json(e) for e in cmp.extra],
            "actions": [{"time": a.time_ns / 1e9, "frame": a.frame, "verb": a.verb,
                         "flow": flow_text(a.flow) if a.flow[2] else None,
                         "detail": a.detail, "error": a.error or None}
                        for a in self.run.actions],
            # One pass over the upcalls, each with its step: a streamed run reads them
            # back from disk, as new objects every time.
            "upcalls": [_upcall_json(step) for step in steps_for(self.run.upcalls)],
            "injections": ([_injection_json(i, self.rdma_cm_labels())
                            for i in self.run.injections]
                           if o.semantic else None),
            "checksums": o.checksums.value,
            "profile": o.emulated_stack.profile_name,
            "mpa_rev": o.emulated_stack.mpa_rev,
            **self._stacks_json(),
            "offload_artefacts": {ip_text(ip): n for ip, n in
                                  sorted(self.recording.offload_artefacts.items())},
            "first_divergence": self.first_divergence or None,
            "semantic": _semantic_json(self.semantic) if self.semantic is not None else None,
            "nic_events": [{"time": ev.time_ns / 1e9, "after_frame": ev.after_frame,
                            "conn": ev.conn, "ae": ev.ae} for ev in self.run.nic_events],
            "rebases": [{"frame": r.frame, "flow": flow_text(r.flow), "shift": r.shift}
                        for r in self.run.rebases],
            "notes": ([self.recording.damage] if self.recording.damage else [])
            + self.run.notes,
            "assumptions": [{"flow": flow_text(key), "text": text}
                            for key, text in self.run.assumptions],
        }

    @property
    def names_stacks(self) -> bool:
        """Whether the report names the stacks of the sides: any but the default stack
        emulated, or a stack named per address (a replay of the default stack, irdma,
        reads as it always did)."""
        o = self.options
        return o.emulated_stack.stack != DEFAULT_STACK or bool(o.peers)

    def stacks_line(self) -> str:
        """``stacks: 192.0.2.1 siw (emulated), 192.0.2.2 cxgb4 (recorded peer)``."""
        o = self.options
        return side_words(o.emulate, o.emulated_stack, dict(o.peers))

    def _stacks_json(self) -> dict[str, Any]:
        if not self.names_stacks:
            return {}
        o = self.options
        return {"stack": o.emulated_stack.label,
                "stacks": {ip_text(ip): {"stack": c.label,
                                         "side": "emulated" if ip == o.emulate else "peer"}
                           for ip, c in [(o.emulate, o.emulated_stack), *sorted(o.peers)]}}

    def _divergence_json(self, d: Divergence) -> dict[str, Any]:
        out = _divergence_json(d)
        if d.actual is None and d.expected is not None:
            last = self._last_injection(d.flow, d.expected.time_ns)
            if last is not None:
                out["last_injected"] = {"frame": last.frame.number,
                                        "outcome": self.injection_outcome(last)}
        return out

    # ---- pcapng -------------------------------------------------------------------

    def write_pcapng(self, path: str | Path) -> int:
        """The merged conversation: injected frames as the emulator received them and
        the emulator's frames, each with a comment. Returns the frame count."""
        verdicts: dict[int, str] = {}
        for rec, em in self.comparison.matched:
            verdicts[em.index] = f"matches frame {rec.number}"
        for d in self.comparison.divergences:
            if d.actual is not None:
                what = ", ".join(f"{f.name}" for f in d.fields) or d.kind
                ref = f" frame {d.expected.number}" if d.expected is not None else ""
                verdicts[d.actual.index] = f"{d.severity.upper()} {d.kind}{ref}: {what}"
        for em in self.comparison.extra:
            verdicts[em.index] = "extra: after the capture's end"
        items: list[tuple[int, int, int, Segment, str]] = []
        for inj in self.run.injections:
            comment = f"injected frame {inj.frame.number}: {self.injection_outcome(inj)}"
            items.append((inj.frame.time_ns, inj.frame.number, 0, inj.seg, comment))
        for em in self.run.emitted:
            comment = em.comment or "emitted"
            if em.index in verdicts:
                comment += f" | {verdicts[em.index]}"
            items.append((em.time_ns, em.after_frame, 1 + em.index, em.seg, comment))
        items.sort(key=lambda it: (it[0], it[1], it[2]))
        start = self.recording.start_ns
        with open(path, "wb") as out:
            writer = PcapngWriter(out, application="mpa-emu replay")
            writer.add_interface("replay")
            for t, _n, _o, seg, comment in items:
                writer.write(start + t, codec.encode(seg, pad=False), comment=comment)
            writer.flush()
        return len(items)


def injection_text(inj: Injection, rdma: dict[int, str] | None = None) -> str:
    """What the emulator did with one injected frame."""
    if inj.skipped:
        return inj.skipped
    parts: list[str] = []
    dropped = [r for r in inj.records if r.kind == "segment_dropped"]
    if dropped:
        parts += [f"dropped by {r.fn}: {r.fields.get('reason', 'no reason given')}"
                  for r in dropped]
    else:
        parts.append("accepted")
    if inj.state_before != inj.state_after:
        parts.append(f"state {inj.state_before or 'none'} -> {inj.state_after or 'none'}")
    elif inj.state_after:
        parts.append(f"state {inj.state_after}")
    for u in inj.upcalls:
        parts.append("upcall " + upcall_text(u))
        beside = rdma.get(id(u)) if rdma is not None else None
        if beside:
            parts.append(f"rdma_cm {beside.removeprefix('=> ')}")
    return "; ".join(parts)


FRAME_NUMBERS = ("frame numbers: a recorded event's frame is the capture's frame; an "
                 "emulated one's is the capture frame it came at (a frame fed in) or after "
                 "(what the emulator sent itself)")
"""How the stories' frame numbers read (the emulator's own frames are not in the
capture: each is numbered by the capture frame it followed)."""


def story_fields(s: Story, past_mpa: str = "OFFLOADED",
                 emulated: bool = False) -> list[tuple[str, str]]:
    """One connection's outcome as (aspect, value) pairs, in :func:`story_text`'s order;
    ``past_mpa`` names the stack's state past MPA (irdma's OFFLOADED, siw's RDMA_MODE,
    cxgb4's FPDU_MODE). An ``emulated`` story's own events are "after frame N" (see
    :data:`FRAME_NUMBERS`), the frames fed in "at frame N"."""
    mpa_frames = ", ".join(f"{m.kind} rev {m.rev} {_flag_letters(m.flags)}" for m in s.sent)
    at = "at or after frame" if emulated else "at frame"
    out = [("MPA sent", mpa_frames or "none"), ("answer", s.answer or "none"),
           (past_mpa, f"{at} {s.offloaded}" if s.offloaded else "never"),
           ("ESTABLISHED", f"at frame {s.established}" if s.established else "never")]
    if s.upcalls:
        out.append(("upcalls", ", ".join(name for _n, name in s.upcalls)))
        out.append(("rdma_cm", ", ".join(rdma_cm_of(name) for _n, name in s.upcalls)))
    if s.nic:
        nic_at = "after frame" if emulated else "at frame"
        out.append(("NIC", ", ".join(f"{ev} {nic_at} {n}" for n, ev in s.nic)))
    own = emulated and s.close is not None and s.close[1] == "host"
    out.append(("first close", f"{s.close[2]} from the {s.close[1]} "
                f"{'after' if own else 'at'} frame {s.close[0]}" if s.close else "none"))
    return out


def story_text(s: Story, past_mpa: str = "OFFLOADED", emulated: bool = False) -> str:
    """One connection's outcome in one line (``emulated``: see :func:`story_fields`)."""
    parts = []
    for name, value in story_fields(s, past_mpa, emulated):
        if name == "MPA sent":
            parts.append(f"{name}: {value}")
        elif name == "first close":
            parts.append(f"first close: {value}" if value != "none" else "no close")
        else:
            parts.append(f"{name} {value}")
    return "; ".join(parts)


def _flag_letters(flags: int) -> str:
    letters = "".join(ch for bit, ch in ((0x80, "M"), (0x40, "C"), (0x20, "R"))
                      if flags & bit)
    return f"[{letters or '-'}]"


def _story_json(s: Story) -> dict[str, Any]:
    return {"role": s.role,
            "mpa": [{"frame": m.frame, "kind": m.kind, "rev": m.rev, "flags": m.flags,
                     "length": m.length, "private_data": m.private_data.hex(),
                     "ird": m.rtr.ird if m.rtr else None, "ord": m.rtr.ord if m.rtr else None,
                     "p2p": m.rtr.peer_to_peer if m.rtr else None} for m in s.sent],
            "answer": s.answer or None, "offloaded": s.offloaded or None,
            "established": s.established or None,
            "upcalls": [{"frame": n, "upcall": u, "rdma_cm": rdma_cm_of(u)}
                        for n, u in s.upcalls],
            "nic": [{"frame": n, "event": ev} for n, ev in s.nic],
            "close": ({"frame": s.close[0], "by": s.close[1], "how": s.close[2]}
                      if s.close else None)}


def _semantic_json(sem: SemanticVerdict) -> dict[str, Any]:
    return {"same_outcome": not sem.divergences,
            "divergences": [{"frame": d.frame, "flow": flow_text(d.flow),
                             "aspect": d.aspect, "text": d.text} for d in sem.divergences],
            "connections": [{"flow": flow_text(k), "recorded": _story_json(r),
                             "emulated": _story_json(sem.emulated[k])}
                            for k, r in sem.recorded.items()]}


def _frame_json(f: Frame) -> dict[str, Any]:
    s = f.seg
    return {"frame": f.number, "time": f.time_ns / 1e9, "flags": flags_joined(s.flags),
            "seq": s.seq, "ack": s.ack, "window": s.window, "options": s.options.hex(),
            "payload": s.payload.hex(), "summary": segment_line(s)}


def _upcall_json(step: UlpStep) -> dict[str, Any]:
    u = step.upcall
    ulp = step.as_dict()
    return {"time": u.time_ns / 1e9, "event": u.event.name, "conn": u.conn,
            "status": u.status, "private_data_len": u.private_data_len, "ird": u.ird,
            "ord": u.ord, "rdma_cm": ulp["rdma_cm"], "iw_cm_state": ulp["iw_cm_state"],
            "rdma_cm_note": step.note or None}


def _emitted_json(e: Emitted) -> dict[str, Any]:
    s = e.seg
    return {"emitted": e.index, "time": e.time_ns / 1e9, "flags": flags_joined(s.flags),
            "seq": e.mapped_seq, "emulator_seq": s.seq, "ack": s.ack, "window": s.window,
            "options": s.options.hex(), "payload": s.payload.hex(), "summary": segment_line(s),
            "comment": e.comment, "state": e.state, "conn": e.conn}


def _divergence_json(d: Divergence) -> dict[str, Any]:
    return {"kind": d.kind, "severity": d.severity, "frame": d.frame,
            "flow": flow_text(d.flow),
            "expected": _frame_json(d.expected) if d.expected is not None else None,
            "actual": _emitted_json(d.actual) if d.actual is not None else None,
            "fields": [{"name": f.name, "expected": f.expected, "actual": f.actual}
                       for f in d.fields],
            "state": d.state, "why": d.why or None}


def _injection_json(inj: Injection, rdma: dict[int, str]) -> dict[str, Any]:
    return {"frame": inj.frame.number, "time": inj.frame.time_ns / 1e9,
            "kind": shape_text(inj.frame.seg), "ack_translated": (inj.seg.ack != inj.frame.seg.ack),
            "outcome": injection_text(inj, rdma), "state_before": inj.state_before,
            "state_after": inj.state_after,
            "trace": [record_text(r) for r in inj.records],
            "upcalls": [upcall_text(u) for u in inj.upcalls],
            "rdma_cm": [rdma.get(id(u), "") for u in inj.upcalls]}


__all__ = ["ReplayOptions", "ReplayReport", "injection_text"]
