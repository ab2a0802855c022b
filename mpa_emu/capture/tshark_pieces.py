"""A long capture cut into pieces that tshark judges one at a time, in bounded memory.

tshark keeps the state of every TCP conversation it has seen until it exits (about
650 B per frame when it reads a file), so one run over a capture of 10^6 frames grows
past any fixed budget. :func:`cut_capture` reads the capture once and writes it out
again as pieces of about :data:`PIECE_FRAMES` frames, each a capture of its own (the
section header and interface blocks repeated). A connection still open where a piece
ends is never split: its frames so far are carried to the front of the next piece, so
tshark sees every connection whole from its first frame, and tshark judges a frame only
from the frames before it (it reads a file in one pass). The carried frames are judged
in the piece where they first came; :class:`Piece` maps a piece's frame numbers back to
the capture's own and tells carried frames apart.

A capture is cut only where that is sure to leave every verdict as it is; otherwise it
is judged whole (:attr:`Piece.whole`) and tshark's memory grows with it: anything but
TCP over IPv4/IPv6 on Ethernet, IP fragments, a frame of a connection that ended in an
earlier piece, pcapng blocks other than one section's header, interface and packet
blocks (interface statistics are copied where they stand), timestamps that are not a
whole number of nanoseconds, or one connection that stays open so long that carrying it
would cost more than the piece (:data:`CARRY_LIMIT`).
"""

from __future__ import annotations

import contextlib
import os
import re
import struct
import tempfile
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from mpa_emu.errors import MpaEmuError

PIECE_FRAMES = 50_000
"""Frames of a piece (carried frames not counted) before it may end."""
CARRY_LIMIT = PIECE_FRAMES
"""A piece ends only where at most this many frames of open connections are carried."""

_SHB = 0x0A0D0D0A
_IDB = 1
_ISB = 5
_EPB = 6
_BYTE_ORDER = 0x1A2B3C4D
_LINKTYPE_ETHERNET = 1
_PCAP_MAGICS = {  # magic as read little-endian -> (byte order, ns per timestamp tick)
    0xA1B2C3D4: ("<", 1000), 0xD4C3B2A1: (">", 1000),
    0xA1B23C4D: ("<", 1), 0x4D3CB2A1: (">", 1),
}


_SUMMARY_RE = re.compile(r"(\d+) +(-?)(\d+)(?:\.(\d+))?( .*)$", re.DOTALL)


class Unsplittable(MpaEmuError):
    """The capture cannot be cut without risking a verdict: judge it whole."""


@dataclass
class Piece:
    """One piece of a capture: ``path`` holds it as a capture file of its own.

    Its first :attr:`carried` frames repeat frames of connections begun in earlier
    pieces (their capture frame numbers in order); frame ``carried + i`` of the piece is
    frame ``first + i - 1`` of the capture. ``prefix_path`` holds the carried frames
    alone (``None`` when there are none). ``time_offset_ns`` is the time of the piece's
    first frame after the capture's first frame: tshark's relative times in the piece
    plus this offset are the capture's own. A :attr:`whole` piece is the capture itself.
    """

    path: str
    first: int = 1
    carried_numbers: array[int] = field(default_factory=lambda: array("q"))
    prefix_path: str | None = None
    time_offset_ns: int = 0
    whole: bool = False

    @property
    def carried(self) -> int:
        """How many carried frames open the piece."""
        return len(self.carried_numbers)

    def number(self, local: int) -> int | None:
        """The capture's frame number of the piece's frame ``local``; ``None`` for a
        carried frame (judged in an earlier piece)."""
        if local <= len(self.carried_numbers):
            return None
        return self.first + local - len(self.carried_numbers) - 1

    def summary_line(self, line: str) -> str | None:
        """A summary line of tshark's (``No. Time Source ...``, leading blanks
        stripped) with the capture's frame number and relative time; ``None`` for a
        carried frame. tshark right-aligns the time in at least 10 columns."""
        if self.whole:
            return line
        match = _SUMMARY_RE.match(line)
        if match is None:
            raise Unsplittable(f"unexpected summary line {line!r}")
        number = self.number(int(match.group(1)))
        if number is None:
            return None
        sign, secs, frac, rest = match.group(2, 3, 4, 5)
        digits = len(frac or "")
        unit = 10 ** (9 - digits) if digits <= 9 else 0
        if unit == 0 or self.time_offset_ns % unit:
            raise Unsplittable(f"time {match.group(0)!r} finer than the offset")
        value = int(secs + (frac or "")) * (-1 if sign else 1) + self.time_offset_ns // unit
        whole, part = divmod(abs(value), 10 ** digits)
        text = ("-" if value < 0 else "") + str(whole) + (f".{part:0{digits}d}" if digits else "")
        return f"{number} {text:>10}{rest}"

    def remove(self) -> None:
        """Delete the piece's files (never the capture itself)."""
        if self.whole:
            return
        for path in (self.path, self.prefix_path):
            if path is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)


