"""The story of every TCP connection in a capture, told the way an iWARP engineer reads it.

:func:`inspect_capture` reads any pcap or pcapng (ours or not; Ethernet with or without
802.1Q, Linux cooked, raw IP), groups frames into TCP connections and reports for each:
the handshake (who, ISNs, MSS/WS/SACK/TS), the MPA request and reply (version, flags,
IRD/ORD, RTR offered and chosen, private data in hex and text, reject reason), the RTR and
FPDUs after the reply, how the connection ended, and everything malformed, including what
irdma would refuse (``irdma_parse_mpa`` has no reassembly). Bad bytes never raise: they
become findings.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mpa_emu.addr import ip_text
from mpa_emu.capture import CaptureError, read_capture
from mpa_emu.codec import ones_complement_sum
from mpa_emu.ddp import DdpFormatError, Opcode, parse_segment
from mpa_emu.ladder import RDMAP_OPCODES
from mpa_emu.mpa import (
    FLAG_CRC,
    FLAG_ENHANCED,
    FLAG_MARKERS,
    FLAG_REJECT,
    FLAG_RESERVED,
    FRAME_SIZE,
    IRD_ORD_MASK,
    KEY_REP,
    KEY_REQ,
    KEY_SIZE,
    MAX_PRIV_DATA_LEN,
    RTR_MSG_SIZE,
    MpaFormatError,
    RtrBlock,
    crc32c,
    unframe_fpdu,
)
from mpa_emu.segment import ACK, FIN, RST, SYN

IRDMA_MAX_CM_BUF = 544  # IRDMA_MAX_CM_BUF: irdma_parse_mpa refuses longer payloads

# Link-layer types (pcap LINKTYPE_*).
IRDMA_RCV_WND = 65535
"""irdma's receive window for irdma_check_seq: the unscaled TCP window field (spec 2.1)."""

LINK_ETHERNET = 1
LINK_RAW = (101, 12, 14)
LINK_IPV4 = 228
LINK_IPV6 = 229
LINK_SLL = 113
LINK_SLL2 = 276

class InspectError(Exception):
    """The file is not a readable capture at all (missing, not pcap/pcapng)."""


# ---- reading -----------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class RawFrame:
    """One captured frame as stored: number (1-based), time, link type, bytes."""

    number: int
    time: float
    linktype: int
    data: bytes
    wirelen: int
    comment: str = ""


def read_frames(path: str | Path) -> Iterator[RawFrame]:
    """Frames of a pcap or pcapng file, read by :func:`mpa_emu.capture.read_capture`.

    Raises :class:`InspectError` for an unreadable file, or when the file turns out
    damaged part-way (the frames before the damage have been yielded).
    """
    number = 0
    try:
        for rec in read_capture(path):
            number += 1
            yield RawFrame(number=number, time=(rec.time_ns or 0) / 1e9,
                           linktype=rec.linktype, data=rec.frame,
                           wirelen=max(rec.orig_len, len(rec.frame)),
                           comment=(rec.comment or "").replace("\n", "; "))
    except CaptureError as exc:
        where = f"after frame {number}: " if number else ""
        raise InspectError(f"{path}: {where}{exc}") from None


# ---- decoding one frame ------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class TcpFrame:
    """The fields of one TCP segment that the connection analysis needs."""

    number: int
    time: float
    vlan: int | None
    src: bytes
    dst: bytes
    sport: int
    dport: int
    seq: int
    ack: int
    flags: int
    window: int
    options: dict[str, Any]
    payload: bytes
    problems: tuple[str, ...]
    comment: str = ""

    @property
    def endpoint_src(self) -> str:
        return _endpoint(self.src, self.sport)

    @property
    def endpoint_dst(self) -> str:
        return _endpoint(self.dst, self.dport)


def _endpoint(ip: bytes, port: int) -> str:
    text = ip_text(ip)
    return f"[{text}]:{port}" if len(ip) == 16 else f"{text}:{port}"


