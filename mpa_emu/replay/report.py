"""What replay tells the user: a one-line verdict, the first divergence in readable
form, every divergence as JSON, and the merged conversation as pcapng."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpa_emu import codec
from mpa_emu.addr import ip_text
from mpa_emu.capture import PcapngWriter
from mpa_emu.cm.events import Upcall
from mpa_emu.replay.compare import Comparison, Divergence, shape_text
from mpa_emu.replay.engine import MASK32, Emitted, Injection, RunResult
from mpa_emu.replay.recording import FlowKey, Frame, Recording, describe, flag_names
from mpa_emu.segment import Segment
from mpa_emu.trace import TraceRecord


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    """The command line's options, as values."""

    emulate: bytes
    on_request: str = "auto"
    backlog: int = 4096
    time_tolerance_ns: int = 10_000_000
    strict_offload: bool = False
    semantic: bool = False
    horizon_ns: int = 400_000_000_000
    seed: int = 0


def _t(ns: int) -> str:
    return f"{ns / 1e9:.6f}"


def flow_text(key: FlowKey) -> str:
    def ep(ip: bytes, port: int) -> str:
        text = ip_text(ip)
        return f"[{text}]:{port}" if len(ip) == 16 else f"{text}:{port}"
    vlan = f" vlan {key[4]}" if key[4] is not None else ""
    return f"{ep(key[0], key[1])} <-> {ep(key[2], key[3])}{vlan}"


def _emitted_text(em: Emitted) -> str:
    text = describe(em.seg)
    if em.seq_delta:
        text = text.replace(f"seq={em.seg.seq} ", f"seq={em.mapped_seq} ", 1)
    return text


def record_text(rec: TraceRecord) -> str:
    """A trace record in one line: function, kind and its fields."""
    fields = " ".join(f"{k}={v.hex() if isinstance(v, bytes) else v}"
                      for k, v in sorted(rec.fields.items()))
    return f"{rec.fn}: {rec.kind}" + (f" {fields}" if fields else "")


def upcall_text(up: Upcall) -> str:
    status = f" status {up.status}" if up.status else ""
    pd = f" pdata_len {up.private_data_len}" if up.private_data_len else ""
    return f"{up.event.name}{status}{pd} (conn {up.conn})"