class _Connection:
    """The frames of one TCP connection so far and how far its close has gone."""

    __slots__ = ("acked", "closed", "fin_end", "lengths", "numbers", "offsets", "times")

    def __init__(self) -> None:
        self.numbers = array("q")
        self.offsets = array("q")
        self.lengths = array("q")
        self.times = array("q")
        self.fin_end: list[int | None] = [None, None]
        self.acked = [False, False]
        self.closed = False

    def see(self, side: int, flags: int, seq: int, ack: int, payload: int) -> None:
        """Follow the close: a RST ends the connection; so do a FIN each way once
        each FIN is acknowledged (RFC 9293 section 3.6)."""
        if flags & 0x04:
            self.closed = True
            return
        if flags & 0x02 and not flags & 0x10 and self.closed:
            # A new SYN on the same addresses and ports: a new connection, carried
            # along with the old one's frames so tshark sees the reuse as it happened.
            self.fin_end = [None, None]
            self.acked = [False, False]
            self.closed = False
        other = 1 - side
        if flags & 0x10 and self.fin_end[other] is not None and ack == self.fin_end[other]:
            self.acked[other] = True
        if flags & 0x01:
            self.fin_end[side] = (seq + payload + 1) & 0xFFFFFFFF
            self.acked[side] = False
        if all(self.acked) and None not in self.fin_end:
            self.closed = True


def _tcp_key(data: bytes) -> tuple[bytes, int, int, int, int, int] | None:
    """(connection key, side, flags, seq, ack, payload length) of an Ethernet frame
    carrying an unfragmented TCP segment over IPv4 or IPv6; ``None`` for anything else."""
    off = 14
    if len(data) < off:
        return None
    ethertype = data[12] << 8 | data[13]
    if ethertype == 0x8100:
        off = 18
        if len(data) < off:
            return None
        ethertype = data[16] << 8 | data[17]
    if ethertype == 0x0800:
        if len(data) < off + 20 or data[off + 9] != 6:
            return None
        if (data[off + 6] << 8 | data[off + 7]) & 0x3FFF:
            return None  # a fragment
        ihl = (data[off] & 0x0F) * 4
        ip_payload = (data[off + 2] << 8 | data[off + 3]) - ihl
        src, dst = data[off + 12:off + 16], data[off + 16:off + 20]
        tcp = off + ihl
    elif ethertype == 0x86DD:
        if len(data) < off + 40 or data[off + 6] != 6:
            return None
        ip_payload = data[off + 4] << 8 | data[off + 5]
        src, dst = data[off + 8:off + 24], data[off + 24:off + 40]
        tcp = off + 40
    else:
        return None
    if len(data) < tcp + 20:
        return None
    seq, ack = struct.unpack_from(">II", data, tcp + 4)
    payload = ip_payload - (data[tcp + 12] >> 4) * 4
    a = src + data[tcp:tcp + 2]
    b = dst + data[tcp + 2:tcp + 4]
    if a <= b:
        return a + b, 0, data[tcp + 13], seq, ack, payload
    return b + a, 1, data[tcp + 13], seq, ack, payload


@dataclass
class _Frame:
    offset: int  # of its whole block or record in the capture
    length: int
    time_ns: int
    data: bytes


