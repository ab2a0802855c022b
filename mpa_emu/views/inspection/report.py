"""The data inspect reports: findings, MPA frames, FPDUs, connections, the capture."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from mpa_emu.capture.checksums import ModeName
from mpa_emu.wire.erdma_mpa import EXT_SIZE
from mpa_emu.wire.mpa import (
    FLAG_CRC,
    FLAG_ENHANCED,
    FLAG_MARKERS,
    FLAG_REJECT,
    FLAG_RESERVED,
    FRAME_SIZE,
)
from mpa_emu.wire.private_data import LegacyIrdOrd

if TYPE_CHECKING:
    from mpa_emu.judge.model import Refusal, SideStack
    from mpa_emu.ulp.upper import UlpReport


@dataclass(slots=True)
class Finding:
    """Something malformed or noteworthy. ``severity`` is ``error`` (violates RFC 5044 /
    6581 or irdma would refuse it), ``warning`` (legal but trouble), ``note``, or
    ``hint`` (what another stack than the side's own, a known kernel stack, would refuse:
    shown in text with ``--verbose`` only)."""

    frame: int | None
    severity: str
    text: str
    stack: str | None = None
    """The stack whose rule this is (``irdma``, ``siw``, ``cxgb4``), if any."""
    rule: str | None = None
    """The catalogue key of the rule (docs/explain.md)."""
    fn: str | None = None
    """The kernel function that enforces the rule."""


@dataclass(slots=True)
class MpaInfo:
    """One MPA request or reply as found on the wire."""

    frame: int
    request: bool
    rev: int
    flags: int
    pd_length: int
    key_ok: bool = True
    ird: int | None = None
    ord: int | None = None
    p2p: bool | None = None
    zero_len_send: bool | None = None
    write_rtr: bool | None = None
    read_rtr: bool | None = None
    private_data: bytes = b""
    """The ULP private data (after the RFC 6581 block when there is one)."""
    legacy: LegacyIrdOrd | None = None
    """The private data read as the [MS-SMBD] legacy IRD/ORD header, when it is one."""
    erdma_cookie: int | None = None
    """erdma's dialect (revision 129, :mod:`mpa_emu.wire.erdma_mpa`): the cookie of the
    8-byte extension after the header (None for an RFC 5044 frame)."""
    erdma_cc: int | None = None
    """erdma's dialect: the congestion-control algorithm of the extension's bits."""

    @property
    def frame_len(self) -> int:
        """Bytes the frame takes on the stream: the header, erdma's extension when there
        is one (PD_Length does not count it), the private data."""
        ext = EXT_SIZE if self.erdma_cookie is not None else 0
        return FRAME_SIZE + ext + self.pd_length

    @property
    def reject(self) -> bool:
        """R set: a reject (in a reply)."""
        return bool(self.flags & FLAG_REJECT)

    @property
    def has_block(self) -> bool:
        """The RFC 6581 IRD/ORD block was read from the private data."""
        return self.ird is not None

    def flag_names(self) -> str:
        """``M C R S`` for the flags set (``none`` when none)."""
        names = [n for bit, n in ((FLAG_MARKERS, "M"), (FLAG_CRC, "C"), (FLAG_REJECT, "R"),
                                  (FLAG_ENHANCED, "S")) if self.flags & bit]
        if self.flags & FLAG_RESERVED:
            names.append(f"res=0x{self.flags & FLAG_RESERVED:x}")
        return " ".join(names) or "none"

    def rtr_names(self) -> list[str]:
        """The RTR types offered (request) or chosen (reply)."""
        return [n for ok, n in ((self.zero_len_send, "send"), (self.write_rtr, "write"),
                                (self.read_rtr, "read")) if ok]


@dataclass(slots=True)
class FpduInfo:
    """One FPDU as found in a side's byte stream (RFC 5044 section 4, RFC 5041 section 4,
    RFC 5040 section 4). ``crc`` is ``good``, ``bad`` or ``zero`` when CRC was
    negotiated, ``None`` when it was not (no verdict). Untagged segments carry ``qn``,
    ``msn``, ``mo``; tagged ones ``stag`` and ``to``; a Read Request also its Data Sink
    STag and TO in ``stag`` and ``to``, its RDMA Read Message Size in ``read_size`` and its
    Data Source STag and TO in ``src_stag`` and ``src_to``."""

    frame: int
    side: str
    ulpdu_length: int
    opcode: int | None
    what: str
    last: bool | None = None
    qn: int | None = None
    msn: int | None = None
    mo: int | None = None
    stag: int | None = None
    to: int | None = None
    read_size: int | None = None
    src_stag: int | None = None
    """A Read Request's Data Source STag (RFC 5040 section 4.4)."""
    src_to: int | None = None
    """A Read Request's Data Source Tagged Offset."""
    crc: str | None = None
    crc_value: int = 0
    crc_expected: int | None = None
    term_body: bytes = b""
    """A Terminate's body: its control word and the headers it quotes."""
    layout_note: str = ""
    """For a Terminate whose control word reads differently in RFC 5040's layout and
    siw's: which one was kept and why."""
    cut: bool = False
    """The FPDU's end is not in the capture (a frame captured short): its header was
    read, its CRC is not judged."""
    answers: int | None = None
    """For a Terminate: the frame of the peer's FPDU whose DDP header it quotes."""


