"""What inspect knows of a connection's upper protocol: its name and how it was told,
the private data each way decoded, the negotiated values, the messages as messages,
and the diagnoses in the protocol's own terms. One object per connection, the same in
text, JSON and HTML."""

from __future__ import annotations

from dataclasses import dataclass, field

from mpa_emu.wire.ulp.values import Decoded, FieldValue

MAX_MESSAGES = 400
"""Messages listed per connection (all are counted and checked)."""


@dataclass(slots=True)
class UlpBlock:
    """A decoded private data block or message: its frame (and last frame), side,
    size, kind, one line of text and its fields."""

    frame: int
    side: str
    kind: str
    text: str
    fields: dict[str, FieldValue] = field(default_factory=dict)
    size: int = 0
    last_frame: int = 0
    segments: int = 0
    msn: int | None = None

    @classmethod
    def of(cls, value: Decoded, frame: int, side: str, **extra: int | None) -> UlpBlock:
        """The block of a decoded value."""
        out = cls(frame, side, value.kind, value.text(), value.fields())
        for key, v in extra.items():
            setattr(out, key, v)
        return out


@dataclass(slots=True)
class UlpDiagnosis:
    """A cause in the upper protocol's terms: the catalogue key, one sentence, the
    frames that show it (the negotiation's and the offending message's), the negotiated
    value and the frame that broke it, what the application sees, what the capture
    cannot prove, and the fix."""

    cause: str
    severity: str
    summary: str
    evidence: list[int]
    negotiated: str = ""
    negotiated_frame: int | None = None
    broken_frame: int | None = None
    event: str = ""
    assumption: str = ""
    fix: str = ""


@dataclass(slots=True)
class UlpReport:
    """One connection's upper protocol (see the module docstring). ``protocol`` is a key
    of :data:`mpa_emu.wire.ulp.PROTOCOL_NAMES`; ``private_data`` holds the request's and
    reply's ULP private data in hex when they are of no known format."""

    protocol: str
    name: str
    recognised_by: str
    request: UlpBlock | None = None
    reply: UlpBlock | None = None
    negotiated: dict[str, FieldValue] = field(default_factory=dict)
    negotiated_text: list[str] = field(default_factory=list)
    messages: list[UlpBlock] = field(default_factory=list)
    message_count: int = 0
    undecoded: int = 0
    """Messages that do not decode as the protocol (counted, shown as such)."""
    private_data: dict[str, str] = field(default_factory=dict)
    diagnoses: list[UlpDiagnosis] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def ulp_lines(ulp: UlpReport | None, messages: bool = False) -> list[str]:
    """inspect's lines for the upper protocol (``messages``: one line per message, as
    ``--fpdus`` asks), indented as the connection block's."""
    if ulp is None:
        return []
    pad = f"  {'':<12}"
    lines = [f"  {'upper proto':<12}{ulp.name} (by {ulp.recognised_by})"]
    for label, block in (("request", ulp.request), ("reply", ulp.reply)):
        if block is not None:
            lines.append(f"{pad}{label} frame {block.frame}: {block.text}")
    for side, hexed in ulp.private_data.items():
        lines.append(f"{pad}{side} private data of no known format: {hexed}")
    lines += [f"{pad}negotiated: {t}" for t in ulp.negotiated_text]
    if ulp.message_count:
        undecoded = f", {ulp.undecoded} not decoded as {ulp.name}" if ulp.undecoded else ""
        lines.append(f"{pad}{ulp.message_count} message{'s' * (ulp.message_count != 1)}"
                     f"{undecoded}")
    if messages:
        lines += [f"{pad}{message_line(m)}" for m in ulp.messages]
        if ulp.message_count > len(ulp.messages):
            lines.append(f"{pad}... {ulp.message_count - len(ulp.messages)} more")
    for d in ulp.diagnoses:
        lines.append(f"  {d.severity.upper() if d.severity == 'error' else d.severity:<12}"
                     f"frame {d.broken_frame}: {d.summary}" if d.broken_frame is not None
                     else f"  {d.severity:<12}{d.summary}")
    lines += [f"{pad}note: {n}" for n in ulp.notes]
    return lines


def message_line(m: UlpBlock) -> str:
    """``frames 8-19 client MSN 25: 16,520 bytes in 12 segments: Data Transfer: ...``."""
    where = f"frame {m.frame}" if m.last_frame in (0, m.frame) else \
        f"frames {m.frame}-{m.last_frame}"
    msn = f" MSN {m.msn}" if m.msn is not None else ""
    segs = f" in {m.segments} segments" if m.segments > 1 else ""
    return f"{where} {m.side}{msn}: {m.size:,} bytes{segs}: {m.text}"