class _Reader:
    """The blocks of a pcap or pcapng file: the header to repeat in every piece, then
    each frame (:class:`_Frame`) or, for an interface statistics block, ``None`` with
    the block's place. Raises :class:`Unsplittable` on anything it does not know."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.offset = 0
        self.header = b""
        head = self._read(4)
        if len(head) < 4:
            raise Unsplittable("too short")
        magic = struct.unpack("<I", head)[0]
        self.pcapng = magic == _SHB
        self.ns_per_tick: list[int] = []
        if self.pcapng:
            self._start_pcapng(head)
        elif magic in _PCAP_MAGICS:
            self.endian, tick = _PCAP_MAGICS[magic]
            rest = self._exact(20)
            if struct.unpack(self.endian + "I", rest[16:20])[0] != _LINKTYPE_ETHERNET:
                raise Unsplittable("not Ethernet")
            self.header = head + rest
            self.ns_per_tick = [tick]
        else:
            raise Unsplittable("not a capture")

    def _read(self, n: int) -> bytes:
        data = self.stream.read(n)
        self.offset += len(data)
        return data

    def _exact(self, n: int) -> bytes:
        data = self._read(n)
        if len(data) != n:
            raise Unsplittable("truncated")
        return data

    def _start_pcapng(self, head: bytes) -> None:
        length_bytes = self._exact(8)
        order = struct.unpack("<I", length_bytes[4:8])[0]
        self.endian = "<" if order == _BYTE_ORDER else ">"
        if struct.unpack(self.endian + "I", length_bytes[4:8])[0] != _BYTE_ORDER:
            raise Unsplittable("bad byte-order magic")
        total = struct.unpack(self.endian + "I", length_bytes[:4])[0]
        if total < 28 or total % 4:
            raise Unsplittable("bad section header")
        self.header = head + length_bytes + self._exact(total - 12)
        self._pending = b""

    def frames(self) -> Iterator[_Frame | bytes]:
        """Each frame in order; the block's bytes for an interface description block
        (also added to :attr:`header`) or a statistics block."""
        if not self.pcapng:
            yield from self._pcap_frames()
            return
        u32 = struct.Struct(self.endian + "I")
        seen_packet = False
        while True:
            start = self.offset
            head = self._read(8)
            if not head:
                return
            if len(head) < 8:
                raise Unsplittable("truncated block")
            kind, total = struct.unpack(self.endian + "II", head)
            if total < 12 or total % 4:
                raise Unsplittable("bad block length")
            body = self._exact(total - 8)
            if u32.unpack_from(body, total - 12)[0] != total:
                raise Unsplittable("bad block trailer")
            if kind == _IDB and not seen_packet:
                self._interface(body)
                self.header += head + body
                yield head + body
            elif kind == _EPB:
                seen_packet = True
                iface, high, low, caplen = struct.unpack_from(self.endian + "IIII", body)
                if iface >= len(self.ns_per_tick) or 20 + caplen > total - 12:
                    raise Unsplittable("bad packet block")
                time_ns = ((high << 32) | low) * self.ns_per_tick[iface]
                yield _Frame(start, total, time_ns, body[20:20 + caplen])
            elif kind == _ISB:
                yield head + body
            else:
                raise Unsplittable(f"block type {kind:#x}")

    def _interface(self, body: bytes) -> None:
        linktype = struct.unpack_from(self.endian + "H", body)[0]
        if linktype != _LINKTYPE_ETHERNET:
            raise Unsplittable("not Ethernet")
        ns_per_tick = 1000  # if_tsresol absent: microseconds
        pos, end = 8, len(body) - 4
        while pos + 4 <= end:
            code, length = struct.unpack_from(self.endian + "HH", body, pos)
            value = body[pos + 4:pos + 4 + length]
            if code == 0:
                break
            if code == 9 and length == 1:
                if value[0] & 0x80 or value[0] > 9:
                    raise Unsplittable("timestamps finer than 1 ns or binary")
                ns_per_tick = 10 ** (9 - value[0])
            elif code == 14:
                raise Unsplittable("if_tsoffset")
            pos += 4 + length + (-length % 4)
        self.ns_per_tick.append(ns_per_tick)

    def _pcap_frames(self) -> Iterator[_Frame]:
        record = struct.Struct(self.endian + "IIII")
        tick = self.ns_per_tick[0]
        while True:
            start = self.offset
            head = self._read(16)
            if not head:
                return
            if len(head) < 16:
                raise Unsplittable("truncated record")
            sec, frac, caplen, _orig = record.unpack(head)
            data = self._exact(caplen)
            yield _Frame(start, 16 + caplen, sec * 1_000_000_000 + frac * tick, data)


def cut_capture(path: str, piece_frames: int | None = None,
                carry_limit: int | None = None) -> Iterator[Piece]:
    """The pieces of the capture at ``path`` in order (a piece of at least
    ``piece_frames`` own frames, :data:`PIECE_FRAMES` by default, ends where at most
    ``carry_limit`` frames are carried, :data:`CARRY_LIMIT`), each written to a temporary file
    once the next one begins (delete them with :meth:`Piece.remove`). A capture that is
    not cut comes as one :attr:`Piece.whole` piece, without a copy. Raises
    :class:`Unsplittable` once a piece has been given out if the rest of the capture
    shows the cut was not safe: the caller then judges the capture whole."""
    frames = PIECE_FRAMES if piece_frames is None else piece_frames
    limit = CARRY_LIMIT if carry_limit is None else carry_limit
    cutter = _Cutter(path, frames, limit)
    try:
        yield from cutter.pieces()
    finally:
        cutter.close()


class _Cutter:
    def __init__(self, path: str, piece_frames: int, carry_limit: int) -> None:
        self.path = path
        self.piece_frames = piece_frames
        self.carry_limit = carry_limit
        self.source = open(path, "rb")  # noqa: SIM115 - closed by close()
        self.fd = self.source.fileno()
        self.connections: dict[bytes, _Connection] = {}
        self.ended: set[bytes] = set()  # connections closed in an earlier piece
        self.open_frames = 0
        self.out: BinaryIO | None = None
        self.written: list[str] = []

    def close(self) -> None:
        self.source.close()
        if self.out is not None:
            self.out.close()

    def _new_file(self, suffix: str) -> tuple[BinaryIO, str]:
        handle, name = tempfile.mkstemp(prefix="mpa-emu-judge-", suffix=suffix)
        return os.fdopen(handle, "wb"), name

    def pieces(self) -> Iterator[Piece]:
        try:
            reader = _Reader(self.source)
        except Unsplittable:
            yield Piece(self.path, whole=True)
            return
        suffix = ".pcapng" if reader.pcapng else ".pcap"
        self.out, name = self._new_file(suffix)
        self.out.write(reader.header)
        piece = Piece(name)
        first_time: int | None = None
        number = 0
        proper = 0
        cut = False
        try:
            for item in reader.frames():
                if isinstance(item, bytes):
                    self.out.write(item)
                    continue
                number += 1
                if first_time is None:
                    first_time = item.time_ns
                if proper >= self.piece_frames and self.open_frames <= self.carry_limit:
                    self.out.close()
                    yield piece
                    cut = True
                    piece = self._next_piece(reader, suffix, number, item.time_ns,
                                             item.time_ns - first_time)
                    proper = 0
                self._track(item, number)
                self.out.write(os.pread(self.fd, item.length, item.offset))
                proper += 1
        except Unsplittable:
            if cut:
                raise
            self.out.close()
            os.unlink(piece.path)
            self.out = None
            yield Piece(self.path, whole=True)
            return
        self.out.close()
        self.out = None
        if not cut:
            os.unlink(piece.path)
            yield Piece(self.path, whole=True)
            return
        yield piece

    def _track(self, frame: _Frame, number: int) -> None:
        key = _tcp_key(frame.data)
        if key is None:
            raise Unsplittable(f"frame {number} is not TCP on Ethernet")
        conn_key, side, flags, seq, ack, payload = key
        if conn_key in self.ended:
            raise Unsplittable(f"frame {number} belongs to a connection already ended")
        conn = self.connections.get(conn_key)
        if conn is None:
            conn = self.connections[conn_key] = _Connection()
        was_closed = conn.closed
        conn.see(side, flags, seq, ack, payload)
        conn.numbers.append(number)
        conn.offsets.append(frame.offset)
        conn.lengths.append(frame.length)
        conn.times.append(frame.time_ns)
        if was_closed and not conn.closed:
            self.open_frames += len(conn.numbers)
        elif not was_closed and not conn.closed:
            self.open_frames += 1
        elif not was_closed and conn.closed:
            self.open_frames -= len(conn.numbers) - 1

    def _next_piece(self, reader: _Reader, suffix: str, number: int, own_time: int,
                    own_offset: int) -> Piece:
        """Start the piece whose first own frame is ``number`` (time ``own_time``,
        ``own_offset`` ns after the capture's first frame): the header, then the
        frames so far of every connection still open."""
        carried: list[tuple[int, int, int, int]] = []
        for key, conn in list(self.connections.items()):
            if conn.closed:
                del self.connections[key]
                self.ended.add(key)
            else:
                carried += zip(conn.numbers, conn.offsets, conn.lengths, conn.times,
                               strict=True)
        carried.sort()
        self.out, name = self._new_file(suffix)
        self.out.write(reader.header)
        piece = Piece(name, first=number, carried_numbers=array("q", (c[0] for c in carried)),
                      time_offset_ns=own_offset)
        if carried:
            prefix, piece.prefix_path = self._new_file(suffix)
            with prefix:
                prefix.write(reader.header)
                for _n, offset, length, _t in carried:
                    block = os.pread(self.fd, length, offset)
                    prefix.write(block)
                    self.out.write(block)
            # tshark's relative times count from the piece's first frame, here carried
            piece.time_offset_ns = own_offset - (own_time - carried[0][3])
        return piece
