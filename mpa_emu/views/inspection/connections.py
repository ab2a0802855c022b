"""Grouping a capture's TCP frames into connections and telling each one's story: the
set-up, the FPDUs, the checksum reading, how it ended, a fingerprint of each side."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from mpa_emu.capture.checksums import OFFLOAD_NOTE, Mode, Verdict, is_error, mode_name
from mpa_emu.capture.decode import (
    InspectError,
    RawFrame,
    TcpFrame,
    decode_frame,
    endpoint,
    read_frames,
)
from mpa_emu.gc_tuning import streaming
from mpa_emu.judge.profile import Profiles
from mpa_emu.views.inspection import judging as stack_verdicts
from mpa_emu.views.inspection.fingerprint import fingerprints
from mpa_emu.views.inspection.fpdus import cut_fpdus, rdmap_findings, version_reactions
from mpa_emu.views.inspection.messages import group_messages
from mpa_emu.views.inspection.mpa_exchange import (
    Stream,
    handshake,
    mpa_frame,
    negotiation,
    side_stream,
    starts_reply,
)
from mpa_emu.views.inspection.report import CaptureReport, ConnectionReport, Direction
from mpa_emu.views.upper_protocol import analyse_connection
from mpa_emu.wire import seq as seq_space
from mpa_emu.wire.mpa import FLAG_MARKERS, KEY_REP, KEY_REQ
from mpa_emu.wire.segment import ACK, FIN, RST, SYN

LINGER_FRAMES = 10_000
"""A closed connection (an RST seen, or both FINs seen and each acknowledged by the other
side) is finished once this many further frames of the capture have been read without
one of its own: late retransmissions of a FIN or an ACK (TIME-WAIT, RFC 9293 section
3.6) still join it."""

IDLE_FRAMES = 100_000
"""A connection still open that has no frame among this many further frames of the
capture is finished as it stands (its report says it was open): a flow that went silent
(a SYN never answered, a capture started or stopped mid-connection) does not hold memory
until the end of an endless capture."""


class _Conn:
    """Frames of one connection while the capture is read."""

    __slots__ = (
        "client",
        "closed",
        "fin_ends",
        "fins_acked",
        "frames",
        "index",
        "key",
        "last_seen",
        "server",
        "vlan",
    )

    def __init__(self, index: int, first: TcpFrame, key: tuple[Any, ...]) -> None:
        from_client = not (first.flags & SYN and first.flags & ACK)
        a = (first.src, first.sport)
        b = (first.dst, first.dport)
        self.client, self.server = (a, b) if from_client else (b, a)
        self.vlan = first.vlan
        self.index = index
        self.key = key
        self.frames: list[TcpFrame] = []
        self.closed = False
        self.last_seen = 0
        # Per sender (src, sport): the sequence number just past its first FIN.
        self.fin_ends: dict[tuple[bytes, int], int] = {}
        self.fins_acked: set[tuple[bytes, int]] = set()

    def is_client(self, f: TcpFrame) -> bool:
        return (f.src, f.sport) == self.client

    def add(self, f: TcpFrame) -> None:
        """Take one frame; notice the end of the connection (an RST, or both FINs
        acknowledged: RFC 9293 section 3.6)."""
        self.frames.append(f)
        if f.flags & RST:
            self.closed = True
            return
        sender = (f.src, f.sport)
        if f.flags & FIN and sender not in self.fin_ends:
            self.fin_ends[sender] = seq_space.add(f.seq, len(f.payload) + 1)
        if f.flags & ACK:
            end = self.fin_ends.get((f.dst, f.dport))
            if end is not None and seq_space.at_or_after(f.ack, end):
                self.fins_acked.add((f.dst, f.dport))
                if len(self.fins_acked) == 2:
                    self.closed = True


def _key(f: TcpFrame) -> tuple[Any, ...]:
    ends = sorted([(f.src, f.sport), (f.dst, f.dport)])
    return (f.vlan, *ends[0], *ends[1])


def _read_with_damage(path: str | Path, damage: list[str]) -> Iterator[RawFrame]:
    count = 0
    try:
        for raw in read_frames(path):
            count += 1
            yield raw
    except InspectError as exc:
        if count == 0:
            raise
        damage.append(str(exc))


def inspect_capture(path: str | Path, checksums: Mode = Mode.OFFLOAD,
                    profiles: Profiles | None = None) -> CaptureReport:
    """Read a capture and analyse every TCP connection in it, reading TCP checksums as
    ``checksums`` says and judging each side by its stack (``profiles`` given, else its
    fingerprint). A file damaged part-way is analysed up to the damage, which is
    reported as a problem. ``-`` reads standard input."""
    damage: list[str] = []
    report = inspect_frames(_read_with_damage(path, damage), str(path), checksums, profiles)
    report.problems.extend(damage)
    return report


def inspect_frames(frames: Iterable[RawFrame], name: str = "",
                   checksums: Mode = Mode.OFFLOAD,
                   profiles: Profiles | None = None) -> CaptureReport:
    """Analyse already-read frames (see :func:`~mpa_emu.capture.decode.read_frames`)."""
    report = CaptureReport(path=name, checksums=mode_name(checksums))
    conns = list(stream_connections(frames, report, checksums, profiles=profiles))
    conns.sort(key=lambda c: c.index)
    report.connections = conns
    return report


def stream_capture(path: str | Path, report: CaptureReport,
                   checksums: Mode = Mode.OFFLOAD,
                   profiles: Profiles | None = None) -> Iterator[ConnectionReport]:
    """:func:`stream_connections` over a capture file (``-``: standard input); damage
    part-way is added to ``report.problems`` when the stream ends."""
    damage: list[str] = []
    yield from stream_connections(_read_with_damage(path, damage), report, checksums,
                                  profiles=profiles)
    report.problems.extend(damage)


def stream_connections(frames: Iterable[RawFrame], report: CaptureReport,
                       checksums: Mode = Mode.OFFLOAD, *, linger: int | None = None,
                       idle: int | None = None,
                       profiles: Profiles | None = None) -> Iterator[ConnectionReport]:
    """Analyse frames as they are read, yielding each connection's report as soon as the
    connection is finished (after ``linger`` frames once closed, ``idle`` frames when
    silent: see :data:`LINGER_FRAMES` and :data:`IDLE_FRAMES`; every
    connection still held is finished at the end). Reports come in the order connections
    finish; their ``index`` numbers them by first frame. ``report`` collects the frame
    counts and the frame-level problems; its ``connections`` are left alone.

    Memory holds the frames of connections still open or lingering, never the capture.
    ``profiles`` give the stack of a side by its address (else it is fingerprinted)."""
    # A connection's report is a web of records that only a full collection frees once
    # young collections have promoted it: collected every so many connections (more
    # while many are held), the peak stays flat however long the capture.
    with streaming(CONNECTIONS_PER_COLLECTION) as collector:
        for conn in _connections(frames, report, checksums, linger=linger, idle=idle,
                                 profiles=profiles):
            collector.tick()
            yield conn


CONNECTIONS_PER_COLLECTION = 256


def _connections(frames: Iterable[RawFrame], report: CaptureReport,
                 checksums: Mode = Mode.OFFLOAD, *, linger: int | None = None,
                 idle: int | None = None,
                 profiles: Profiles | None = None) -> Iterator[ConnectionReport]:
    """The work of :func:`stream_connections`."""
    # The windows are read here, not bound as defaults, so one setting reaches every
    # caller (a test narrows them to measure memory past them on short captures).
    linger = LINGER_FRAMES if linger is None else linger
    idle = IDLE_FRAMES if idle is None else idle
    live: dict[tuple[Any, ...], _Conn] = {}
    # Connections by last activity, oldest first (dicts keep insertion order).
    open_: dict[int, _Conn] = {}
    closed: dict[int, _Conn] = {}
    count = 0
    for raw in frames:
        report.frames += 1
        decoded = decode_frame(raw)
        if decoded is not None:
            if isinstance(decoded, str):
                report.problems.append(decoded)
            else:
                report.tcp_frames += 1
                key = _key(decoded)
                conn = live.get(key)
                if conn is not None and _starts_new_connection(conn, decoded):
                    # Nothing can join the old connection any more.
                    (closed if conn.closed else open_).pop(conn.index, None)
                    yield _analyse(conn, checksums, profiles)
                    conn = None
                if conn is None:
                    count += 1
                    conn = _Conn(count, decoded, key)
                    live[key] = conn
                else:
                    (closed if conn.closed else open_).pop(conn.index, None)
                conn.add(decoded)
                conn.last_seen = report.frames
                (closed if conn.closed else open_)[conn.index] = conn
        for held, limit in ((closed, linger), (open_, idle)):
            while held:
                oldest = next(iter(held.values()))
                if report.frames - oldest.last_seen < limit:
                    break
                del held[oldest.index]
                if live.get(oldest.key) is oldest:
                    del live[oldest.key]
                yield _analyse(oldest, checksums, profiles)
    rest = sorted([*open_.values(), *closed.values()], key=lambda c: c.index)
    open_.clear()
    closed.clear()
    live.clear()
    for conn in rest:
        yield _analyse(conn, checksums, profiles)


def _starts_new_connection(conn: _Conn, f: TcpFrame) -> bool:
    """A fresh SYN (new ISN) on a 4-tuple whose previous connection was reset or whose
    SYN had another ISN: irdma's v2 -> v1 retry reuses the 4-tuple (irdma_handle_rst_pkt in
    SYN_SENT/MPAREQ_SENT)."""
    if not (f.flags & SYN) or f.flags & ACK:
        return False
    first_syn = next((x for x in conn.frames if x.flags & SYN and not x.flags & ACK), None)
    if first_syn is None:
        return bool(conn.frames)
    return first_syn.seq != f.seq


def _orient(conn: _Conn) -> None:
    """Without a SYN in the capture, the client is the side that sent the MPA request."""
    if any(f.flags & SYN for f in conn.frames):
        return
    first = next((f for f in conn.frames if f.payload.startswith((KEY_REQ, KEY_REP))), None)
    if first is not None and conn.is_client(first) != first.payload.startswith(KEY_REQ):
        conn.client, conn.server = conn.server, conn.client


def _analyse(conn: _Conn, mode: Mode, profiles: Profiles | None = None) -> ConnectionReport:
    _orient(conn)
    rep = ConnectionReport(index=conn.index, client=endpoint(*conn.client),
                           server=endpoint(*conn.server), vlan=conn.vlan,
                           first_frame=conn.frames[0].number,
                           last_frame=conn.frames[-1].number, frames=len(conn.frames))
    sides = {True: Direction(), False: Direction()}
    for f in conn.frames:
        d = sides[conn.is_client(f)]
        _frame_findings(rep, d, f, mode)
        if f.comment:
            rep.comments.append((f.number, f.comment))
        if f.flags & (SYN | FIN | RST) or f.payload.startswith((KEY_REQ, KEY_REP)):
            rep.times[f.number] = f.time
        if f.flags & SYN:
            d.syn_count += 1
            if d.isn is None:
                d.isn, d.syn_frame, d.options = f.seq, f.number, f.options
                d.option_kinds, d.syn_window = f.option_kinds, f.window
        if f.payload or f.missing:
            d.segments.append((f.number, f.seq, f.payload))
        if f.missing:
            d.short[f.number] = f.missing
        if f.flags & FIN:
            d.fins.append((f.number, seq_space.add(f.seq, len(f.payload))))
        if f.flags & RST:
            d.rsts.append(f.number)
    rep.times[conn.frames[-1].number] = conn.frames[-1].time
    client, server = sides[True], sides[False]
    _offload_notes(rep, client, server, mode)
    handshake(rep, conn.frames, client, server)
    c_stream = side_stream(rep, client, "client")
    s_stream = side_stream(rep, server, "server")
    rep.request = mpa_frame(rep, client, c_stream, request=True)
    if rep.request is not None or starts_reply(s_stream, server):
        rep.reply = mpa_frame(rep, server, s_stream, request=False)
    negotiation(rep)
    if rep.request is not None and rep.reply is not None and not rep.reply.reject:
        crc = bool(rep.crc)
        markers = bool((rep.request.flags | rep.reply.flags) & FLAG_MARKERS)
        # RFC 6581 section 4.1/5: an RTR exists only in peer-to-peer mode, P2P (A) set
        # in both the request and the reply; in MPA v1, or v2 without P2P, the first
        # FPDU is simply the ULP's first message.
        rtr = bool(rep.request.p2p and rep.reply.p2p)
        if rep.request.has_block and rep.reply.has_block and not rtr:
            rep.rtr = "none: P2P not negotiated, the first FPDU is the ULP's (RFC 6581 " \
                "section 5)"
        cut_fpdus(rep, client, c_stream, "client", rep.request.frame_len, crc,
                  markers, rtr=rtr)
        cut_fpdus(rep, server, s_stream, "server", rep.reply.frame_len, crc,
                  markers, rtr=False)
        rep.fpdu_list.sort(key=lambda info: info.frame)  # both sides, in frame order
        rep.messages = sorted(group_messages(rep.fpdu_list, "client")
                              + group_messages(rep.fpdu_list, "server"),
                              key=lambda m: m.first_frame)
        rdmap_findings(rep, {"client": _from_start(c_stream, client),
                             "server": _from_start(s_stream, server)})
    version_reactions(rep, {"client": client, "server": server})
    rep.ended = _ending(rep, client, server, c_stream, s_stream)
    rep.closes = sorted([(n, side, "FIN") for side, d in (("client", client), ("server", server))
                         for n, _ in d.fins]
                        + [(n, side, "RST") for side, d in (("client", client),
                                                            ("server", server))
                           for n in d.rsts])
    stack_verdicts.judge_connection(rep, client, server, c_stream, s_stream, profiles)
    rep.ulp = analyse_connection(rep, c_stream, s_stream)
    fingerprints(rep, client, server)
    rep.findings.sort(key=lambda x: (x.frame or 0))
    return rep


def _from_start(stream: Stream, d: Direction) -> bool:
    return bool(stream) and d.isn is not None


def _frame_findings(rep: ConnectionReport, d: Direction, f: TcpFrame, mode: Mode) -> None:
    for p in f.problems:
        if p == "bad IPv4 header checksum" and mode is Mode.OFF:
            continue
        error = p.startswith(("bad", "TCP option", "MSS"))
        rep.add(f.number, "error" if error else "note", p, rule="bad-tcp" if error else None)
    if f.checksum is Verdict.OFFLOAD and mode is Mode.OFFLOAD:
        d.offload_frames.append(f.number)
    elif is_error(f.checksum, mode):
        what = "TX offload partial sum" if f.checksum is Verdict.OFFLOAD else "bad"
        rep.add(f.number, "error", f"bad TCP checksum ({what}; --checksums {mode})"
                if mode is Mode.STRICT and f.checksum is Verdict.OFFLOAD
                else "bad TCP checksum", rule="bad-tcp")


def _offload_notes(rep: ConnectionReport, client: Direction, server: Direction,
                   mode: Mode) -> None:
    """One note per side for frames whose TCP checksum is an offload artefact: the host
    the capture was taken on hands its NIC the pseudo-header sum (CHECKSUM_PARTIAL)."""
    for side, d in (("client", client), ("server", server)):
        if d.offload_frames:
            n = len(d.offload_frames)
            rep.add(d.offload_frames[0], "note", f"{side} frames: {OFFLOAD_NOTE} "
                    f"({n} frame{'s' if n > 1 else ''}, {_frames(d.offload_frames)})")


def _frames(numbers: list[int]) -> str:
    if len(numbers) <= 6:
        return "frames " + ", ".join(map(str, numbers)) if len(numbers) > 1 \
            else f"frame {numbers[0]}"
    return f"frames {numbers[0]}-{numbers[-1]}"


def _ending(rep: ConnectionReport, client: Direction, server: Direction,
            c_stream: Stream, s_stream: Stream) -> str:
    """Every FIN and RST in frame order with its direction, and data a side sent after
    the other side's FIN (which it may, TCP half-close, RFC 9293 section 3.6) or after its
    own (which it may not)."""
    events: list[tuple[int, str]] = []
    for side, d in (("client", client), ("server", server)):
        seen: set[int] = set()
        for frame, seq in d.fins:
            again = " again" if seq in seen else ""
            seen.add(seq)
            events.append((frame, f"FIN from the {side}{again} (frame {frame})"))
        events += [(frame, f"RST from the {side} (frame {frame})") for frame in d.rsts]
    for side, d, stream, other, other_name in (
            ("client", client, c_stream, server, "server"),
            ("server", server, s_stream, client, "client")):
        after = _data_after(stream, other.fin_frame, d.short)
        if after:
            frames = sorted({f for f, _ in after})
            size = sum(n for _, n in after)
            text = (f"{side} data after the {other_name}'s FIN: {size} bytes "
                    f"({_frames(frames)})")
            events.append((frames[0], text))
            rep.add(frames[0], "warning", f"{text}; the {other_name} had closed its "
                    f"side in frame {other.fin_frame}", rule="data-after-fin")
        if d.fins:
            fin_frame, fin_seq = d.fins[0]
            late = [f for f, seq, data in d.segments
                    if f > fin_frame and seq_space.at_or_after(seq, fin_seq)]
            if late:
                rep.add(late[0], "error", f"{side} sends data past its own FIN (frame "
                        f"{fin_frame}): the FIN ends its stream (RFC 9293 section 3.6)",
                        rule="data-after-fin")
    events.sort()
    if not events:
        return "open at end of capture"
    kind = ("reset" if client.rsts or server.rsts else
            "closed" if client.fins and server.fins else "half-closed")
    return f"{kind}: " + ", ".join(text for _, text in events)


def _data_after(stream: Stream, fin_frame: int | None,
                short: dict[int, int]) -> list[tuple[int, int]]:
    """(frame, bytes) of new stream data carried in frames after ``fin_frame``, counting
    the bytes a frame captured short did not keep."""
    if fin_frame is None:
        return []
    return [(frame, len(data) + short.get(frame, 0)) for frame, _, data in stream
            if frame > fin_frame]
