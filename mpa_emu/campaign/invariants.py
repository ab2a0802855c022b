"""The invariants every fuzz mode checks on a CM core, and the core configurations
(those of the fuzzed stack's :class:`~mpa_emu.stacks.base.FuzzModel`:
:data:`mpa_emu.campaign.generators.FUZZED`).

- ``escape``: no exception but :class:`CmError` from a verb leaves ``receive``,
  ``handle_timer`` or a verb; a refused verb changes nothing (irdma_accept's own error
  path aside);
- ``frame``: every emitted frame encodes, decodes back to the same segment with good
  IPv4 and TCP checksums, and an MPA frame in it parses (RFC 5044 section 7.1);
- ``reachability``: no node is seen in a state the transition table marks unreachable,
  and every state change is allowed by a reachable row;
- ``timer`` and ``leak`` are checked by the modes once their script ran (see
  :data:`BOUND_NS`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mpa_emu.campaign.generators import FUZZED, S_NS
from mpa_emu.errors import MpaEmuError
from mpa_emu.stacks.contract.api import CoreApi
from mpa_emu.stacks.contract.trace import Trace
from mpa_emu.wire import codec, mpa
from mpa_emu.wire.segment import Segment

BOUND_NS = 3000 * S_NS
"""Virtual time run after the script; every timer must be gone by then."""


def make_core(host: str, mac: bytes, index: int, *, seed: int, trace: Trace) -> CoreApi:
    """A core of the fuzzed stack with configuration ``index`` (the scripts choose
    among :attr:`FuzzModel.configs <mpa_emu.stacks.base.FuzzModel.configs>`)."""
    return FUZZED.make_core(host, mac, index, seed=seed, trace=trace)


@dataclass(frozen=True, slots=True)
class Violation:
    """A broken invariant: which one and what happened."""

    invariant: str
    message: str


class Broken(MpaEmuError):
    """Raised inside a run when an invariant breaks."""

    def __init__(self, violation: Violation) -> None:
        super().__init__(violation.message)
        self.violation = violation


@dataclass
class CoreRun:
    """One core under test: its trace, the planted defect, the clock, the frames kept
    for a capture, the nodes the kernel itself leaves hung."""

    core: CoreApi
    trace: Trace
    plant: str | None
    now: int = 0
    frames: list[tuple[int, bytes, bool]] | None = None  # (time, bytes, sent_mark)
    sent_mark: bool = True
    """The mark of the frames this core emits in ``frames`` (False for the peer's)."""
    stuck: set[int] = field(default_factory=set)

    def guarded(self, what: str, call: Callable[[], object]) -> None:
        try:
            call()
        except Broken:
            raise
        except Exception as exc:
            raise Broken(Violation("escape", f"{type(exc).__name__} escaped {what}: "
                                    f"{exc}")) from None

    def core_timer(self) -> None:
        """``handle_timer`` at the run's clock."""
        self.core.handle_timer(self.now)

    def feed(self, seg: Segment) -> None:
        if self.frames is not None:
            self.frames.append((self.now, codec.encode(seg), False))
        self.guarded(f"receive({seg.flag_text})", lambda: self.core.receive(seg, self.now))
        self.drain()

    def tick(self, now: int) -> None:
        self.now = now
        self.guarded("handle_timer", lambda: self.core.handle_timer(now))
        self.drain()

    def drain(self) -> list[bytes]:
        """Check the frames the core emitted and the states it reached; the frames'
        bytes as they go on the wire."""
        out = [self.check_frame(tx.segment) for tx in self.core.frames_to_send()]
        while self.core.next_event() is not None:
            pass
        self.check_states()
        return out

    def check_frame(self, seg: Segment) -> bytes:
        try:
            raw = codec.encode(seg)
        except codec.EncodeError as exc:
            raise Broken(Violation("frame", f"emitted segment does not encode: {exc}")) \
                from None
        if self.plant == "reply-checksum" and _is_accept_reply(seg.payload):
            # the TCP checksum: Ethernet 14 + IPv4 20 bytes + offset 16 (RFC 9293 3.1)
            raw = raw[:50] + bytes([raw[50] ^ 0xFF, raw[51]]) + raw[52:]
        if self.frames is not None:
            self.frames.append((self.now, raw, self.sent_mark))
        try:
            back = codec.decode(raw)
        except codec.DecodeError as exc:
            raise Broken(Violation("frame", f"emitted {seg.flag_text} does not decode: "
                                    f"{exc}")) from None
        if back != seg:
            raise Broken(Violation("frame", f"emitted {seg.flag_text} decodes to a "
                                    "different segment"))
        if mpa.looks_like_mpa(seg.payload):
            try:
                mpa.decode_frame(seg.payload)
            except mpa.MpaFormatError as exc:
                raise Broken(Violation("frame", f"emitted MPA frame does not parse: "
                                        f"{exc}")) from None
        return raw

    def check_states(self) -> None:
        for rec in self.trace.records:
            if rec.kind == "kernel_bug" and rec.fields.get("conn") is not None:
                self.stuck.add(rec.fields["conn"])
        for c in self.core.conns():
            view = self.core.node(c)
            # a node the kernel itself leaves mid-call (the irdma_process_options loop
            # on a zero-length option) keeps the transient state it hung in
            if view is not None and c not in self.stuck and FUZZED.held_unreachable(view):
                raise Broken(Violation("reachability", f"node {c} held in "
                                        f"{view.state.name}, a state the table marks "
                                        "unreachable"))
        for rec in self.trace.records:
            if rec.kind == "state_changed":
                old, new = rec.fields["old"], rec.fields["new"]
                if not FUZZED.change_allowed(old, new):
                    raise Broken(Violation("reachability", f"{rec.fn}: {old} -> "
                                            f"{new} is allowed by no reachable row"))
        self.trace.records.clear()


def _is_accept_reply(payload: bytes) -> bool:
    if not mpa.looks_like_mpa(payload):
        return False
    try:
        frame = mpa.decode_frame(payload)
    except mpa.MpaFormatError:
        return False
    return not frame.request and not frame.reject


def refused(core: CoreApi, verb: str, conn: int, target: Any, conns: list[int],
            before: list[Any], side: str = "") -> None:
    """After a verb raised :class:`CmError`: the node table (of ``side``) must be as
    it was, unless the stack's own error path changes it
    (:attr:`FuzzModel.refusal_changes <mpa_emu.stacks.base.FuzzModel.refusal_changes>`:
    irdma_accept releases the node before returning -EINVAL/-ECONNRESET)."""
    if not FUZZED.refusal_changes(verb, target) \
            and ([core.node(c) for c in conns] != before or core.conns() != conns):
        raise Broken(Violation("escape", f"refused {verb} on conn {conn}"
                                + (f" of {side}" if side else "")
                                + " changed the node table")) from None
