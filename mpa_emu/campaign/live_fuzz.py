"""``mpa-emu fuzz --live``: mutated handshakes and MPA frames against a real peer.

The fuzzer owns a TAP device and plays the initiator with its own small TCP (no kernel
stack on its side, so it can send what no stack would): a SYN shaped like irdma's, the
handshake's ACK, then the case's segments: mutated MPA requests (bad keys and
revisions, PD_Length lies, unknown flags, wrong IRD/ORD and RTR bits, no P2P), frames
split over several segments, duplicated and reordered segments, RST or FIN at every
step of the exchange. It records how the peer reacts within a bound (an MPA reply or
reject, FIN, RST, other data, silence), then opens a well-formed connection to check
the peer still answers (``loss of service`` when it does not). Cases are seeded:
case ``i`` of seed ``S`` is the same case on every run.
"""

from __future__ import annotations

import itertools
import random
import select
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mpa_emu.campaign.generators import MUTATED_MPA, REQ
from mpa_emu.live.neighbour import NeighbourResponder
from mpa_emu.live.tap import Tap
from mpa_emu.wire import codec, mpa
from mpa_emu.wire import seq as seq_space
from mpa_emu.wire.segment import ACK, FIN, PSH, RST, SYN, Segment

SYN_OPTIONS = bytes.fromhex("020405b4")  # MSS 1460 (RFC 9293 section 3.7.1)
SYN_OPTIONS_V6 = bytes.fromhex("020405a0")  # MSS 1440: 1500 less 40 + 20 (RFC 8200)


def syn_options(ip: bytes) -> bytes:
    """The MSS option of our SYN or SYN-ACK for a 1500-byte MTU, IPv4 or IPv6."""
    return SYN_OPTIONS if len(ip) == 4 else SYN_OPTIONS_V6
WINDOW = 65535
STEPS = ("synack", "established", "partial", "request")
"""Where a RST or FIN is sent: instead of the handshake's ACK, right after it, after
the first 10 bytes of the request, after the whole request."""


@dataclass(frozen=True, slots=True)
class LiveCase:
    """One case: a name saying what is sent, the request bytes, how they are cut
    (``(offset, length)`` pieces in sending order) and where a RST/FIN goes."""

    index: int
    name: str
    request: bytes
    pieces: tuple[tuple[int, int], ...]
    abort: str | None = None  # "rst@STEP" or "fin@STEP"


def _whole(frame: bytes) -> tuple[tuple[int, int], ...]:
    return ((0, len(frame)),)


def catalogue() -> list[LiveCase]:
    """The fixed cases, every mutation once: each MPA frame whole, duplicated and
    reordered, and RST and FIN at every step."""
    out: list[LiveCase] = []

    def add(name: str, request: bytes, pieces: tuple[tuple[int, int], ...],
            abort: str | None = None) -> None:
        out.append(LiveCase(len(out), name, request, pieces, abort))

    for name, frame in MUTATED_MPA.items():
        add(f"mpa {name}", frame, _whole(frame))
    for name, frame in MUTATED_MPA.items():
        add(f"duplicated {name}", frame, _whole(frame) * 2)
    for name, frame in MUTATED_MPA.items():
        half = len(frame) // 2
        if half:
            add(f"reordered {name}", frame, ((half, len(frame) - half), (0, half)))
    for kind in ("rst", "fin"):
        for step in STEPS:
            add(f"{kind.upper()} at {step}", REQ, _whole(REQ), f"{kind}@{step}")
    return out


def case(seed: int, index: int) -> LiveCase:
    """Case ``index``: the catalogue first, then seeded random splits and byte flips."""
    fixed = catalogue()
    if index < len(fixed):
        return fixed[index]
    return random_case(random.Random(f"{seed}:live:{index}"), index, MUTATED_MPA, REQ, "byte")


def random_case(rng: random.Random, index: int, frames: dict[str, bytes], sound: bytes,
                label: str) -> LiveCase:
    """A seeded case past the catalogue: one of ``frames`` split at up to three random
    places, or ``sound`` with one random byte (header, RFC 6581 IRD/ORD block or data)
    replaced; ``label`` names the flipped frame in the case's name."""
    if rng.randrange(2):
        name = rng.choice(list(frames))
        frame = frames[name]
        cuts = sorted(rng.sample(range(1, len(frame)), min(rng.randint(1, 3),
                                                            len(frame) - 1)))
        edges = [0, *cuts, len(frame)]
        pieces = tuple((a, b - a) for a, b in itertools.pairwise(edges))
        return LiveCase(index, f"split {name} at {','.join(map(str, cuts))}", frame, pieces)
    flipped = bytearray(sound)
    where = rng.randrange(len(flipped))
    flipped[where] = rng.randrange(256)
    return LiveCase(index, f"{label} {where} = 0x{flipped[where]:02x}", bytes(flipped),
                    _whole(bytes(flipped)))


