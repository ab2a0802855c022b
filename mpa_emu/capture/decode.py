"""The one lenient decoder of captured frames, shared by inspect, diagram and replay.

Any pcap or pcapng: Ethernet with or without 802.1Q, Linux cooked (v1 and v2), raw IP.
The TCP payload ends where the IP header's length says (IPv4 total length, IPv6 payload
length), so Ethernet padding of a short frame is never read as TCP data. Each TCP
checksum gets a :class:`~mpa_emu.capture.checksums.Verdict`; what it means for a report is the
caller's choice of :class:`~mpa_emu.capture.checksums.Mode`.

Two views of a frame come out of here: :func:`decode_frame` reads the fields a
connection analysis needs from any link type (:class:`TcpFrame`, used by inspect), and
:func:`decode_leniently` turns an Ethernet frame into the emulator's own
:class:`~mpa_emu.wire.segment.Segment` whatever its checksums, with the verdict on them
(used by diagram and replay; :func:`as_ethernet` brings other link types to Ethernet).
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpa_emu.capture.checksums import Verdict, ip_header_ok, pseudo_header, repaired, tcp_verdict
from mpa_emu.capture.pcap import CaptureError, read_capture
from mpa_emu.errors import MpaEmuError
from mpa_emu.wire import codec, tcp_options
from mpa_emu.wire.addr import ip_text
from mpa_emu.wire.segment import Segment
from mpa_emu.wire.tcp_options import option_value, parse_options

# Link-layer types (pcap LINKTYPE_*).
LINK_ETHERNET = 1
LINK_RAW = (101, 12, 14)
LINK_IPV4 = 228
LINK_IPV6 = 229
LINK_SLL = 113
LINK_SLL2 = 276
_LINK_IP = (*LINK_RAW, LINK_IPV4, LINK_IPV6)
"""Link types whose frames start with the IP header."""


class InspectError(MpaEmuError):
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
    """Frames of a pcap or pcapng file, read by :func:`mpa_emu.capture.pcap.read_capture`.

    ``-`` reads standard input. Raises :class:`InspectError` for an unreadable file, or
    when the file turns out damaged part-way (the frames before the damage have been yielded).
    """
    number = 0
    source = sys.stdin.buffer if str(path) == "-" else path
    try:
        for rec in read_capture(source):
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
    """The fields of one TCP segment that the connection analysis needs.

    ``checksum`` is the verdict on the TCP checksum, ``ip_ok`` whether the IPv4 header
    checksum holds (always true for IPv6); ``option_kinds`` lists the option kinds in
    the order they appear (NOP and EOL included), for fingerprints."""

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
    checksum: Verdict = Verdict.GOOD
    ip_ok: bool = True
    option_kinds: tuple[int, ...] = ()
    missing: int = 0
    """TCP payload bytes the segment carried on the wire but the capture did not keep
    (a frame captured short: snap length)."""

    @property
    def endpoint_src(self) -> str:
        """``addr:port`` of the sender."""
        return endpoint(self.src, self.sport)

    @property
    def endpoint_dst(self) -> str:
        """``addr:port`` of the receiver."""
        return endpoint(self.dst, self.dport)


def endpoint(ip: bytes, port: int) -> str:
    """``192.0.2.1:4000`` or ``[2001:db8::1]:4000``."""
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
        elif raw.linktype in _LINK_IP:
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
    ip_ok = True
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
        ip_ok = ip_header_ok(data[off:off + ihl])
        if not ip_ok:
            problems.append("bad IPv4 header checksum")
        src, dst = data[off + 12:off + 16], data[off + 16:off + 20]
        # The IP total length bounds the segment: bytes past it are Ethernet padding.
        end = off + total_len if total_len >= ihl else len(data)
        l4 = data[off + ihl:min(end, len(data))]
        wire_l4 = end - off - ihl
        pseudo = pseudo_header(src, dst, wire_l4)
    elif ethertype == 0x86DD:
        if len(data) < off + 40:
            return f"frame {raw.number}: IPv6 header truncated"
        plen, nxt = struct.unpack_from("!HB", data, off + 4)
        if nxt != 6:
            return None  # extension headers are not followed: iWARP CMs do not send them
        src, dst = data[off + 8:off + 24], data[off + 24:off + 40]
        l4 = data[off + 40:off + 40 + plen]
        wire_l4 = plen
        pseudo = pseudo_header(src, dst, plen)
    else:
        return None
    if len(l4) < 20:
        return f"frame {raw.number}: TCP header truncated"
    sport, dport, seq, ack, offflags, window = struct.unpack_from("!HHIIHH", l4)
    doff = (offflags >> 12) * 4
    flags = offflags & 0xFF
    if doff < 20 or doff > len(l4):
        return f"frame {raw.number}: bad TCP data offset {doff}"
    verdict = tcp_verdict(pseudo, l4, complete=not truncated)
    missing = max(wire_l4 - len(l4), 0) if truncated else 0
    if truncated:
        problems.append(f"captured {len(raw.data)} of {raw.wirelen} bytes")
    options, opt_problem = parse_tcp_options(l4[20:doff])
    if opt_problem:
        problems.append(opt_problem)
    return TcpFrame(number=raw.number, time=raw.time, vlan=vlan, src=src, dst=dst,
                    sport=sport, dport=dport, seq=seq, ack=ack, flags=flags, window=window,
                    options=options, payload=bytes(l4[doff:]), problems=tuple(problems),
                    comment=raw.comment, checksum=verdict, ip_ok=ip_ok,
                    option_kinds=option_kinds(l4[20:doff]), missing=missing)


def option_kinds(raw: bytes) -> tuple[int, ...]:
    """The kinds of the TCP options in ``raw`` in order, up to and including an EOL
    (kind 0); a malformed length ends the list."""
    return parse_options(raw).kinds


def parse_tcp_options(raw: bytes) -> tuple[dict[str, Any], str]:
    """MSS, WS (the shift count, RFC 7323 section 2.2), SACK-permitted and timestamps from
    TCP option bytes, and a problem text (empty when none). A length-0 option is
    reported: irdma_process_options loops forever on it."""
    parsed = parse_options(raw)
    problem = parsed.problem
    options = parsed.options
    if problem is not None and problem.what == "past end":
        options = options[:-1]
    opts: dict[str, Any] = {}
    for opt in options:
        kind, length = opt.kind, opt.length
        if kind in (tcp_options.EOL, tcp_options.NOP):
            continue
        if kind == tcp_options.MSS and length == 4:
            opts["mss"] = option_value(opt)
        elif kind == tcp_options.MSS:
            return opts, f"MSS option of length {length} (irdma_process_options: -EINVAL)"
        elif kind == tcp_options.WINDOW_SCALE and length == 3:
            opts["ws"] = option_value(opt)
        elif kind == tcp_options.SACK_PERMITTED:
            opts["sack_perm"] = True
        elif kind == tcp_options.TIMESTAMPS and length == 10:
            opts["ts"] = option_value(opt)
        else:
            opts.setdefault("other", []).append(kind)
    if problem is None:
        return opts, ""
    if problem.what == "truncated":
        return opts, f"TCP option {problem.kind} truncated"
    if problem.what == "bad length":
        return opts, (f"TCP option {problem.kind} has length {problem.length} "
                      "(irdma_process_options would loop forever)")
    return opts, f"TCP option {problem.kind} runs past the header"


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



# ---- Ethernet frames as the emulator's segments, whatever their checksums ---------------

_NO_MACS = bytes(12)


def as_ethernet(linktype: int, frame: bytes) -> bytes | str:
    """``frame`` of a capture with link type ``linktype`` as an Ethernet frame (MACs
    zero when the capture has none), or why it cannot be: Linux cooked captures
    (``tcpdump -i any``) and raw IP captures are as common as Ethernet ones."""
    if linktype == LINK_ETHERNET:
        return frame
    if linktype == LINK_SLL:
        return _NO_MACS + frame[14:] if len(frame) >= 16 else "Linux cooked header truncated"
    if linktype == LINK_SLL2:
        if len(frame) < 20:
            return "Linux cooked v2 header truncated"
        return _NO_MACS + frame[0:2] + frame[20:]
    if linktype in _LINK_IP:
        if not frame:
            return "empty"
        ethertype = b"\x08\x00" if frame[0] >> 4 == 4 else b"\x86\xdd"
        return _NO_MACS + ethertype + frame
    return f"link type {linktype} not supported"


@dataclass(frozen=True, slots=True)
class Lenient:
    """An Ethernet frame decoded whatever its checksums."""

    seg: Segment
    checksum: Verdict
    """The verdict on the TCP checksum as captured."""
    ip_ok: bool
    """Whether the IPv4 header checksum holds (always true for IPv6)."""
    refusal: str = ""
    """Why the strict decoder (:func:`mpa_emu.wire.codec.decode`) refused the frame as
    captured (a checksum), empty when it took it."""


@dataclass(frozen=True, slots=True)
class Undecodable:
    """An Ethernet frame that does not decode even with its checksums repaired."""

    reason: str
    """The :class:`~mpa_emu.wire.codec.DecodeFailure` behind it, as text (for counts)."""
    text: str
    """The one-line explanation."""


def as_captured(frame: bytes) -> bytes | None:
    """An Ethernet frame captured short (snap length) with its IP length field cut to the
    bytes the capture holds and its checksums recomputed, so that it decodes as the
    segment's captured start; None when not even its IP and TCP headers are there."""
    buf = bytearray(frame)
    off = 14
    try:
        ethertype = struct.unpack_from("!H", buf, 12)[0]
        while ethertype in (0x8100, 0x88A8):
            ethertype = struct.unpack_from("!H", buf, off + 2)[0]
            off += 4
        if ethertype == 0x0800:
            ihl = (buf[off] & 0xF) * 4
            if len(buf) < off + ihl + 20:
                return None
            struct.pack_into("!H", buf, off + 2, len(buf) - off)
        elif ethertype == 0x86DD:
            if len(buf) < off + 60:
                return None
            struct.pack_into("!H", buf, off + 4, len(buf) - off - 40)
        else:
            return None
        return repaired(bytes(buf))
    except (struct.error, IndexError):
        return None