def decode_frame(raw: RawFrame) -> TcpFrame | str | None:
    """Decode one frame: a :class:`TcpFrame`, a one-line problem, or ``None`` for a frame
    that is simply not TCP (ARP, UDP, ...)."""
    data = raw.data
    vlan: int | None = None
    try:
        if raw.linktype == LINK_ETHERNET:
            if len(data) < 14:
                return f"frame {raw.number}: Ethernet header truncated"
            ethertype = struct.unpack_from("!H", data, 12)[0]
            off = 14
            while ethertype in (0x8100, 0x88A8):
                if len(data) < off + 4:
                    return f"frame {raw.number}: 802.1Q tag truncated"
                tci, ethertype = struct.unpack_from("!HH", data, off)
                vlan = tci & 0x0FFF if vlan is None else vlan
                off += 4
        elif raw.linktype == LINK_SLL:
            if len(data) < 16:
                return f"frame {raw.number}: Linux cooked header truncated"
            ethertype, off = struct.unpack_from("!H", data, 14)[0], 16
        elif raw.linktype == LINK_SLL2:
            if len(data) < 20:
                return f"frame {raw.number}: Linux cooked v2 header truncated"
            ethertype, off = struct.unpack_from("!H", data, 0)[0], 20
        elif raw.linktype in (*LINK_RAW, LINK_IPV4, LINK_IPV6):
            if not data:
                return f"frame {raw.number}: empty"
            ethertype, off = (0x0800 if data[0] >> 4 == 4 else 0x86DD), 0
        else:
            return f"frame {raw.number}: link type {raw.linktype} not supported, skipped"
        return _decode_ip(raw, data, off, ethertype, vlan)
    except (struct.error, IndexError, ValueError) as exc:
        return f"frame {raw.number}: undecodable ({exc})"


def _decode_ip(raw: RawFrame, data: bytes, off: int, ethertype: int,
               vlan: int | None) -> TcpFrame | str | None:
    problems: list[str] = []
    truncated = raw.wirelen > len(raw.data)
    if ethertype == 0x0800:
        if len(data) < off + 20:
            return f"frame {raw.number}: IPv4 header truncated"
        ihl = (data[off] & 0x0F) * 4
        total_len = struct.unpack_from("!H", data, off + 2)[0]
        proto = data[off + 9]
        if proto != 6:
            return None
        if ihl < 20 or len(data) < off + ihl:
            return f"frame {raw.number}: bad IPv4 header length {ihl}"
        if ones_complement_sum(data[off:off + ihl]) != 0:  # RFC 1071: valid sums to -0
            problems.append("bad IPv4 header checksum")
        src, dst = data[off + 12:off + 16], data[off + 16:off + 20]
        end = off + total_len if total_len >= ihl else len(data)
        l4 = data[off + ihl:min(end, len(data))]
        pseudo = src + dst + struct.pack("!BBH", 0, 6, end - off - ihl)
    elif ethertype == 0x86DD:
        if len(data) < off + 40:
            return f"frame {raw.number}: IPv6 header truncated"
        plen, nxt = struct.unpack_from("!HB", data, off + 4)
        if nxt != 6:
            return None  # extension headers are not followed: iWARP CMs do not send them
        src, dst = data[off + 8:off + 24], data[off + 24:off + 40]
        l4 = data[off + 40:off + 40 + plen]
        pseudo = src + dst + struct.pack("!IxxxB", plen, 6)
    else:
        return None
    if len(l4) < 20:
        return f"frame {raw.number}: TCP header truncated"
    sport, dport, seq, ack, offflags, window = struct.unpack_from("!HHIIHH", l4)
    doff = (offflags >> 12) * 4
    flags = offflags & 0xFF
    if doff < 20 or doff > len(l4):
        return f"frame {raw.number}: bad TCP data offset {doff}"
    if not truncated and ones_complement_sum(pseudo + l4) != 0:
        problems.append("bad TCP checksum")
    if truncated:
        problems.append(f"captured {len(raw.data)} of {raw.wirelen} bytes")
    options, opt_problem = parse_tcp_options(l4[20:doff])
    if opt_problem:
        problems.append(opt_problem)
    return TcpFrame(number=raw.number, time=raw.time, vlan=vlan, src=src, dst=dst,
                    sport=sport, dport=dport, seq=seq, ack=ack, flags=flags, window=window,
                    options=options, payload=bytes(l4[doff:]), problems=tuple(problems),
                    comment=raw.comment)


def parse_tcp_options(raw: bytes) -> tuple[dict[str, Any], str]:
    """MSS, WS, SACK-permitted and timestamps from TCP option bytes, and a problem text
    (empty when none). A length-0 option is reported: irdma_process_options loops forever
    on it (spec errata 7)."""
    opts: dict[str, Any] = {}
    i = 0
    while i < len(raw):
        kind = raw[i]
        if kind == 0:
            break
        if kind == 1:
            i += 1
            continue
        if i + 1 >= len(raw):
            return opts, f"TCP option {kind} truncated"
        length = raw[i + 1]
        if length < 2:
            return opts, (f"TCP option {kind} has length {length} "
                          "(irdma_process_options would loop forever)")
        body = raw[i + 2:i + length]
        if i + length > len(raw):
            return opts, f"TCP option {kind} runs past the header"
        if kind == 2 and length == 4:
            opts["mss"] = struct.unpack("!H", body)[0]
        elif kind == 2:
            return opts, f"MSS option of length {length} (irdma_process_options: -EINVAL)"
        elif kind == 3 and length == 3:
            opts["ws"] = body[0]
        elif kind == 4:
            opts["sack_perm"] = True
        elif kind == 8 and length == 10:
            opts["ts"] = struct.unpack("!II", body)
        else:
            opts.setdefault("other", []).append(kind)
        i += length
    return opts, ""


