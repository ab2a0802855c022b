"""A capture seen from the emulated host: its frames, split into flows and directions.

Every TCP frame of the capture is either *sent by* the emulated address (an expectation
the emulator must reproduce) or *received by* it (a frame to inject). Frames of other
hosts and non-TCP frames are kept out of the replay and counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from mpa_emu.capture.checksums import Mode, Verdict
from mpa_emu.capture.decode import Lenient, Undecodable, after_refusal, decode_leniently
from mpa_emu.capture.pcap import LINKTYPE_ETHERNET, CaptureRecord, read_intact
from mpa_emu.errors import MpaEmuError
from mpa_emu.gc_tuning import paused
from mpa_emu.wire import codec
from mpa_emu.wire.addr import ip_text

# A flow as the emulated host sees it: (local ip, local port, remote ip, remote port, vlan).
from mpa_emu.wire.flow import NO_VLAN, FlowKey
from mpa_emu.wire.mpa import mpa_kind
from mpa_emu.wire.segment import ACK, FIN, SYN, Segment
from mpa_emu.wire.seq import MASK as MASK32
from mpa_emu.wire.seq import after


class RecordingError(MpaEmuError, ValueError):
    """Bad input for replay: unreadable file, not Ethernet, no frames of the address."""


@dataclass(slots=True)
class Frame:
    """One TCP frame of the capture."""

    number: int
    """1-based frame number in the capture file (as Wireshark numbers it)."""
    time_ns: int
    """Time relative to the capture's first frame."""
    seg: Segment
    outbound: bool
    """True when the emulated address sent it."""
    flow: FlowKey
    nic_dropped: str = ""
    """Why the receiving NIC would drop this frame before the CM sees it (bad checksum)."""

    def __init__(self, number: int, time_ns: int, seg: Segment, outbound: bool,
                 flow: FlowKey, nic_dropped: str = "") -> None:
        # Written out (one is made per frame): the generated one is interpreted code in
        # the compiled build too.
        self.number = number
        self.time_ns = time_ns
        self.seg = seg
        self.outbound = outbound
        self.flow = flow
        self.nic_dropped = nic_dropped


@dataclass(slots=True)
class Flow:
    """Frames of one TCP conversation of the emulated host, in capture order."""

    key: FlowKey
    frames: list[Frame] = field(default_factory=list)

    @property
    def outbound(self) -> list[Frame]:
        """Frames the emulated host sent."""
        return [f for f in self.frames if f.outbound]

    @property
    def active(self) -> bool:
        """True when the emulated host sent the first SYN (without ACK) of the flow."""
        for f in self.frames:
            if f.seg.flags & SYN and not f.seg.flags & ACK:
                return f.outbound
        return False


@dataclass(slots=True)
class Recording:
    """The capture from the point of view of ``ip``."""

    path: str
    ip: bytes
    frames: list[Frame]
    flows: dict[FlowKey, Flow]
    mac: bytes
    vlan: int | None
    neighbours: dict[bytes, bytes]
    total_frames: int
    ignored: dict[str, int]
    end_ns: int
    start_ns: int
    """Absolute time of the first frame (ns since the epoch)."""
    damage: str = ""
    """Why reading stopped early, when the file is damaged part-way."""
    checksums: Mode = Mode.OFFLOAD
    offload_artefacts: dict[bytes, int] = field(default_factory=dict)
    """Frames received by the emulated host whose TCP checksum is a TX offload artefact,
    by sending address: taken as the good checksums the wire carried (``offload`` mode)
    or dropped by the NIC (``strict``)."""
    frame_count: int | None = None
    """Frames sent or received by ``ip``, when a streamed run kept only the count
    (``frames`` and ``flows`` are then empty)."""

    @property
    def relevant_frames(self) -> int:
        """How many frames of the capture were sent or received by ``ip``."""
        return len(self.frames) if self.frame_count is None else self.frame_count

    @property
    def ipv6(self) -> bool:
        return len(self.ip) == 16