_CHECKSUM_FAILURES = (codec.DecodeFailure.BAD_IP_CHECKSUM, codec.DecodeFailure.BAD_TCP_CHECKSUM)


def decode_leniently(frame: bytes) -> Lenient | Undecodable:
    """``frame`` (Ethernet) decoded whatever its checksums, or why it cannot be."""
    try:
        return Lenient(codec.decode(frame), Verdict.GOOD, True)
    except codec.DecodeError as exc:
        return after_refusal(frame, exc)


def after_refusal(frame: bytes, exc: codec.DecodeError) -> Lenient | Undecodable:
    """``frame`` (Ethernet) that :func:`~mpa_emu.wire.codec.decode` refused with ``exc``,
    decoded from a copy with its checksums recomputed
    (:func:`~mpa_emu.capture.checksums.repaired`) when a checksum was all that failed:
    every other field is as captured. For callers that try the strict decoder first."""
    if exc.reason not in _CHECKSUM_FAILURES:
        return Undecodable(str(exc.reason), str(exc))
    try:
        seg = codec.decode(repaired(frame))
    except codec.DecodeError as again:
        return Undecodable(str(again.reason), str(again))
    except (struct.error, IndexError) as broken:
        return Undecodable(str(exc.reason), str(broken))
    verdict, ip_ok = _verdicts(frame)
    return Lenient(seg, verdict, ip_ok, str(exc))


def _verdicts(frame: bytes) -> tuple[Verdict, bool]:
    """The TCP checksum verdict and IPv4 header verdict of an Ethernet frame whose
    headers decode, as :func:`decode_frame` reads them."""
    tcp = decode_frame(RawFrame(0, 0.0, LINK_ETHERNET, frame, len(frame)))
    if not isinstance(tcp, TcpFrame):  # the strict decoder took these headers
        return Verdict.BAD, False
    return tcp.checksum, tcp.ip_ok