def options_text(opts: dict[str, Any]) -> str:
    """``MSS 1460, WS 2, SACK, TS`` (or ``no options``)."""
    parts = []
    if "mss" in opts:
        parts.append(f"MSS {opts['mss']}")
    if "ws" in opts:
        parts.append(f"WS {opts['ws']}")
    if opts.get("sack_perm"):
        parts.append("SACK")
    if "ts" in opts:
        parts.append("TS")
    parts.extend(f"option {k}" for k in opts.get("other", []))
    return ", ".join(parts) if parts else "no options"


# ---- reports -----------------------------------------------------------------------

@dataclass(slots=True)
class Finding:
    """Something malformed or noteworthy. ``severity`` is ``error`` (violates RFC 5044 /
    6581 or irdma would refuse it), ``warning`` (legal but trouble) or ``note``."""

    frame: int | None
    severity: str
    text: str


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

    @property
    def reject(self) -> bool:
        return bool(self.flags & FLAG_REJECT)

    @property
    def has_block(self) -> bool:
        return self.ird is not None

    def flag_names(self) -> str:
        names = [n for bit, n in ((FLAG_MARKERS, "M"), (FLAG_CRC, "C"), (FLAG_REJECT, "R"),
                                  (FLAG_ENHANCED, "S")) if self.flags & bit]
        if self.flags & FLAG_RESERVED:
            names.append(f"res=0x{self.flags & FLAG_RESERVED:x}")
        return " ".join(names) or "none"

    def rtr_names(self) -> list[str]:
        return [n for ok, n in ((self.zero_len_send, "send"), (self.write_rtr, "write"),
                                (self.read_rtr, "read")) if ok]


@dataclass(slots=True)
class Direction:
    """One side's byte stream."""

    isn: int | None = None
    syn_frame: int | None = None
    syn_count: int = 0
    options: dict[str, Any] = field(default_factory=dict)
    segments: list[tuple[int, int, bytes]] = field(default_factory=list)  # (frame, seq, data)
    fin_frame: int | None = None
    rst_frame: int | None = None
    retransmissions: int = 0
    fpdus: int = 0
    bad_crc: int = 0
    opcodes: dict[str, int] = field(default_factory=dict)


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
    rtr: str = ""
    fpdus: list[str] = field(default_factory=list)
    ended: str = "open at end of capture"
    findings: list[Finding] = field(default_factory=list)
    comments: list[tuple[int, str]] = field(default_factory=list)

    def add(self, frame: int | None, severity: str, text: str) -> None:
        self.findings.append(Finding(frame, severity, text))

    @property
    def errors(self) -> int:
        return sum(1 for f in self.findings if f.severity == "error")


@dataclass(slots=True)
class CaptureReport:
    """All connections of a capture plus frame-level problems."""

    path: str
    frames: int = 0
    tcp_frames: int = 0
    connections: list[ConnectionReport] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    hidden: int = 0
    """Connections of the capture left out of ``connections`` by a selection."""

    @property
    def errors(self) -> int:
        return sum(c.errors for c in self.connections) + len(self.problems)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (bytes as hex)."""
        return _jsonable(asdict(self))  # type: ignore[no-any-return]


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


# ---- analysis ----------------------------------------------------------------------

class _Conn:
    """Frames of one connection while the capture is read."""

    def __init__(self, index: int, first: TcpFrame) -> None:
        from_client = not (first.flags & SYN and first.flags & ACK)
        a = (first.src, first.sport)
        b = (first.dst, first.dport)
        self.client, self.server = (a, b) if from_client else (b, a)
        self.vlan = first.vlan
        self.index = index
        self.frames: list[TcpFrame] = []
        self.closed = False

    def is_client(self, f: TcpFrame) -> bool:
        return (f.src, f.sport) == self.client


def _key(f: TcpFrame) -> tuple[Any, ...]:
    ends = sorted([(f.src, f.sport), (f.dst, f.dport)])
    return (f.vlan, *ends[0], *ends[1])


def inspect_capture(path: str | Path) -> CaptureReport:
    """Read a capture and analyse every TCP connection in it. A file damaged part-way is
    analysed up to the damage, which is reported as a problem."""
    damage: list[str] = []

    def frames() -> Iterator[RawFrame]:
        count = 0
        try:
            for raw in read_frames(path):
                count += 1
                yield raw
        except InspectError as exc:
            if count == 0:
                raise
            damage.append(str(exc))

    report = inspect_frames(frames(), str(path))
    report.problems.extend(damage)
    return report


def inspect_frames(frames: Iterable[RawFrame], name: str = "") -> CaptureReport:
    """Analyse already-read frames (see :func:`read_frames`)."""
    report = CaptureReport(path=name)
    live: dict[tuple[Any, ...], _Conn] = {}
    conns: list[_Conn] = []
    for raw in frames:
        report.frames += 1
        decoded = decode_frame(raw)
        if decoded is None:
            continue
        if isinstance(decoded, str):
            report.problems.append(decoded)
            continue
        report.tcp_frames += 1
        key = _key(decoded)
        conn = live.get(key)
        if conn is not None and _starts_new_connection(conn, decoded):
            conn = None
        if conn is None:
            conn = _Conn(len(conns) + 1, decoded)
            conns.append(conn)
            live[key] = conn
        conn.frames.append(decoded)
        if decoded.flags & RST:
            conn.closed = True
    report.connections = [_analyse(c) for c in conns]
    return report


def _starts_new_connection(conn: _Conn, f: TcpFrame) -> bool:
    """A fresh SYN (new ISN) on a 4-tuple whose previous connection was reset or whose
    SYN had another ISN: irdma's v2 -> v1 retry reuses the 4-tuple (spec 2.2, RST row)."""
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