@dataclass
class Reaction:
    """What the peer did on one case's connection."""

    mpa: str | None = None  # "reply", "reject", "other data"
    close: str | None = None  # "FIN", "RST"
    refused: bool = False
    no_synack: bool = False
    no_syn: bool = False  # accept mode: the peer did not connect
    data: bytes = b""

    def text(self) -> str:
        """``reply``, ``reject+FIN``, ``RST``, ``silence`` ..."""
        if self.no_syn:
            return "no connection"
        if self.no_synack:
            return "no SYN-ACK"
        if self.refused:
            return "refused (RST to SYN)"
        parts = [p for p in (self.mpa, self.close) if p]
        return "+".join(parts) if parts else "silence"


@dataclass
class _Flow:
    sport: int
    isn: int
    snd_nxt: int = 0
    rcv_nxt: int = 0
    peer_isn: int | None = None


@dataclass
class LiveWire:
    """The TAP, our address and MAC, the peer's; every frame kept with its time."""

    tap: Tap
    mac: bytes
    ip: bytes
    peer_ip: bytes
    port: int
    peer_mac: bytes = b""
    frames: list[tuple[int, bytes]] = field(default_factory=list)
    neighbours: NeighbourResponder = field(init=False)

    def __post_init__(self) -> None:
        self.neighbours = NeighbourResponder(self.mac)
        self.neighbours.add_address(self.ip)

    def send(self, flow: _Flow, flags: int, payload: bytes = b"", *, seq: int | None = None,
             options: bytes = b"") -> None:
        """One segment of ``flow``."""
        seg = Segment(src_mac=self.mac, dst_mac=self.peer_mac, src_ip=self.ip,
                      dst_ip=self.peer_ip, sport=flow.sport, dport=self.port,
                      seq=(flow.snd_nxt if seq is None else seq) & 0xFFFFFFFF,
                      ack=flow.rcv_nxt & 0xFFFFFFFF if flags & ACK else 0, flags=flags,
                      window=WINDOW, options=options, payload=payload)
        self._write(codec.encode(seg))

    def _write(self, raw: bytes) -> None:
        self.frames.append((time.time_ns(), raw))
        self.tap.write(raw)

    def receive(self, timeout_s: float, sport: int | None,
                until: Callable[[list[Segment]], bool] | None = None) -> list[Segment]:
        """The peer's segments to ``sport`` within ``timeout_s`` (stopping early once
        ``until`` says so); ARP is answered on the way."""
        got: list[Segment] = []
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([self.tap.fileno()], [], [], left)
            if not ready:
                break
            while (raw := self.tap.read()) is not None:
                self.frames.append((time.time_ns(), raw))
                handled = self.neighbours.handle(raw)
                if handled is not None:
                    for reply in handled.replies:
                        self._write(reply)
                    for ip, mac in handled.learned:
                        if ip == self.peer_ip:
                            self.peer_mac = mac
                    continue
                try:
                    seg = codec.decode(raw)
                except codec.DecodeError:
                    continue
                if seg.src_ip == self.peer_ip and seg.dport == sport:
                    got.append(seg)
            if until is not None and until(got):
                break
        return got

    def resolve(self, timeout_s: float = 3.0) -> bool:
        """Learn the peer's MAC (ARP, RFC 826)."""
        deadline = time.monotonic() + timeout_s
        while not self.peer_mac and time.monotonic() < deadline:
            self._write(self.neighbours.solicit(self.peer_ip, self.ip))
            self.receive(0.2, None, lambda _: bool(self.peer_mac))
        return bool(self.peer_mac)