@dataclass(slots=True)
class MessageInfo:
    """One RDMAP message: the DDP segments of one QN and MSN (untagged) or of one STag
    with continuing TOs (tagged), up to the one with L set (RFC 5041 section 5)."""

    side: str
    opcode: int | None
    name: str
    label: str
    """How its first FPDU reads (``Send (120 bytes)``), for a one-segment message."""
    qn: int | None
    msn: int | None
    stag: int | None
    first_frame: int
    last_frame: int
    bytes: int
    segments: int
    next_offset: int = 0
    """Tagged: the TO the next segment continues at."""
    complete: bool = False
    """Its last segment (L) is in the capture."""
    cut: bool = False
    """One of its segments was captured short."""
    frames: list[int] = field(default_factory=list)
    """The frame of each segment, in order."""


@dataclass(slots=True)
class Direction:
    """One side's byte stream and its TCP events."""

    isn: int | None = None
    syn_frame: int | None = None
    syn_count: int = 0
    options: dict[str, Any] = field(default_factory=dict)
    option_kinds: tuple[int, ...] = ()
    syn_window: int | None = None
    segments: list[tuple[int, int, bytes]] = field(default_factory=list)  # (frame, seq, data)
    fins: list[tuple[int, int]] = field(default_factory=list)  # (frame, seq)
    rsts: list[int] = field(default_factory=list)  # frames
    retransmissions: int = 0
    fpdus: int = 0
    bad_crc: int = 0
    opcodes: dict[str, int] = field(default_factory=dict)
    offload_frames: list[int] = field(default_factory=list)
    short: dict[int, int] = field(default_factory=dict)
    """Frame -> TCP payload bytes not captured (the frame was captured short)."""
    cut: int | None = None
    """The frame captured short after which this side's stream is not followed."""

    @property
    def fin_frame(self) -> int | None:
        """The first FIN's frame."""
        return self.fins[0][0] if self.fins else None

    @property
    def rst_frame(self) -> int | None:
        """The first RST's frame."""
        return self.rsts[0] if self.rsts else None


@dataclass(slots=True)
class ConnectionReport:
    """Everything found about one TCP connection."""

    index: int
    client: str
    server: str
    vlan: int | None
    first_frame: int
    last_frame: int
    frames: int = 0
    handshake: list[str] = field(default_factory=list)
    request: MpaInfo | None = None
    reply: MpaInfo | None = None
    negotiated: list[str] = field(default_factory=list)
    crc: bool | None = None
    """CRC as negotiated (C in the request or the reply); None without both frames."""
    rtr: str = ""
    fpdus: list[str] = field(default_factory=list)
    fpdu_list: list[FpduInfo] = field(default_factory=list)
    ended: str = "open at end of capture"
    fingerprints: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    comments: list[tuple[int, str]] = field(default_factory=list)
    stacks: list[SideStack] = field(default_factory=list)
    """The stack each side is judged as (client first), with the evidence."""
    refusals: list[Refusal] = field(default_factory=list)
    """Rules of the sides' own stacks that the MPA exchange breaks."""
    closes: list[tuple[int, str, str]] = field(default_factory=list)
    """Every FIN and RST as (frame, ``client``|``server``, ``FIN``|``RST``), in frame
    order."""
    messages: list[MessageInfo] = field(default_factory=list)
    """The FPDUs grouped into messages, both sides, in the order they began."""
    cut_frames: list[int] = field(default_factory=list)
    """Frames captured short (snap length) whose missing bytes were stream data."""
    times: dict[int, float] = field(default_factory=dict)
    """Capture time of the frames that mark the story (SYNs, MPA frames, FINs, RSTs, the
    last frame), for timers; not part of the JSON report."""
    ulp: UlpReport | None = None
    """The upper protocol (SMB Direct, NVMe-oF, iSER, RPC-over-RDMA, unknown), its
    negotiated values, messages and diagnoses (:mod:`mpa_emu.ulp.upper`)."""

    def add(self, frame: int | None, severity: str, text: str, *, stack: str | None = None,
            rule: str | None = None, fn: str | None = None) -> None:
        """Record a finding (``stack``, ``rule``, ``fn``: the stack rule behind it)."""
        self.findings.append(Finding(frame, severity, text, stack, rule, fn))

    @property
    def errors(self) -> int:
        """Number of error findings."""
        return sum(1 for f in self.findings if f.severity == "error")

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (bytes as hex), as in :meth:`CaptureReport.to_dict`."""
        out: dict[str, Any] = _jsonable(asdict(self))
        out.pop("times", None)
        _drop_absent_erdma(out)
        return out


@dataclass(slots=True)
class CaptureReport:
    """All connections of a capture plus frame-level problems. ``checksums`` names the
    reading used (``strict``, ``offload`` or ``off``)."""

    path: str
    frames: int = 0
    tcp_frames: int = 0
    connections: list[ConnectionReport] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    hidden: int = 0
    """Connections of the capture left out of ``connections`` by a selection."""
    checksums: ModeName = "offload"

    @property
    def errors(self) -> int:
        """Errors in the selected connections plus frame-level problems."""
        return sum(c.errors for c in self.connections) + len(self.problems)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (bytes as hex)."""
        out: dict[str, Any] = _jsonable(asdict(self))
        for conn in out.get("connections", []):
            conn.pop("times", None)
            _drop_absent_erdma(conn)
        return out


def _drop_absent_erdma(conn: dict[str, Any]) -> None:
    """Leave erdma's extension fields out of an RFC 5044 frame's JSON (present only for
    a frame of erdma's dialect)."""
    for side in ("request", "reply"):
        mpa = conn.get(side)
        if isinstance(mpa, dict) and mpa.get("erdma_cookie") is None:
            mpa.pop("erdma_cookie", None)
            mpa.pop("erdma_cc", None)


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value