def _analyse(conn: _Conn) -> ConnectionReport:
    _orient(conn)
    rep = ConnectionReport(index=conn.index, client=_endpoint(*conn.client),
                           server=_endpoint(*conn.server), vlan=conn.vlan,
                           first_frame=conn.frames[0].number,
                           last_frame=conn.frames[-1].number, frames=len(conn.frames))
    sides = {True: Direction(), False: Direction()}
    for f in conn.frames:
        d = sides[conn.is_client(f)]
        for p in f.problems:
            rep.add(f.number, "error" if p.startswith(("bad", "TCP option", "MSS")) else "note",
                    p)
        if f.comment:
            rep.comments.append((f.number, f.comment))
        if f.flags & SYN:
            d.syn_count += 1
            if d.isn is None:
                d.isn, d.syn_frame, d.options = f.seq, f.number, f.options
        if f.payload:
            d.segments.append((f.number, f.seq, f.payload))
        if f.flags & FIN and d.fin_frame is None:
            d.fin_frame = f.number
        if f.flags & RST and d.rst_frame is None:
            d.rst_frame = f.number
    client, server = sides[True], sides[False]
    _handshake(rep, conn, client, server)
    c_stream = _stream(rep, client, "client")
    s_stream = _stream(rep, server, "server")
    rep.request = _mpa(rep, client, c_stream, request=True)
    if rep.request is not None or (s_stream and s_stream[0][2].startswith(KEY_REP)):
        rep.reply = _mpa(rep, server, s_stream, request=False)
    _negotiation(rep)
    if rep.request is not None and rep.reply is not None and not rep.reply.reject:
        crc = bool((rep.request.flags | rep.reply.flags) & FLAG_CRC)
        markers = bool((rep.request.flags | rep.reply.flags) & FLAG_MARKERS)
        _fpdus(rep, client, c_stream, "client", FRAME_SIZE + rep.request.pd_length, crc,
               markers, first_is_rtr=True)
        _fpdus(rep, server, s_stream, "server", FRAME_SIZE + rep.reply.pd_length, crc,
               markers, first_is_rtr=False)
    rep.ended = _ending(conn, client, server)
    rep.findings.sort(key=lambda x: (x.frame or 0))
    return rep


def _handshake(rep: ConnectionReport, conn: _Conn, client: Direction,
               server: Direction) -> None:
    if client.syn_frame is None:
        rep.handshake.append("no SYN in the capture (connection already open)")
    else:
        retr = f", sent {client.syn_count} times" if client.syn_count > 1 else ""
        rep.handshake.append(f"SYN     frame {client.syn_frame}: ISN {client.isn} "
                             f"[{options_text(client.options)}]{retr}")
    if server.syn_frame is not None:
        retr = f", sent {server.syn_count} times" if server.syn_count > 1 else ""
        rep.handshake.append(f"SYN-ACK frame {server.syn_frame}: ISN {server.isn} "
                             f"[{options_text(server.options)}]{retr}")
        if client.isn is not None:
            synack = next(f for f in conn.frames if f.number == server.syn_frame)
            if synack.ack != (client.isn + 1) & 0xFFFFFFFF:
                rep.add(synack.number, "error", f"SYN-ACK acks {synack.ack}, expected "
                        f"{(client.isn + 1) & 0xFFFFFFFF} (irdma_check_syn: RST)")
    elif client.syn_frame is not None:
        if server.rst_frame is not None:
            rep.handshake.append(f"refused: RST from the server in frame {server.rst_frame}")
        else:
            rep.handshake.append("no SYN-ACK")
    for side, d in (("client", client), ("server", server)):
        mss = d.options.get("mss")
        if mss is not None and mss < 536:
            rep.add(d.syn_frame, "warning", f"{side} MSS {mss} < 536: irdma_process_options "
                    "rejects it")


