"""Compare the frames the emulator sent with the frames the recorded host sent.

Per flow, in order: TCP flags, seq (through the flow's ISN offset), ack, window,
options, payload bytes, and time within the tolerance. A recorded frame with no emitted
counterpart is *missing*; an emitted frame with no recorded counterpart is *unexpected*
while the capture still runs (the capture's silence is the proof) and *extra* after it.

Frames only the NIC's QP produces after OFFLOADED (the RTR, acknowledgements of data,
the QP's FIN or RST) are compared as warnings: their exact shape belongs to the NIC
model. The MPA reply a passive node sends at accept is built by the CM
(``irdma_accept`` -> ``irdma_cm_build_mpa_frame``) and is always compared.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mpa_emu.replay.engine import Emitted, RunResult
from mpa_emu.replay.recording import Frame, Recording, offload_classes
from mpa_emu.views.describe import flags_joined
from mpa_emu.wire.flow import FlowKey
from mpa_emu.wire.mpa import mpa_kind
from mpa_emu.wire.segment import ACK, FIN, RST, SYN, Segment

_LOOKAHEAD = 4


def _padded(opts: bytes) -> bytes:
    return opts + b"\x00" * (-len(opts) % 4)


@dataclass(frozen=True, slots=True)
class FieldDiff:
    """One differing field: its name and both values in readable form."""

    name: str
    expected: str
    actual: str


def field_diffs(rec: Frame, em: Emitted, tolerance_ns: int, *, semantic: bool = False
                ) -> list[FieldDiff]:
    """Fields in which the emitted frame differs from the recorded one."""
    r, a = rec.seg, em.seg
    diffs: list[FieldDiff] = []
    if semantic:
        if shape(r) != shape(a):
            diffs.append(FieldDiff("kind", shape_text(r), shape_text(a)))
        return diffs
    if r.flags != a.flags:
        diffs.append(FieldDiff("flags", flags_joined(r.flags), flags_joined(a.flags)))
    if r.seq != em.mapped_seq:
        diffs.append(FieldDiff("seq", str(r.seq), str(em.mapped_seq)))
    if r.ack != a.ack:
        diffs.append(FieldDiff("ack", str(r.ack), str(a.ack)))
    if r.window != a.window:
        diffs.append(FieldDiff("window", str(r.window), str(a.window)))
    if _padded(r.options) != _padded(a.options):
        diffs.append(FieldDiff("options", r.options.hex() or "none", a.options.hex() or "none"))
    if r.payload != a.payload:
        diffs.append(_payload_diff(r.payload, a.payload))
    dt = em.time_ns - rec.time_ns
    if abs(dt) > tolerance_ns:
        diffs.append(FieldDiff("time", f"{rec.time_ns / 1e9:.6f}",
                               f"{em.time_ns / 1e9:.6f} ({dt / 1e9:+.6f} s)"))
    return diffs


def _payload_diff(exp: bytes, act: bytes) -> FieldDiff:
    if len(exp) != len(act):
        return FieldDiff("payload", f"{len(exp)} bytes", f"{len(act)} bytes")
    i = next(i for i in range(len(exp)) if exp[i] != act[i])
    return FieldDiff(f"payload byte {i}", f"0x{exp[i]:02x}", f"0x{act[i]:02x}")


def shape(seg: Segment) -> tuple[int, str]:
    """What a segment means, without numbers: SYN/FIN/RST/ACK bits and the MPA kind."""
    kind = mpa_kind(seg.payload)
    return seg.flags & (SYN | FIN | RST | ACK), "data" if kind == "data" else kind


def shape_text(seg: Segment) -> str:
    bits, kind = shape(seg)
    return flags_joined(bits) + (f" + {kind}" if kind else "")


def _same_frame(rec: Frame, em: Emitted, semantic: bool) -> bool:
    if semantic:
        return shape(rec.seg) == shape(em.seg)
    r, a = rec.seg, em.seg
    return (r.flags == a.flags and r.seq == em.mapped_seq and r.ack == a.ack
            and r.payload == a.payload)


@dataclass(slots=True)
class Divergence:
    """One disagreement between the recording and the emulator."""

    kind: str
    """"mismatch", "missing" or "unexpected"."""
    severity: str
    """"error" or "warning" (NIC frames after OFFLOADED without --strict-offload)."""
    frame: int
    """Capture frame number: the recorded frame, or for an unexpected frame the last
    capture frame before it was emitted."""
    flow: FlowKey
    expected: Frame | None
    actual: Emitted | None
    fields: list[FieldDiff] = field(default_factory=list)
    state: str = ""
    why: str = ""

    def sort_key(self) -> tuple[int, int, int]:
        order = {"mismatch": 0, "missing": 0, "unexpected": 1}[self.kind]
        idx = self.actual.index if self.actual is not None else 0
        return (self.frame, order, idx)


@dataclass(slots=True)
class Comparison:
    """Result of comparing one run with its recording."""

    matched: list[tuple[Frame, Emitted]]
    divergences: list[Divergence]
    extra: list[Emitted]
    compared: int
    semantic: bool
    matched_count: int | None = None
    """How many frames matched, when a streamed run kept only the count (``matched`` is
    then empty)."""
    sent: int | None = None
    """How many frames the recorded host sent; ``compared`` leaves out the pure ACKs in
    semantic mode. None: the same as ``compared``."""

    @property
    def sent_total(self) -> int:
        """How many frames the recorded host sent in the capture."""
        return self.compared if self.sent is None else self.sent

    @property
    def matched_total(self) -> int:
        """How many recorded frames matched their emitted counterpart."""
        return len(self.matched) if self.matched_count is None else self.matched_count

    @property
    def errors(self) -> list[Divergence]:
        return [d for d in self.divergences if d.severity == "error"]

    @property
    def warnings(self) -> list[Divergence]:
        return [d for d in self.divergences if d.severity == "warning"]


def _state_at(states: list[tuple[int, str]], time_ns: int) -> str:
    state = ""
    for t, s in states:
        if t > time_ns:
            break
        state = s
    return state


def compare(rec: Recording, run: RunResult, *, tolerance_ns: int, strict_offload: bool,
            semantic: bool, offloaded_state: str = "OFFLOADED") -> Comparison:
    """Align and compare every flow of ``rec`` with what the emulator sent in ``run``;
    ``offloaded_state`` is the emulated stack's state past MPA."""
    emitted_by_flow: dict[FlowKey, list[Emitted]] = {}
    for em in run.emitted:
        emitted_by_flow.setdefault(em.flow, []).append(em)
    matched: list[tuple[Frame, Emitted]] = []
    divergences: list[Divergence] = []
    extra: list[Emitted] = []
    compared = 0
    sent = 0
    for key in list(rec.flows) + [k for k in emitted_by_flow if k not in rec.flows]:
        flow = rec.flows.get(key)
        recorded_all = flow.frames if flow is not None else []
        expected = [f for f in recorded_all if f.outbound]
        sent += len(expected)
        actual = emitted_by_flow.get(key, [])
        if not semantic and len(expected) == len(actual) and not any(
                field_diffs(e, a, tolerance_ns) for e, a in zip(expected, actual, strict=True)):
            matched.extend(zip(expected, actual, strict=True))  # the common case, done
            compared += len(expected)
            continue
        rec_nic = offload_classes([(f.outbound, f.seg) for f in recorded_all])
        frun = run.flows.get(key)
        em_nic = offload_classes(frun.log) if frun is not None else []
        states = frun.states if frun is not None else []
        exp_nic = dict(zip((f.number for f in expected), rec_nic, strict=True))
        act_nic = dict(zip((e.index for e in actual), em_nic, strict=False))
        if semantic:
            expected = [f for f in expected if not _pure_ack(f.seg)]
            actual = [e for e in actual if not _pure_ack(e.seg)]
        compared += len(expected)

        # Semantic mode: NIC frames the node never got to send because its CM never
        # reached OFFLOADED are the CM's divergence, not the NIC model's.
        cm_stuck = semantic and not any(s == offloaded_state for _t, s in states)

        def severity(nic: bool, stuck: bool = cm_stuck) -> str:
            return "warning" if nic and not strict_offload and not stuck else "error"

        i = j = 0
        while i < len(expected) or j < len(actual):
            e = expected[i] if i < len(expected) else None
            a = actual[j] if j < len(actual) else None
            if e is not None and a is not None:
                diffs = field_diffs(e, a, tolerance_ns, semantic=semantic)
                if not diffs:
                    matched.append((e, a))
                    i += 1
                    j += 1
                    continue
                skip_e = next((k for k in range(1, _LOOKAHEAD + 1) if i + k < len(expected)
                               and _same_frame(expected[i + k], a, semantic)), None)
                skip_a = next((k for k in range(1, _LOOKAHEAD + 1) if j + k < len(actual)
                               and _same_frame(e, actual[j + k], semantic)), None)
                if _same_frame(e, a, semantic) or (skip_e is None and skip_a is None):
                    nic = exp_nic.get(e.number, False) or act_nic.get(a.index, False)
                    divergences.append(Divergence("mismatch", severity(nic), e.number, key, e,
                                                  a, diffs, a.state or a.comment))
                    i += 1
                    j += 1
                    continue
                if skip_a is not None and (skip_e is None or skip_a <= skip_e):
                    a = None  # the emitted frames before the match are unexpected
                    e = None
                    for k in range(skip_a):
                        em = actual[j + k]
                        d = _unexpected(em, key, run, extra,
                                        severity(act_nic.get(em.index, False)))
                        if d is not None:
                            divergences.append(d)
                    j += skip_a
                    continue
                for k in range(skip_e or 0):
                    ex = expected[i + k]
                    divergences.append(Divergence(
                        "missing", severity(exp_nic.get(ex.number, False)), ex.number, key,
                        ex, None, [], _state_at(states, ex.time_ns)))
                i += skip_e or 0
                continue
            if e is not None:
                divergences.append(Divergence(
                    "missing", severity(exp_nic.get(e.number, False)), e.number, key, e,
                    None, [], _state_at(states, e.time_ns)))
                i += 1
            elif a is not None:
                d = _unexpected(a, key, run, extra, severity(act_nic.get(a.index, False)))
                if d is not None:
                    divergences.append(d)
                j += 1
    divergences.sort(key=Divergence.sort_key)
    extra.sort(key=lambda em: em.index)
    return Comparison(matched, divergences, extra, compared, semantic, sent=sent)


def _pure_ack(seg: Segment) -> bool:
    return not seg.payload and not seg.flags & (SYN | FIN | RST)


def _unexpected(em: Emitted, key: FlowKey, run: RunResult, extra: list[Emitted],
                severity: str) -> Divergence | None:
    """A Divergence for a frame sent while the capture ran; None (listed as extra) after."""
    if em.after_frame >= run.last_frame:
        extra.append(em)
        return None
    return Divergence("unexpected", severity, em.after_frame, key, None, em, [], em.state,
                      "the capture shows no such frame")