@dataclass(slots=True)
class ReplayReport:
    """The outcome of one replay."""

    recording: Recording
    run: RunResult
    comparison: Comparison
    options: ReplayOptions

    @property
    def failed(self) -> bool:
        """A failing divergence, or an emulator failure before the capture's end."""
        return bool(self.comparison.errors) or self.run.failed_during_capture

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
        tail = (f"{len(cmp.matched)}/{cmp.compared} frames of {ip} matched, "
                f"{len(cmp.warnings)} NIC warning(s), {len(cmp.extra)} extra frame(s) "
                "after the capture")
        first = self.first
        if first is None and self.run.failed_during_capture:
            return f"EMULATOR FAILURE at frame {self.run.failure_frame}: {tail}"
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
        the kernel function behind the emitted frame."""
        d = self.first
        if d is None:
            return ""
        lines = [f"first divergence: {d.kind} at frame {d.frame}, flow {flow_text(d.flow)}"]
        if d.expected is not None:
            lines.append(f"  expected  frame {d.expected.number} t={_t(d.expected.time_ns)}  "
                         f"{describe(d.expected.seg)}")
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
                lines.append(f"  last in   frame {last.frame.number}: {injection_text(last)}")
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
        first = self.first_text()
        if first:
            out.append(first)
        if self.recording.damage:
            out.append(f"note: {self.recording.damage}")
        if self.comparison.compared == 0 and self.first is None:
            out.append(f"note: the capture holds no frame sent by "
                       f"{ip_text(self.recording.ip)}: the match only says that the "
                       "emulator stayed silent while the capture lasted")
        out += [f"note: {n}" for n in self.run.notes]
        out += [f"note: {a.verb} at frame {a.frame} refused: {a.error}"
                for a in self.run.actions if a.error]
        if self.comparison.semantic:
            out.append("injected frames:")
            out += [f"  frame {inj.frame.number} t={_t(inj.frame.time_ns)} "
                    f"{shape_text(inj.frame.seg)}: {injection_text(inj)}"
                    for inj in self.run.injections]
            out.append("application (verbs and upcalls):")
            timeline = [(u.time_ns, 1, f"upcall {upcall_text(u)}") for u in self.run.upcalls]
            timeline += [(a.time_ns, 0, f"{a.verb} ({a.detail})"
                          + (f" refused: {a.error}" if a.error else ""))
                         for a in self.run.actions if a.verb != "listen"]
            out += [f"  t={_t(t)} {text}" for t, _o, text in sorted(timeline)]
        return "\n".join(out)

    # ---- JSON --------------------------------------------------------------------

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
            "frames_to_or_from_emulated_host": len(self.recording.frames),
            "ignored_frames": self.recording.ignored,
            "compared": cmp.compared,
            "matched": len(cmp.matched),
            "first_divergence_frame": self.first.frame if self.first else None,
            "divergences": [self._divergence_json(d) for d in cmp.divergences],
            "extra": [_emitted_json(e) for e in cmp.extra],
            "actions": [{"time": a.time_ns / 1e9, "frame": a.frame, "verb": a.verb,
                         "flow": flow_text(a.flow) if a.flow[2] else None,
                         "detail": a.detail, "error": a.error or None}
                        for a in self.run.actions],
            "upcalls": [{"time": u.time_ns / 1e9, "event": u.event.name, "conn": u.conn,
                         "status": u.status, "private_data_len": u.private_data_len,
                         "ird": u.ird, "ord": u.ord} for u in self.run.upcalls],
            "injections": ([_injection_json(i) for i in self.run.injections]
                           if o.semantic else None),
            "notes": ([self.recording.damage] if self.recording.damage else [])
            + self.run.notes,
        }

    def _divergence_json(self, d: Divergence) -> dict[str, Any]:
        out = _divergence_json(d)
        if d.actual is None and d.expected is not None:
            last = self._last_injection(d.flow, d.expected.time_ns)
            if last is not None:
                out["last_injected"] = {"frame": last.frame.number,
                                        "outcome": injection_text(last)}
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
            comment = f"injected frame {inj.frame.number}: {injection_text(inj)}"
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


def injection_text(inj: Injection) -> str:
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
    parts += ["upcall " + upcall_text(u) for u in inj.upcalls]
    return "; ".join(parts)


def _frame_json(f: Frame) -> dict[str, Any]:
    s = f.seg
    return {"frame": f.number, "time": f.time_ns / 1e9, "flags": flag_names(s.flags),
            "seq": s.seq, "ack": s.ack, "window": s.window, "options": s.options.hex(),
            "payload": s.payload.hex(), "summary": describe(s)}


def _emitted_json(e: Emitted) -> dict[str, Any]:
    s = e.seg
    return {"emitted": e.index, "time": e.time_ns / 1e9, "flags": flag_names(s.flags),
            "seq": e.mapped_seq, "emulator_seq": s.seq, "ack": s.ack, "window": s.window,
            "options": s.options.hex(), "payload": s.payload.hex(), "summary": describe(s),
            "comment": e.comment, "state": e.state, "conn": e.conn}


def _divergence_json(d: Divergence) -> dict[str, Any]:
    return {"kind": d.kind, "severity": d.severity, "frame": d.frame,
            "flow": flow_text(d.flow),
            "expected": _frame_json(d.expected) if d.expected is not None else None,
            "actual": _emitted_json(d.actual) if d.actual is not None else None,
            "fields": [{"name": f.name, "expected": f.expected, "actual": f.actual}
                       for f in d.fields],
            "state": d.state, "why": d.why or None}


def _injection_json(inj: Injection) -> dict[str, Any]:
    return {"frame": inj.frame.number, "time": inj.frame.time_ns / 1e9,
            "kind": shape_text(inj.frame.seg), "ack_translated": (inj.seg.ack != inj.frame.seg.ack),
            "outcome": injection_text(inj), "state_before": inj.state_before,
            "state_after": inj.state_after,
            "trace": [record_text(r) for r in inj.records],
            "upcalls": [upcall_text(u) for u in inj.upcalls]}


__all__ = ["MASK32", "ReplayOptions", "ReplayReport", "injection_text"]