def _stream(rep: ConnectionReport, d: Direction, side: str) -> list[tuple[int, int, bytes]]:
    """Data segments in stream order as (frame, stream offset, bytes), retransmissions and
    overlaps dropped, gaps reported."""
    if not d.segments:
        return []
    base = (d.isn + 1) & 0xFFFFFFFF if d.isn is not None else d.segments[0][1]
    out: list[tuple[int, int, bytes]] = []
    seen: dict[int, int] = {}
    for frame, seq, data in d.segments:
        off = (seq - base) & 0xFFFFFFFF
        if off >= 0x80000000:
            continue  # before the ISN: not ours to place
        if off in seen and seen[off] >= len(data):
            d.retransmissions += 1
            continue
        seen[off] = len(data)
        out.append((frame, off, data))
    out.sort(key=lambda x: x[1])
    stream: list[tuple[int, int, bytes]] = []
    nxt = 0
    for frame, off, data in out:
        if off + len(data) <= nxt:
            continue
        if off > nxt:
            if off - nxt > IRDMA_RCV_WND:
                # irdma_check_seq: seq must lie in [rcv_nxt, rcv_nxt + rcv_wnd], rcv_wnd 65535.
                rep.add(frame, "warning", f"{side} segment starts {off - nxt} bytes past the "
                        f"{side}'s data so far: outside irdma's receive window "
                        f"({IRDMA_RCV_WND}), irdma_check_seq drops it silently")
            else:
                rep.add(frame, "warning", f"{side} stream has {off - nxt} bytes missing "
                        "before this frame (not captured?)")
            break
        data = data[nxt - off:]
        stream.append((frame, nxt, data))
        nxt += len(data)
    return stream


def _bytes_at(stream: list[tuple[int, int, bytes]], start: int, length: int) -> bytes:
    out = bytearray()
    for _, off, data in stream:
        if off + len(data) <= start or off >= start + length:
            continue
        lo = max(start - off, 0)
        out += data[lo:lo + length - len(out)]
    return bytes(out)


def _frame_at(stream: list[tuple[int, int, bytes]], offset: int) -> int:
    for frame, off, data in stream:
        if off <= offset < off + len(data):
            return frame
    return stream[-1][0] if stream else 0