@dataclass
class LiveFuzzer:
    """Runs cases on a :class:`LiveWire`; ``bound_s`` is how long a reaction is awaited."""

    wire: LiveWire
    seed: int
    bound_s: float = 0.5
    _ports: int = 0

    def _flow(self) -> _Flow:
        self._ports += 1
        sport = 20000 + (self._ports % 40000)
        isn = random.Random(f"{self.seed}:isn:{self._ports}").getrandbits(32)
        return _Flow(sport, isn, snd_nxt=isn)

    def _open(self, flow: _Flow, reaction: Reaction) -> bool:
        """SYN, SYN-ACK; True once the peer answered (the ACK is the caller's)."""
        self.wire.send(flow, SYN, options=syn_options(self.wire.ip))
        flow.snd_nxt = seq_space.add(flow.isn, 1)
        segs = self.wire.receive(self.bound_s * 4, flow.sport,
                                 lambda g: any(s.flags & (SYN | RST) for s in g))
        synack = next((s for s in segs if s.flags & SYN and s.flags & ACK), None)
        if synack is None:
            reaction.refused = any(s.flags & RST for s in segs)
            reaction.no_synack = not reaction.refused
            return False
        flow.peer_isn = synack.seq
        flow.rcv_nxt = seq_space.add(synack.seq, 1)
        return True

    def _observe(self, flow: _Flow, reaction: Reaction) -> None:
        def done(segs: list[Segment]) -> bool:
            return any(s.flags & (RST | FIN) for s in segs)
        for seg in self.wire.receive(self.bound_s, flow.sport, done):
            self._take(flow, seg, reaction)

    def _take(self, flow: _Flow, seg: Segment, reaction: Reaction) -> None:
        if seg.flags & RST:
            reaction.close = "RST"
            return
        if seg.payload and seg.seq == flow.rcv_nxt:
            reaction.data += seg.payload
            flow.rcv_nxt = seq_space.add(flow.rcv_nxt, len(seg.payload))
            reaction.mpa = _answer(reaction.data)
        if seg.flags & FIN:
            reaction.close = reaction.close or "FIN"
            flow.rcv_nxt = seq_space.add(flow.rcv_nxt, 1)
        if seg.payload or seg.flags & FIN:
            self.wire.send(flow, ACK)

    def run_case(self, c: LiveCase) -> Reaction:
        """Play one case and return the peer's reaction (the connection is reset
        afterwards so the peer moves on)."""
        flow = self._flow()
        reaction = Reaction()
        if not self._open(flow, reaction):
            return reaction
        if c.abort is not None:
            kind, step = c.abort.split("@")
            flag = RST if kind == "rst" else FIN | ACK
        else:
            flag, step = 0, ""
        if step == "synack":
            self._abort(flow, flag)
            self._observe(flow, reaction)
            return reaction
        self.wire.send(flow, ACK)
        base = flow.snd_nxt
        sent_upto = 0
        if step == "established":
            self._abort(flow, flag)
        else:
            for n, (offset, length) in enumerate(c.pieces):
                if step == "partial" and n == 0:
                    offset, length = 0, 10
                self.wire.send(flow, ACK | PSH, c.request[offset:offset + length],
                               seq=base + offset)
                sent_upto = max(sent_upto, offset + length)
                flow.snd_nxt = seq_space.add(base, sent_upto)
                if step == "partial":
                    break
                if len(c.pieces) > 1:
                    for seg in self.wire.receive(0.02, flow.sport):
                        self._take(flow, seg, reaction)
            if step in ("partial", "request"):
                self._abort(flow, flag)
        self._observe(flow, reaction)
        if reaction.close is None:
            self.wire.send(flow, RST | ACK)
        return reaction

    def _abort(self, flow: _Flow, flag: int) -> None:
        self.wire.send(flow, flag | (ACK if flag & RST == 0 else 0))
        if flag & FIN:
            flow.snd_nxt = seq_space.add(flow.snd_nxt, 1)

    def still_answers(self) -> bool:
        """A well-formed v2 connection: True when the peer answers the request."""
        flow = self._flow()
        reaction = Reaction()
        if not self._open(flow, reaction):
            return False
        self.wire.send(flow, ACK)
        self.wire.send(flow, ACK | PSH, REQ)
        flow.snd_nxt = seq_space.add(flow.snd_nxt, len(REQ))
        deadline = time.monotonic() + self.bound_s * 4
        while reaction.mpa is None and reaction.close is None \
                and time.monotonic() < deadline:
            for seg in self.wire.receive(0.05, flow.sport):
                self._take(flow, seg, reaction)
        if reaction.close is None:
            self.wire.send(flow, RST | ACK)
        return reaction.mpa in ("reply", "reject")


def _answer(data: bytes) -> str:
    if len(data) < 20 or not mpa.looks_like_mpa(data):
        return "other data"
    try:
        frame = mpa.decode_frame(data)
    except mpa.MpaFormatError:
        return "other data" if len(data) >= 20 + mpa.parse_header(data).pd_length \
            else "partial reply"
    if frame.request:
        return "other data"
    return "reject" if frame.reject else "reply"


@dataclass(frozen=True, slots=True)
class LiveResult:
    """One case's outcome: its reaction and whether the peer still answered after."""

    case: LiveCase
    reaction: str
    answers_after: bool

    @property
    def group(self) -> str:
        """The reaction table's row."""
        return self.reaction if self.answers_after else "loss of service"


def write_case_capture(folder: Path, result: LiveResult,
                       frames: list[tuple[int, bytes]]) -> Path:
    """``live-CASE.pcapng`` with the case's frames (and the liveness check's)."""
    from mpa_emu.capture.pcap import PcapngWriter

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"live-{result.case.index}.pcapng"
    with open(path, "wb") as stream, PcapngWriter(stream) as out:
        for n, (t, raw) in enumerate(frames):
            out.write(t, raw, interface="tap",
                      comment=f"case {result.case.index}: {result.case.name}" if n == 0
                      else None)
    return path