def load(path: str | Path | IO[bytes], ip: bytes, checksums: Mode = Mode.OFFLOAD, *,
         name: str | None = None) -> Recording:
    """Read ``path`` and classify its TCP frames relative to the address ``ip``.

    ``checksums`` decides which frames the emulated host's NIC drops: ``strict`` drops
    every frame whose checksum is not correct (the NIC's view), ``offload`` takes TX
    checksum offload artefacts (the capture was taken on the sending host) as the good
    checksums the wire carried, ``off`` drops none.

    ``path`` is a file name or a binary file object; ``name`` is how reports call the
    capture (default: ``path``).

    Raises :class:`RecordingError` for an unreadable file, a non-Ethernet capture, or a
    capture with no TCP frame sent or received by ``ip``.
    """
    # Loading makes hundreds of thousands of objects (records, segments, frames) that all
    # stay alive: pausing the cyclic collector while loading reclaims nothing less.
    with paused():
        return _load(path, ip, checksums, name if name is not None else str(path))


def _load(source: str | Path | IO[bytes], ip: bytes, checksums: Mode, path: str
          ) -> Recording:
    damage = ""
    artefacts: dict[bytes, int] = {}
    try:
        raws, fault = read_intact(source)
    except OSError as unreadable:
        raise RecordingError(f"{path}: cannot read: {unreadable.strerror or unreadable}"
                             ) from None
    if fault is not None:
        if not raws:
            raise RecordingError(f"{path}: {fault}")
        # A capture cut short (an interrupted tcpdump): replay what is intact.
        damage = f"the capture is damaged after frame {len(raws)} ({fault}); replayed up to it"
    if not raws:
        raise RecordingError(f"{path}: the capture holds no frames")
    bad_links = {r.linktype for r in raws if r.linktype != LINKTYPE_ETHERNET}
    if bad_links:
        raise RecordingError(f"{path}: not Ethernet (link type {min(bad_links)}); replay "
                             "needs Ethernet frames, with or without 802.1Q")
    t0 = next((r.time_ns for r in raws if r.time_ns is not None), 0)
    last_ns = t0
    frames: list[Frame] = []
    flows: dict[FlowKey, Flow] = {}
    ignored: dict[str, int] = {}
    mac = b""
    vlan: int | None = None
    neighbours: dict[bytes, bytes] = {}
    decode = codec.decode
    for number, raw in enumerate(raws, start=1):
        nic_dropped = ""
        if raw.time_ns is not None:
            last_ns = raw.time_ns
        try:
            seg = decode(raw.frame)
        except codec.DecodeError as exc:
            lenient = after_refusal(raw.frame, exc)
            if isinstance(lenient, Undecodable):
                ignored[lenient.reason] = ignored.get(lenient.reason, 0) + 1
                continue
            seg = lenient.seg
            if seg.dst_ip == ip:
                nic_dropped, artefact = nic_verdict(lenient, checksums)
                if artefact:
                    artefacts[seg.src_ip] = artefacts.get(seg.src_ip, 0) + 1
        vid = NO_VLAN if seg.vlan is None else seg.vlan  # the FlowKey's VLAN id
        if seg.src_ip == ip:
            outbound = True
            key: FlowKey = (ip, seg.sport, seg.dst_ip, seg.dport, vid)
            nic_dropped = ""  # checksum offload: the sender's NIC fills them in later
            if not mac:
                mac, vlan = seg.src_mac, seg.vlan
            neighbours.setdefault(seg.dst_ip, seg.dst_mac)
        elif seg.dst_ip == ip:
            outbound = False
            key = (ip, seg.dport, seg.src_ip, seg.sport, vid)
            if not mac:
                mac, vlan = seg.dst_mac, seg.vlan
            neighbours[seg.src_ip] = seg.src_mac
        else:
            ignored["other hosts"] = ignored.get("other hosts", 0) + 1
            continue
        frame = Frame(number, last_ns - t0, seg, outbound, key, nic_dropped)
        frames.append(frame)
        flow = flows.get(key)
        if flow is None:
            flow = flows[key] = Flow(key)
        flow.frames.append(frame)
    if not frames:
        raise RecordingError(f"{path}: no TCP frames sent or received by {ip_text(ip)} "
                             f"(addresses in the capture: {_addresses(raws)})")
    frames.sort(key=lambda f: (f.time_ns, f.number))
    end_ns = max(frames[-1].time_ns, last_ns - t0)
    return Recording(path, ip, frames, flows, mac, vlan, neighbours, len(raws), ignored,
                     end_ns, t0, damage, checksums, artefacts)


def nic_verdict(lenient: Lenient, checksums: Mode) -> tuple[str, bool]:
    """For a frame the emulated host receives that the strict decoder refused (a
    checksum): why its NIC drops it under ``checksums`` (empty when it takes it), and
    whether its TCP checksum is a TX offload artefact."""
    # A wrong IPv4 header checksum is never an offload artefact: the stack computes it.
    verdict = lenient.checksum if lenient.ip_ok else Verdict.BAD
    artefact = verdict is Verdict.OFFLOAD
    if checksums is Mode.OFF or (checksums is Mode.OFFLOAD and artefact):
        return "", artefact
    return lenient.refusal, artefact