def _mpa(rep: ConnectionReport, d: Direction, stream: list[tuple[int, int, bytes]],
         request: bool) -> MpaInfo | None:
    if not stream:
        return None
    frame, _, first = stream[0]
    what = "request" if request else "reply"
    key = KEY_REQ if request else KEY_REP
    whole = _bytes_at(stream, 0, FRAME_SIZE)
    if whole[:KEY_SIZE] != key:
        other = KEY_REP if request else KEY_REQ
        if len(whole) < KEY_SIZE and key.startswith(whole):
            rep.add(frame, "error", f"MPA {what} cut short: only {len(whole)} bytes of the "
                    f"{FRAME_SIZE}-byte header (irdma_parse_mpa: -EINVAL, RST)")
        elif whole[:KEY_SIZE] == other:
            rep.add(frame, "error", f"MPA {what} expected, found the "
                    f"{'reply' if request else 'request'} key (irdma_parse_mpa: "
                    "\"Unexpected MPA Key\", RST)")
        elif whole[:4] == b"MPA ":
            rep.add(frame, "error", f"wrong MPA key {whole[:KEY_SIZE]!r} "
                    "(irdma_parse_mpa: -EINVAL, RST)")
        elif request:
            rep.add(frame, "note", "first client payload is not an MPA request: not iWARP")
        else:
            rep.add(frame, "error", "server's first payload is not an MPA reply "
                    f"({first[:16].hex()})")
        return None
    if len(whole) < FRAME_SIZE:
        rep.add(frame, "error", f"MPA {what} header incomplete ({len(whole)} bytes)")
        return None
    flags, rev, pd_length = struct.unpack_from("!BBH", whole, KEY_SIZE)
    info = MpaInfo(frame=frame, request=request, rev=rev, flags=flags, pd_length=pd_length)
    if len(first) < FRAME_SIZE + min(pd_length, MAX_PRIV_DATA_LEN):
        rep.add(frame, "error", f"MPA {what} split over segments: {len(first)} bytes here, "
                f"{FRAME_SIZE + pd_length} needed (irdma_parse_mpa has no reassembly: "
                "-EOVERFLOW, RST)")
    if len(first) > IRDMA_MAX_CM_BUF:
        rep.add(frame, "error", f"segment with the MPA {what} carries {len(first)} bytes, "
                f"over irdma's {IRDMA_MAX_CM_BUF} (irdma_parse_mpa: -EOVERFLOW)")
    elif len(first) > FRAME_SIZE + pd_length and not request:
        rep.add(frame, "warning", f"{len(first) - FRAME_SIZE - pd_length} bytes follow the "
                "MPA reply in the same segment (Wireshark does not dissect an FPDU there)")
    if pd_length > MAX_PRIV_DATA_LEN:
        rep.add(frame, "error", f"PD_Length {pd_length} > 512 (RFC 5044 section 7.1; "
                "irdma_parse_mpa: -EOVERFLOW)")
    if rev not in (1, 2):
        rep.add(frame, "error", f"unknown MPA revision {rev} (irdma_parse_mpa: -EINVAL)")
    if flags & FLAG_RESERVED:
        rep.add(frame, "warning", f"reserved flag bits 0x{flags & FLAG_RESERVED:x} set")
    if request and flags & FLAG_REJECT:
        rep.add(frame, "note", "R flag set in a request (irdma logs and ignores it)")
    if flags & FLAG_MARKERS:
        rep.add(frame, "note", "M flag set: markers requested (siw rejects such a request)")
    body = _bytes_at(stream, FRAME_SIZE, min(pd_length, MAX_PRIV_DATA_LEN))
    if len(body) < min(pd_length, MAX_PRIV_DATA_LEN):
        rep.add(frame, "error", f"PD_Length {pd_length} but only {len(body)} bytes of "
                "private data in the capture")
    if rev == 2 and not flags & FLAG_ENHANCED:
        rep.add(frame, "warning", "rev 2 without the enhanced flag 0x10: irdma reads the "
                "first 4 private data bytes as the RFC 6581 block anyway")
    if flags & FLAG_ENHANCED and rev != 2:
        rep.add(frame, "warning", f"enhanced flag 0x10 with rev {rev}")
    if rev == 2 and flags & FLAG_ENHANCED:
        if len(body) < RTR_MSG_SIZE:
            rep.add(frame, "error", "enhanced flag set but fewer than 4 bytes of private data")
            info.private_data = body
            return info
        block = RtrBlock.from_bytes(body)
        info.ird, info.ord = block.ird, block.ord
        info.p2p, info.zero_len_send = block.peer_to_peer, block.zero_len_send
        info.write_rtr, info.read_rtr = block.write0, block.read0
        body = body[RTR_MSG_SIZE:]
    info.private_data = body
    return info


def _negotiation(rep: ConnectionReport) -> None:
    req, reply = rep.request, rep.reply
    if req is None:
        return
    if req.has_block and not req.p2p:
        rep.add(req.frame, "warning", "request without P2P (A): an irdma responder resets "
                "it (irdma_negotiate_mpa_v2_ird_ord: -EOPNOTSUPP)")
    elif req.has_block and not (req.write_rtr or req.read_rtr):
        rep.add(req.frame, "warning", "request offers neither the Read nor the Write RTR: "
                "an irdma responder resets it (irdma_negotiate_mpa_v2_ird_ord: -EOPNOTSUPP)")
    if reply is None:
        rep.negotiated.append("no MPA reply in the capture")
        return
    if reply.rev > req.rev:
        rep.add(reply.frame, "error", f"reply rev {reply.rev} above the request's rev "
                f"{req.rev} (irdma_parse_mpa: -EINVAL)")
    crc = bool((req.flags | reply.flags) & FLAG_CRC)
    markers = bool((req.flags | reply.flags) & FLAG_MARKERS)
    rep.negotiated.append(f"MPA rev {reply.rev}, CRC {'on' if crc else 'off'}, markers "
                          f"{'on' if markers else 'off'}")
    if reply.reject:
        rep.negotiated.append("rejected by the responder")
    if not (req.has_block and reply.has_block):
        if req.has_block != reply.has_block and not reply.reject:
            rep.add(reply.frame, "warning", "only one side sent the RFC 6581 block")
        return
    assert req.ird is not None and req.ord is not None
    assert reply.ird is not None and reply.ord is not None
    rep.negotiated.append(f"initiator IRD {_val(req.ird)} ORD {_val(req.ord)}; "
                          f"responder IRD {_val(reply.ird)} ORD {_val(reply.ord)}")
    if not reply.p2p:
        rep.add(reply.frame, "error", "reply without P2P (A): an irdma initiator fails "
                "negotiation (irdma_negotiate_mpa_v2_ird_ord: -EOPNOTSUPP, RST)")
    chosen = reply.rtr_names()
    offered = req.rtr_names()
    rep.negotiated.append(f"RTR offered: {' '.join(offered) or 'none'}; chosen: "
                          f"{' '.join(chosen) or 'none'}")
    if not reply.reject:
        if len(chosen) != 1 and reply.p2p:
            rep.add(reply.frame, "error", f"reply chooses {len(chosen)} RTR types, RFC 6581 "
                    "section 5 requires exactly one")
        elif chosen and chosen[0] not in offered:
            rep.add(reply.frame, "error", f"reply chooses {chosen[0]} RTR, not offered")
        no_value = IRD_ORD_MASK in (req.ird, req.ord, reply.ird, reply.ord)
        if not no_value and reply.ord > req.ird:
            rep.add(reply.frame, "warning", f"responder ORD {reply.ord} above initiator IRD "
                    f"{req.ird} (RFC 6581 section 5)")
        if not no_value and req.ord > reply.ird:
            rep.add(reply.frame, "warning", f"initiator ORD {req.ord} above responder IRD "
                    f"{reply.ird}")
        if not no_value and req.ird < reply.ord:
            rep.add(reply.frame, "error", f"initiator IRD {req.ird} below responder ORD "
                    f"{reply.ord} (an irdma initiator: -EINVAL, RST)")


