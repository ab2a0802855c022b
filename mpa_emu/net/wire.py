"""The virtual wire: latency plus the faults of :mod:`mpa_emu.net.faults`.

The wire decides what becomes of each frame (delivered, lost, duplicated, held back,
corrupted) and when each copy arrives; the network schedules the arrivals and records
the outcome in the capture and the trace. All randomness comes from one
``random.Random`` owned by the wire, so the same seed gives the same faults.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Final

from mpa_emu.net.faults import DropRule, FaultConfig
from mpa_emu.wire.segment import Segment

ETH_HEADER: Final = 14
VLAN_TAG: Final = 4


@dataclass(frozen=True, slots=True)
class Flight:
    """One copy of a frame travelling the wire, arriving ``delay_ns`` after it was sent."""

    delay_ns: int
    data: bytes
    duplicate: bool = False
    corrupted_bit: int | None = None
    """Bit offset flipped in ``data`` (counted from the start of the frame), if any."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the wire did to one frame: the copies in flight and, if none, why."""

    flights: tuple[Flight, ...]
    lost: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def note(self) -> str:
        """The faults as one text, for the capture comment ("" when none)."""
        return "; ".join(self.notes)


def tcp_span(seg: Segment) -> tuple[int, int]:
    """Byte range of the TCP header and payload inside the encoded frame of ``seg``.

    Every bit in this range is covered by the TCP checksum, so flipping one makes the
    receiving NIC drop the frame (RFC 9293 section 3.1, one's-complement sum).
    """
    start = ETH_HEADER + (VLAN_TAG if seg.vlan is not None else 0) + (20 if seg.ipv4 else 40)
    options = (len(seg.options) + 3) // 4 * 4
    return start, start + 20 + options + len(seg.payload)


class Wire:
    """A shared Ethernet segment with one-way ``latency_ns`` and seeded faults."""

    def __init__(self, *, latency_ns: int = 10_000, faults: FaultConfig | None = None,
                 seed: int = 0) -> None:
        if latency_ns < 0:
            raise ValueError(f"latency_ns must be >= 0, got {latency_ns}")
        self.latency_ns = latency_ns
        self.faults = faults if faults is not None else FaultConfig()
        self.rules: list[DropRule] = []
        self._rng = random.Random(seed)

    def add_rule(self, rule: DropRule) -> DropRule:
        """Add a named-frame drop rule; rules are checked in the order added."""
        self.rules.append(rule)
        return rule

    def carry(self, data: bytes, seg: Segment | None, sender: str) -> Outcome:
        """Decide the fate of one frame sent by ``sender``.

        ``seg`` is the decoded frame, or ``None`` when the bytes do not decode (such a
        frame is still carried; the receiving NIC drops it).
        """
        if seg is not None:
            for rule in self.rules:
                if rule.applies(seg, sender):
                    return Outcome((), lost=f"dropped by rule: {rule.description}",
                                   notes=(f"wire: dropped ({rule.description})",))
        faults = self.faults
        if not faults.any:
            return Outcome((Flight(self.latency_ns, data),))
        rng = self._rng
        # Draw every probability for every frame, in a fixed order, so that the fault
        # pattern of later frames does not depend on which faults earlier frames got.
        lost = rng.random() < faults.loss
        duplicated = rng.random() < faults.duplicate
        reordered = rng.random() < faults.reorder
        corrupt_draw = rng.random()
        bit_draw = rng.random()
        if lost:
            return Outcome((), lost="random loss", notes=("wire: lost",))
        notes: list[str] = []
        delay = self.latency_ns
        if reordered:
            delay += faults.reorder_delay_ns
            notes.append(f"wire: held back {faults.reorder_delay_ns} ns (reordered)")
        first = Flight(delay, data)
        if corrupt_draw < faults.corrupt:
            start, end = tcp_span(seg) if seg is not None else (ETH_HEADER, len(data))
            end = min(end, len(data))
            if end > start:
                bit = start * 8 + int(bit_draw * (end - start) * 8)
                flipped = bytearray(data)
                flipped[bit // 8] ^= 0x80 >> (bit % 8)
                first = Flight(delay, bytes(flipped), corrupted_bit=bit)
                notes.append(f"wire: corrupted (bit {bit % 8} of byte {bit // 8} flipped)")
        flights = [first]
        if duplicated:
            flights.append(Flight(delay, data, duplicate=True))
            notes.append("wire: duplicated")
        return Outcome(tuple(flights), notes=tuple(notes))

