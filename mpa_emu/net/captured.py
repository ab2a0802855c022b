"""What a network run records: each captured frame (:class:`CapturedFrame`) and the run's
steps in causal order (:class:`JournalEntry`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mpa_emu.net.faults import frame_kind
from mpa_emu.wire.codec import decode
from mpa_emu.wire.segment import Segment


@dataclass(slots=True)
class CapturedFrame:
    """One frame as the capture saw it.

    ``interface`` is the sending host's name (or ``<host>/lo`` for loopback), ``time_ns``
    the virtual time it was put on the wire, ``data`` the exact bytes sent (the capture
    point is the sender's interface: a corruption on the wire is told in ``notes``, with
    the flipped bit, while ``data`` keeps what was sent), :attr:`segment`
    the decoded value (``None`` for injected bytes that do not decode). :attr:`notes`
    collects what happened to it (wire faults, the receiving NIC's drop); :attr:`comment`
    joins them to the sender's comment for the pcapng file.

    A capture keeps every frame of a run, so a frame keeps as few objects as it can: the
    segment of a frame whose bytes are known to decode to it (``decodes=True``, as
    :func:`mpa_emu.wire.codec.round_trips` promises) is decoded from ``data`` when first
    asked for, and the notes list is made with the first note.
    """

    index: int
    time_ns: int
    interface: str
    sender: str
    receivers: tuple[str, ...]
    data: bytes
    origin: str
    known_segment: Segment | None
    """The segment as far as it is known: given, or decoded once asked for."""
    loopback: bool = False
    note_list: list[str] | None = None
    """The notes, ``None`` until the first (:attr:`notes` makes the list)."""
    delivered: int = 0
    in_flight: int = 0
    """Deliveries of the frame still queued on the wire: while any is, the frame may
    still get a note (a NIC drop) or a delivery; at 0 it is settled."""
    decodes: bool = False
    """``data`` decodes to the segment, which is decoded when first asked for."""

    def __init__(self, index: int, time_ns: int, interface: str, sender: str,
                 receivers: tuple[str, ...], data: bytes, origin: str,
                 known_segment: Segment | None, loopback: bool = False,
                 note_list: list[str] | None = None, delivered: int = 0, in_flight: int = 0,
                 decodes: bool = False) -> None:
        # Written out: the compiled build then stores each field directly.
        self.index = index
        self.time_ns = time_ns
        self.interface = interface
        self.sender = sender
        self.receivers = receivers
        self.data = data
        self.origin = origin
        self.known_segment = known_segment
        self.loopback = loopback
        self.note_list = note_list
        self.delivered = delivered
        self.in_flight = in_flight
        self.decodes = decodes and known_segment is None

    @property
    def segment(self) -> Segment | None:
        """The decoded frame (``None`` for injected bytes that do not decode)."""
        seg = self.known_segment
        if seg is None and self.decodes:
            seg = self.known_segment = decode(self.data)
            self.decodes = False
        return seg

    @property
    def notes(self) -> list[str]:
        """What happened to the frame on the wire and at the receiving NIC, in order."""
        notes = self.note_list
        if notes is None:
            notes = self.note_list = []
        return notes

    @property
    def comment(self) -> str:
        """The pcapng comment: kernel function and transition, then the frame's fate."""
        notes = self.note_list
        return "; ".join([self.origin, *notes]) if notes else self.origin

    @property
    def kind(self) -> str:
        """``"SYN"``, ``"MPA request"``... (``"undecodable"`` for broken injected bytes)."""
        return frame_kind(self.segment) if self.segment is not None else "undecodable"

    def packet(self) -> Any:
        """The frame as a scapy packet (``Ether(data)``, with mpa_emu's layers bound)."""
        return to_scapy_packet(self.data)


def to_scapy_packet(data: bytes) -> Any:
    """Dissect frame bytes with scapy, with mpa_emu's MPA and DDP layers bound."""
    # imported here, not at the top: scapy is loaded only when a packet is asked for
    from scapy.layers.l2 import Ether

    import mpa_emu.frames  # noqa: F401  (importing binds the MPA/DDP layers)

    return Ether(data)


@dataclass(slots=True, unsafe_hash=True)
class JournalEntry:
    """One step of the run in causal order, for the ladder: a captured ``frame``
    (:class:`CapturedFrame`), an ``upcall`` (:class:`~mpa_emu.stacks.contract.events.Upcall`) or a
    ``trace`` record (state changes and drops, as
    :class:`~mpa_emu.stacks.contract.trace.TraceRecord`)."""

    kind: str
    host: str
    time_ns: int
    item: Any

    def __init__(self, kind: str, host: str, time_ns: int, item: Any) -> None:
        self.kind = kind
        self.host = host
        self.time_ns = time_ns
        self.item = item