def _val(v: int) -> str:
    return "none (0x3FFF)" if v == IRD_ORD_MASK else str(v)


def _fpdus(rep: ConnectionReport, d: Direction, stream: list[tuple[int, int, bytes]],
           side: str, start: int, crc: bool, markers: bool, first_is_rtr: bool) -> None:
    end = sum(len(x[2]) for x in stream)
    if end <= start:
        if first_is_rtr and rep.reply is not None and rep.reply.has_block:
            rep.rtr = "no RTR from the initiator in the capture"
        return
    if markers:
        rep.fpdus.append(f"{side}: {end - start} bytes of FPDUs with markers (not checked)")
        return
    data = _bytes_at(stream, start, end - start)
    pos = 0
    while pos < len(data):
        frame = _frame_at(stream, start + pos)
        try:
            fpdu = unframe_fpdu(data[pos:])
        except MpaFormatError:
            rep.add(frame, "note", f"{side}: incomplete FPDU at the end of the capture")
            break
        d.fpdus += 1
        if crc and not fpdu.crc_ok:
            d.bad_crc += 1
            body_len = fpdu.wire_length - 4
            want = crc32c(data[pos:pos + body_len])
            rep.add(frame, "error", f"{side} FPDU CRC32c 0x{fpdu.crc:08x} wrong, expected "
                    f"0x{want:08x} (stored little-endian)")
        op = _rdmap_summary(fpdu.ulpdu)
        d.opcodes[op] = d.opcodes.get(op, 0) + 1
        if first_is_rtr and d.fpdus == 1:
            rep.rtr = f"frame {frame}: {op}"
            if rep.request is not None and rep.request.has_block and rep.reply is not None:
                chosen = rep.reply.rtr_names()
                expect = {"read": "zero-length RDMA Read Request",
                          "write": "zero-length RDMA Write", "send": "zero-length Send"}
                if chosen and op != expect.get(chosen[0]):
                    rep.add(frame, "error", f"first FPDU is {op}, but the reply chose the "
                            f"{chosen[0]} RTR (RFC 6581 section 5)")
        pos += fpdu.wire_length
    summary = ", ".join(f"{n} {op}" for op, n in d.opcodes.items())
    bad = f", {d.bad_crc} with a bad CRC" if d.bad_crc else ""
    rep.fpdus.append(f"{side}: {d.fpdus} FPDUs ({summary}){bad}")


def _rdmap_summary(ulpdu: bytes) -> str:
    """``zero-length RDMA Read Request``, ``Send (19 bytes)``, ... from a DDP segment
    (RFC 5041 section 4, RFC 5040 section 4)."""
    try:
        segment = parse_segment(ulpdu)
    except DdpFormatError:
        return "short DDP segment"
    name = RDMAP_OPCODES.get(segment.opcode, f"RDMAP opcode {segment.opcode}")
    if segment.read_request is not None:
        size = segment.read_request.size
        return "zero-length RDMA Read Request" if size == 0 else f"{name} ({size} bytes)"
    if segment.terminate is not None:
        return name
    if not segment.payload and segment.opcode in (Opcode.WRITE, Opcode.SEND):
        return f"zero-length {name}"
    return f"{name} ({len(segment.payload)} bytes)"