# ---- what a segment carries, in MPA terms ------------------------------------------

def offload_classes(frames: Sequence[tuple[bool, Segment]]) -> list[bool]:
    """For each frame sent by the emulated host (``outbound``), in order: True when only
    the NIC's QP produces it (see :class:`OffloadClassifier`)."""
    classifier = OffloadClassifier()
    out: list[bool] = []
    for outbound, seg in frames:
        nic = classifier.feed(outbound, seg)
        if nic is not None:
            out.append(nic)
    return out


class OffloadClassifier:
    """Classifies one flow's frames as they come: which frames of the emulated host only
    the NIC's QP produces.

    The hand-off point is the accepting MPA reply (R=0) sent by the responder (the side
    that received the first SYN) after a request. A passive host's frames after its reply
    are the QP's. An active host's first pure ACK after the reply is the CM's
    (``irdma_handle_rcv_mpa`` acks the reply in OFFLOADED); the rest is the QP's.
    A "reply" from the initiator, or one before any request, is a malformed frame the CM
    handles (``irdma_parse_mpa``), not a hand-off.
    """

    __slots__ = ("cm_ack_pending", "initiator", "reply_by", "requested")

    def __init__(self) -> None:
        self.initiator: bool | None = None  # True: the emulated host sent the first SYN
        self.requested = False
        self.reply_by: bool | None = None
        self.cm_ack_pending = False

    def feed(self, outbound: bool, seg: Segment, kind: str | None = None) -> bool | None:
        """The next frame of the flow: None for a received frame, else True when only the
        NIC's QP sends it. ``kind`` is ``mpa_kind(seg.payload)`` when the caller has it."""
        if self.initiator is None and seg.flags & SYN and not seg.flags & ACK:
            self.initiator = outbound
        if kind is None:
            kind = mpa_kind(seg.payload) if seg.payload else ""
        if kind == "request":
            self.requested = True
            if self.initiator is None:  # the capture began after the handshake
                self.initiator = outbound
        handoff = (kind == "reply" and self.reply_by is None and self.requested
                   and self.initiator is not None and outbound != self.initiator)
        if not outbound:
            if handoff:
                self.reply_by = False
                self.cm_ack_pending = True
            return None
        if kind in ("request", "reply", "reject"):
            if handoff:
                self.reply_by = True
            return False
        if self.reply_by is None:
            return False
        if self.reply_by is False and self.cm_ack_pending and seg.flags == ACK \
                and not seg.payload:
            self.cm_ack_pending = False
            return False
        self.cm_ack_pending = False
        return True


def _addresses(raws: Sequence[CaptureRecord]) -> str:
    """The IP addresses of the capture's TCP frames, most frequent first (for the error
    that names an address the capture does not hold)."""
    counts: dict[bytes, int] = {}
    for raw in raws:
        lenient = decode_leniently(raw.frame)  # a wrong checksum still names its addresses
        if isinstance(lenient, Undecodable):
            continue
        seg = lenient.seg
        for addr in (seg.src_ip, seg.dst_ip):
            counts[addr] = counts.get(addr, 0) + 1
    if not counts:
        return "none"
    ranked = sorted(counts, key=lambda a: (-counts[a], a))
    shown = ", ".join(ip_text(a) for a in ranked[:8])
    return shown + (f" and {len(ranked) - 8} more" if len(ranked) > 8 else "")


def seq_len(seg: Segment) -> int:
    """Sequence space a segment takes: payload, SYN and FIN (RFC 9293 section 3.4)."""
    return len(seg.payload) + (1 if seg.flags & SYN else 0) + (1 if seg.flags & FIN else 0)


def stream_ends(frames: list[Frame]) -> list[tuple[int, int]]:
    """For each frame the recorded host sent: (frame number, end of its byte stream so
    far), in capture order."""
    out: list[tuple[int, int]] = []
    nxt: int | None = None
    for f in sorted((f for f in frames if f.outbound), key=lambda f: f.number):
        end = (f.seg.seq + seq_len(f.seg)) & MASK32
        if nxt is None or after(end, nxt) or f.seg.flags & SYN:
            nxt = end
        out.append((f.number, nxt))
    return out
