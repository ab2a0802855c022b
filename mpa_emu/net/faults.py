"""What the virtual wire may do to a frame: seeded random faults and named-frame drops.

Random faults (loss, duplication, reordering, corruption) draw from the wire's own
``random.Random`` seeded from the network seed, so a scenario replays identically.
Named-frame rules ("drop the first SYN-ACK", "drop the 2nd MPA request") are predicates
over the decoded :class:`~mpa_emu.wire.segment.Segment`, counted in the order frames reach
the wire (retransmissions count: the 2nd MPA request may be the first one's resend).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from mpa_emu.errors import ConfigError
from mpa_emu.wire import mpa
from mpa_emu.wire.segment import ACK, FIN, RST, SYN, Segment

SegmentPredicate = Callable[[Segment], bool]


@dataclass(frozen=True, slots=True)
class FaultConfig:
    """Probabilities (0.0 to 1.0) of each random fault, applied per frame on the wire.

    ``reorder`` holds a frame back by ``reorder_delay_ns`` on top of the latency, so
    frames sent after it overtake it. ``corrupt`` flips one bit inside the IP packet; the
    receiving NIC finds a bad checksum and drops the frame.
    """

    loss: float = 0.0
    duplicate: float = 0.0
    reorder: float = 0.0
    corrupt: float = 0.0
    reorder_delay_ns: int = 50_000
    any: bool = field(init=False, repr=False, compare=False)
    """True when at least one random fault can happen (computed once: the wire asks it
    for every frame)."""

    def __post_init__(self) -> None:
        for name in ("loss", "duplicate", "reorder", "corrupt"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not 0.0 <= value <= 1.0:
                raise ConfigError(f"fault probability {name}={value!r} must be a number "
                                  "within 0..1")
        delay = self.reorder_delay_ns
        if isinstance(delay, bool) or not isinstance(delay, int) or delay < 0:
            raise ConfigError(f"reorder_delay_ns must be an integer >= 0, got {delay!r}")
        object.__setattr__(self, "any",
                           bool(self.loss or self.duplicate or self.reorder or self.corrupt))


def frame_kind(seg: Segment) -> str:
    """A short name for what a segment is, as used by drop rules and the ladder.

    One of ``"RST"``, ``"SYN"``, ``"SYN-ACK"``, ``"MPA request"``, ``"MPA reply"``,
    ``"MPA reject"``, ``"FIN"``, ``"data"``, ``"ACK"`` or ``"other"``. An MPA frame
    carrying FIN (irdma's reject) is an ``"MPA reject"``.
    """
    flags = seg.flags
    if flags & RST:
        return "RST"
    if flags & SYN:
        return "SYN-ACK" if flags & ACK else "SYN"
    payload = seg.payload
    if mpa.looks_like_mpa(payload):
        if payload[: mpa.KEY_SIZE] == mpa.KEY_REQ:
            return "MPA request"
        return "MPA reject" if payload[mpa.KEY_SIZE] & mpa.FLAG_REJECT else "MPA reply"
    if flags & FIN:
        return "FIN"
    if payload:
        return "data"
    if flags & ACK:
        return "ACK"
    return "other"


FRAME_KINDS = ("SYN", "SYN-ACK", "ACK", "MPA request", "MPA reply", "MPA reject", "FIN",
               "RST", "data", "other")


def is_kind(kind: str) -> SegmentPredicate:
    """A predicate matching segments of one :func:`frame_kind`."""
    if kind not in FRAME_KINDS:
        raise ConfigError(f"unknown frame kind {kind!r}; expected one of {', '.join(FRAME_KINDS)}")

    def match(seg: Segment) -> bool:
        return frame_kind(seg) == kind

    return match


@dataclass(slots=True)
class DropRule:
    """Drop the ``nth`` frame (1-based, counted on the wire) matching ``match``.

    ``count`` frames are dropped starting from the ``nth`` match (``count=2`` drops the
    nth and the next one). ``sender`` limits the rule to frames sent by one host name.
    ``seen`` and ``dropped`` count what the rule has matched so far.
    """

    match: SegmentPredicate
    description: str
    nth: int = 1
    count: int = 1
    sender: str | None = None
    seen: int = field(default=0, init=False)
    dropped: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if self.nth < 1:
            raise ConfigError(f"nth is 1-based, got {self.nth}")
        if self.count < 1:
            raise ConfigError(f"count must be >= 1, got {self.count}")

    def applies(self, seg: Segment, sender: str) -> bool:
        """Count one frame on the wire; True when this frame must be dropped."""
        if self.sender is not None and sender != self.sender:
            return False
        if not self.match(seg):
            return False
        self.seen += 1
        if self.nth <= self.seen < self.nth + self.count:
            self.dropped += 1
            return True
        return False


_ORDINALS = {1: "first", 2: "2nd", 3: "3rd"}


def drop_nth(kind: str, nth: int = 1, *, count: int = 1, sender: str | None = None) -> DropRule:
    """A rule dropping the ``nth`` frame of one :func:`frame_kind`, e.g.
    ``drop_nth("SYN-ACK")`` (the first SYN-ACK) or ``drop_nth("MPA request", 2)``."""
    ordinal = _ORDINALS.get(nth, f"{nth}th")
    who = f" from {sender}" if sender else ""
    return DropRule(is_kind(kind), f"the {ordinal} {kind}{who}", nth=nth, count=count,
                    sender=sender)