def _ending(conn: _Conn, client: Direction, server: Direction) -> str:
    resets = sorted((d.rst_frame, side) for side, d in (("client", client), ("server", server))
                    if d.rst_frame is not None)
    if resets:
        return "reset: " + ", ".join(f"RST from the {side} (frame {n})" for n, side in resets)
    fins = sorted((d.fin_frame, side) for side, d in (("client", client), ("server", server))
                  if d.fin_frame is not None)
    if len(fins) == 2:
        (n1, first), (n2, second) = fins
        return (f"closed: FIN from the {first} (frame {n1}), then from the {second} "
                f"(frame {n2})")
    if fins:
        return f"half-closed: FIN from the {fins[0][1]} (frame {fins[0][0]}) only"
    return "open at end of capture"


# ---- text ----------------------------------------------------------------------------

def _pdata_text(data: bytes) -> str:
    if not data:
        return "(0 bytes)"
    hexed = data.hex()
    shown = hexed if len(hexed) <= 96 else hexed[:96] + "..."
    text = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in data[:64])
    return f"({len(data)} bytes) {shown} \"{text}{'...' if len(data) > 64 else ''}\""


def _mpa_lines(label: str, m: MpaInfo) -> list[str]:
    verdict = "" if m.request else (", REJECT" if m.reject else ", accept")
    lines = [f"  {label:<12}frame {m.frame}: rev {m.rev}, flags 0x{m.flags:02x} "
             f"({m.flag_names()}), PD_Length {m.pd_length}{verdict}"]
    if m.has_block:
        bits = [n for ok, n in ((m.p2p, "P2P"),) if ok] + [f"{r} RTR" for r in m.rtr_names()]
        assert m.ird is not None and m.ord is not None
        lines.append(f"  {'':<12}IRD {_val(m.ird)}, ORD {_val(m.ord)}, "
                     f"{', '.join(bits) or 'no P2P, no RTR bits'}")
    if m.private_data or m.pd_length:
        what = "reject reason" if m.reject else "private data"
        lines.append(f"  {'':<12}{what} {_pdata_text(m.private_data)}")
    return lines


def format_connection(c: ConnectionReport) -> str:
    """One block of text for one connection."""
    vlan = f" VLAN {c.vlan}" if c.vlan is not None else ""
    lines = [f"Connection {c.index}: {c.client} -> {c.server}{vlan}  "
             f"(frames {c.first_frame}-{c.last_frame}, {c.frames} frames)"]
    for i, h in enumerate(c.handshake):
        lines.append(f"  {'handshake' if i == 0 else '':<12}{h}")
    if c.request is not None:
        lines += _mpa_lines("MPA request", c.request)
    if c.reply is not None:
        lines += _mpa_lines("MPA reply", c.reply)
    for i, n in enumerate(c.negotiated):
        lines.append(f"  {'negotiated' if i == 0 else '':<12}{n}")
    if c.rtr:
        lines.append(f"  {'RTR':<12}{c.rtr}")
    for i, fp in enumerate(c.fpdus):
        lines.append(f"  {'FPDUs' if i == 0 else '':<12}{fp}")
    lines.append(f"  {'ended':<12}{c.ended}")
    for f in c.findings:
        where = f"frame {f.frame}: " if f.frame is not None else ""
        lines.append(f"  {f.severity.upper() if f.severity == 'error' else f.severity:<12}"
                     f"{where}{f.text}")
    return "\n".join(lines)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def format_report(report: CaptureReport, comments: bool = False) -> str:
    """The whole report as text: a header line, then one block per connection."""
    shown = len(report.connections)
    total = shown + report.hidden
    selection = f" ({shown} selected)" if report.hidden else ""
    out = [f"{report.path}: {_count(report.frames, 'frame')}, {report.tcp_frames} TCP, "
           f"{_count(total, 'connection')}{selection}, {_count(report.errors, 'error')}"]
    out.extend(f"  {p}" for p in report.problems)
    for c in report.connections:
        out.append("")
        out.append(format_connection(c))
        if comments:
            out.extend(f"  {'comment' if i == 0 else '':<12}frame {n}: {t}"
                       for i, (n, t) in enumerate(c.comments))
    return "\n".join(out) + "\n"


def report_json(report: CaptureReport) -> str:
    """The report as indented JSON with sorted keys."""
    return json.dumps(report.to_dict(), indent=2, sort_keys=True) + "\n"


__all__ = ["CaptureReport", "ConnectionReport", "Finding", "InspectError", "MpaInfo",
           "RawFrame", "TcpFrame", "decode_frame", "format_connection",
           "format_report", "inspect_capture", "inspect_frames", "options_text",
           "parse_tcp_options", "read_frames", "report_json"]
