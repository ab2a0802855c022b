"""Reading captures and decoding each frame down to its TCP segment, for inspect.

Any pcap or pcapng: Ethernet with or without 802.1Q, Linux cooked (v1 and v2), raw IP.
The TCP payload ends where the IP header's length says (IPv4 total length, IPv6 payload
length), so Ethernet padding of a short frame is never read as TCP data. Each TCP
checksum gets a :class:`~mpa_emu.capture.checksums.Verdict`; what it means for a report is the
caller's choice of :class:`~mpa_emu.capture.checksums.Mode`.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpa_emu.capture.checksums import Verdict, ip_header_ok, pseudo_header, tcp_verdict
from mpa_emu.capture.pcap import CaptureError, read_capture
from mpa_emu.wire.addr import ip_text

# Link-layer types (pcap LINKTYPE_*).
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
        pseudo = pseudo_header(src, dst, end - off - ihl)
    elif ethertype == 0x86DD:
        if len(data) < off + 40:
            return f"frame {raw.number}: IPv6 header truncated"
        plen, nxt = struct.unpack_from("!HB", data, off + 4)
        if nxt != 6:
            return None  # extension headers are not followed: iWARP CMs do not send them
        src, dst = data[off + 8:off + 24], data[off + 24:off + 40]
        l4 = data[off + 40:off + 40 + plen]
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
    if truncated:
        problems.append(f"captured {len(raw.data)} of {raw.wirelen} bytes")
    options, opt_problem = parse_tcp_options(l4[20:doff])
    if opt_problem:
        problems.append(opt_problem)
    return TcpFrame(number=raw.number, time=raw.time, vlan=vlan, src=src, dst=dst,
                    sport=sport, dport=dport, seq=seq, ack=ack, flags=flags, window=window,
                    options=options, payload=bytes(l4[doff:]), problems=tuple(problems),
                    comment=raw.comment, checksum=verdict, ip_ok=ip_ok,
                    option_kinds=option_kinds(l4[20:doff]))


def option_kinds(raw: bytes) -> tuple[int, ...]:
    """The kinds of the TCP options in ``raw`` in order, up to and including an EOL
    (kind 0); a malformed length ends the list."""
    kinds: list[int] = []
    i = 0
    while i < len(raw):
        kind = raw[i]
        kinds.append(kind)
        if kind == 0:
            break
        if kind == 1:
            i += 1
            continue
        if i + 1 >= len(raw) or raw[i + 1] < 2:
            break
        i += raw[i + 1]
    return tuple(kinds)


def parse_tcp_options(raw: bytes) -> tuple[dict[str, Any], str]:
    """MSS, WS, SACK-permitted and timestamps from TCP option bytes, and a problem text
    (empty when none). A length-0 option is reported: irdma_process_options loops forever
    on it."""
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

