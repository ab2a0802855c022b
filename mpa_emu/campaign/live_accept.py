"""``mpa-emu fuzz --live IP:PORT --accept``: the emulated host listens and the peer
connects to it; what the emulated side answers is mutated.

The fuzzer listens on PORT at its own address with its own small TCP: it answers the
peer's SYN with a SYN-ACK shaped like irdma's (or a RST), reads the peer's MPA request
and answers it with the case's frame: a well-formed reply or reject, or a spoiled one
(bad key, request key, revisions 0 and 3, PD_Length lies, unknown flags, wrong IRD/ORD
and RTR bits, no P2P, a v1 reply), whole, duplicated, reordered or split, with RST or
FIN at every step (instead of the SYN-ACK, right after the handshake, instead of the
answer, after 10 bytes of it, after all of it). The peer's reaction is recorded within
the bound: ``data`` (it went on, sending its RTR FPDU or other bytes), FIN, RST,
silence, or ``no connection`` (no SYN came). A well-formed exchange then checks the
peer still connects and goes on after a good reply (``loss of service`` otherwise).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from mpa_emu.campaign.generators import MUTATED_REPLIES, REP
from mpa_emu.campaign.live_fuzz import (
    LiveCase,
    LiveWire,
    Reaction,
    _Flow,
    random_case,
    syn_options,
)
from mpa_emu.wire import mpa
from mpa_emu.wire import seq as seq_space
from mpa_emu.wire.segment import ACK, FIN, PSH, RST, SYN, Segment

ACCEPT_STEPS = ("syn", "established", "request", "partial", "reply")
"""Where a RST or FIN goes (no FIN instead of the SYN-ACK: only a RST refuses)."""


def accept_catalogue() -> list[LiveCase]:
    """Every answer once whole, duplicated and reordered; RST and FIN at every step.
    (:class:`LiveCase`'s ``request`` holds the answer sent here.)"""
    out: list[LiveCase] = []

    def add(name: str, frame: bytes, pieces: tuple[tuple[int, int], ...],
            abort: str | None = None) -> None:
        out.append(LiveCase(len(out), name, frame, pieces, abort))

    for name, frame in MUTATED_REPLIES.items():
        add(f"answer {name}", frame, ((0, len(frame)),))
    for name, frame in MUTATED_REPLIES.items():
        add(f"duplicated {name}", frame, ((0, len(frame)),) * 2)
    for name, frame in MUTATED_REPLIES.items():
        half = len(frame) // 2
        add(f"reordered {name}", frame, ((half, len(frame) - half), (0, half)))
    for kind in ("rst", "fin"):
        for step in ACCEPT_STEPS:
            if (kind, step) != ("fin", "syn"):
                add(f"{kind.upper()} at {step}", REP, ((0, len(REP)),), f"{kind}@{step}")
    return out


def accept_case(seed: int, index: int) -> LiveCase:
    """Case ``index``: the catalogue first, then seeded random splits and byte flips."""
    fixed = accept_catalogue()
    if index < len(fixed):
        return fixed[index]
    return random_case(random.Random(f"{seed}:accept:{index}"), index, MUTATED_REPLIES, REP,
                       "answer byte")


@dataclass
class AcceptFuzzer:
    """Runs accept-mode cases on a :class:`LiveWire` whose ``port`` follows the peer's
    connection; ``listen_port`` is ours."""

    wire: LiveWire
    listen_port: int
    seed: int
    bound_s: float = 0.5
    connect_wait_s: float = 5.0
    _count: int = 0
    _pending: dict[int, Segment] = field(default_factory=dict)

    def _receive(self, timeout_s: float) -> list[Segment]:
        """The peer's segments to our port; a new connection's SYN that comes meanwhile
        is kept for :meth:`_wait_syn` (the peer would otherwise wait for its resend)."""
        out = []
        for seg in self.wire.receive(timeout_s, self.listen_port):
            if seg.flags & SYN and not seg.flags & ACK and seg.sport != self.wire.port:
                self._pending[seg.sport] = seg
            else:
                out.append(seg)
        return out

    def _wait_syn(self, reaction: Reaction) -> _Flow | None:
        deadline = time.monotonic() + self.connect_wait_s
        while not self._pending and (left := deadline - time.monotonic()) > 0:
            self._receive(min(left, 0.05))
        if not self._pending:
            reaction.no_syn = True
            return None
        # the newest attempt: older ones the peer may have given up already
        first = self._pending.pop(next(reversed(self._pending)))
        self._pending.clear()
        self._count += 1
        isn = random.Random(f"{self.seed}:accept-isn:{self._count}").getrandbits(32)
        self.wire.port = first.sport
        flow = _Flow(self.listen_port, isn, snd_nxt=isn, peer_isn=first.seq)
        flow.rcv_nxt = seq_space.add(first.seq, 1)
        return flow

    def _take(self, flow: _Flow, seg: Segment, reaction: Reaction | None,
              into: bytearray) -> None:
        if seg.sport != self.wire.port:
            return
        if seg.flags & RST:
            if reaction is not None:
                reaction.close = "RST"
            return
        if seg.payload and seg.seq == flow.rcv_nxt:
            into += seg.payload
            flow.rcv_nxt = seq_space.add(flow.rcv_nxt, len(seg.payload))
        if seg.flags & FIN and seg.seq == flow.rcv_nxt:
            if reaction is not None:
                reaction.close = reaction.close or "FIN"
            flow.rcv_nxt = seq_space.add(flow.rcv_nxt, 1)
        if seg.payload or seg.flags & FIN:
            self.wire.send(flow, ACK)

    def _read_request(self, flow: _Flow, reaction: Reaction) -> bool:
        """The peer's MPA request, whole (20 bytes and PD_Length more, RFC 5044 section
        7.1), within the bound; False when it closed or never sent it."""
        data = bytearray()
        deadline = time.monotonic() + self.bound_s * 4
        while time.monotonic() < deadline and reaction.close is None:
            for seg in self._receive(0.05):
                self._take(flow, seg, reaction, data)
            if len(data) >= 20 and mpa.looks_like_mpa(bytes(data)) and \
                    len(data) >= 20 + mpa.parse_header(bytes(data)).pd_length:
                return True
        return False

    def _observe(self, flow: _Flow, reaction: Reaction, after: bytearray) -> None:
        deadline = time.monotonic() + self.bound_s
        while time.monotonic() < deadline and reaction.close is None:
            for seg in self._receive(min(0.05, self.bound_s)):
                self._take(flow, seg, reaction, after)
        if after:
            # after a RST/FIN right at the handshake, what comes is the peer's request
            reaction.mpa = "request" if bytes(after[:16]) == mpa.KEY_REQ else "data"

    def _abort(self, flow: _Flow, flag: int) -> None:
        self.wire.send(flow, flag | ACK)
        if flag & FIN:
            flow.snd_nxt = seq_space.add(flow.snd_nxt, 1)

    def run_case(self, c: LiveCase) -> Reaction:
        """Accept one connection, play the case, return the peer's reaction (the
        connection is reset afterwards unless the peer closed it)."""
        reaction = Reaction()
        flow = self._wait_syn(reaction)
        if flow is None:
            return reaction
        kind, _, step = (c.abort or "@").partition("@")
        flag = RST if kind == "rst" else FIN
        after = bytearray()
        if step == "syn":
            self._abort(flow, RST)  # refused: RST|ACK to the SYN (RFC 9293 section 3.5.2)
            self._observe(flow, reaction, after)
            return reaction
        self.wire.send(flow, SYN | ACK, options=syn_options(self.wire.ip))
        flow.snd_nxt = seq_space.add(flow.isn, 1)
        if step == "established":
            self._abort(flow, flag)
        elif not self._read_request(flow, reaction):
            self._observe(flow, reaction, after)
            return self._end(flow, reaction)
        elif step == "request":
            self._abort(flow, flag)
        else:
            base = flow.snd_nxt
            sent = 0
            for offset, length in c.pieces:
                if step == "partial":
                    offset, length = 0, 10
                self.wire.send(flow, ACK | PSH, c.request[offset:offset + length],
                               seq=base + offset)
                sent = max(sent, offset + length)
                flow.snd_nxt = seq_space.add(base, sent)
                if step == "partial":
                    break
            if step in ("partial", "reply"):
                self._abort(flow, flag)
        self._observe(flow, reaction, after)
        return self._end(flow, reaction)

    def _end(self, flow: _Flow, reaction: Reaction) -> Reaction:
        if reaction.close is None:
            self.wire.send(flow, RST | ACK)
        return reaction

    def still_answers(self) -> bool:
        """The peer connects again and, answered with a well-formed reply, goes on
        (sends its RTR or other data); an attempt it resets before its request (one
        it gave up) does not count, up to three attempts."""
        for _ in range(3):
            reaction = Reaction()
            if self._answers(reaction):
                return True
            if reaction.no_syn or reaction.close != "RST":
                return False
        return False

    def _answers(self, reaction: Reaction) -> bool:
        flow = self._wait_syn(reaction)
        if flow is None:
            return False
        self.wire.send(flow, SYN | ACK, options=syn_options(self.wire.ip))
        flow.snd_nxt = seq_space.add(flow.isn, 1)
        if not self._read_request(flow, reaction):
            self._end(flow, reaction)
            return False
        self.wire.send(flow, ACK | PSH, REP)
        flow.snd_nxt = seq_space.add(flow.snd_nxt, len(REP))
        after = bytearray()
        deadline = time.monotonic() + self.bound_s * 4
        while not after and reaction.close is None and time.monotonic() < deadline:
            for seg in self._receive(0.05):
                self._take(flow, seg, reaction, after)
        self._end(flow, reaction)
        return bool(after)
