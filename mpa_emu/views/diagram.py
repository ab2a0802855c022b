"""Ladder diagrams of a scenario run or of a capture: text for the terminal (the network's
own :mod:`mpa_emu.views.ladder` renderer) and SVG for a file.

For a scenario the rows come from the run's journal: frames with their MPA summary,
state changes, upcalls and drops. For a capture (ours or not) the lanes are the IP
addresses in order of appearance, and each frame's pcapng comment (mpa_emu captures name
the kernel function and state change there) is shown under its arrow.
"""

from __future__ import annotations

import io
import math
import pickle
import shutil
import sys
import tempfile
import textwrap
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TextIO
from xml.sax.saxutils import escape

from mpa_emu.capture.arp import Arp, parse_arp
from mpa_emu.capture.checksums import OFFLOAD_NOTE, Mode, Verdict, is_error
from mpa_emu.capture.decode import (
    Lenient,
    Undecodable,
    as_captured,
    as_ethernet,
    decode_leniently,
)
from mpa_emu.capture.pcap import CaptureError, CaptureRecord, read_capture
from mpa_emu.errors import MpaEmuError
from mpa_emu.gc_tuning import streaming
from mpa_emu.views.crc_connections import CrcConnections, connection_key
from mpa_emu.views.describe import fpdu_summary, mpa_summary, segment_label
from mpa_emu.views.ladder import Row, numbered, render, render_lines
from mpa_emu.wire.addr import ip_text
from mpa_emu.wire.mpa import FLAG_CRC
from mpa_emu.wire.segment import ACK, FIN, RST, SYN


class DiagramError(MpaEmuError, ValueError):
    """The input cannot be drawn (unreadable capture)."""


@dataclass(frozen=True, slots=True)
class Ladder:
    """Lanes (column titles) and rows, ready to render as text or SVG."""

    columns: list[str]
    rows: list[Row]

    def text(self) -> str:
        """The ladder as text (one column per lane)."""
        return render(self.rows, self.columns)

    def svg(self) -> str:
        """The ladder as a standalone SVG document."""
        return to_svg(self.rows, self.columns)


def from_run(net: object, *, logs: bool = False) -> Ladder:
    """The ladder of a finished network run (a :class:`mpa_emu.net.Network`); ``logs``
    adds the drivers' kernel log lines."""
    from mpa_emu.net import Network
    from mpa_emu.views import ladder

    assert isinstance(net, Network)
    return Ladder(ladder.column_titles(net), ladder.rows(net, logs=logs))


def from_capture(path: str | Path, ports: Collection[int] = (),
                 checksums: Mode = Mode.OFFLOAD) -> Ladder:
    """The ladder of a pcap/pcapng file: one lane per IP address; with ``ports``, only
    the TCP segments with one of those ports on either side.

    Every frame is decoded whatever its checksums (a frame with a wrong checksum is
    decoded as its bytes stand). ``checksums`` decides what is marked: with ``offload``
    a TX checksum offload artefact is counted, and each sender with some gets one note
    at the end ("TX checksum offload: not verified"), while a really bad checksum is
    marked on its frame; ``strict`` marks both on the frame; ``off`` marks neither.
    FPDUs get a CRC verdict only on connections whose request or reply set C (RFC 5044
    section 7.1). The rows are all kept: :func:`write_capture` draws a capture of any
    length in bounded memory."""
    lanes: dict[str, int] = {}
    rows = list(capture_rows(path, lanes, ports, checksums))
    return Ladder(columns(lanes, ports), rows)


def columns(lanes: dict[str, int], ports: Collection[int] = ()) -> list[str]:
    """The column titles of a capture's ladder, once :func:`capture_rows` has filled
    ``lanes``; with none, what left the ladder empty (the ``ports`` filter, or a
    capture without IP frames)."""
    if lanes:
        return list(lanes)
    if ports:
        named = ", ".join(str(p) for p in sorted(ports))
        return [f"(no TCP segment to or from port {named}: -p filtered out every frame)"]
    return ["(no IP frames)"]


class _Offloaded:
    """One sender's TX checksum offload artefacts: how many, the first and the last."""

    __slots__ = ("count", "first", "last")

    def __init__(self, number: int) -> None:
        self.count, self.first, self.last = 0, number, number


def capture_rows(path: str | Path, lanes: dict[str, int], ports: Collection[int] = (),
                 checksums: Mode = Mode.OFFLOAD) -> Iterator[Row]:
    """The rows of :func:`from_capture`, as the capture is read (``-``: standard
    input); ``lanes`` (name -> lane) fills up as addresses appear. Held in memory while
    reading: the lanes, the open TCP connections that negotiated CRC, a count per sender
    of offload artefacts. Raises :class:`DiagramError` when not even the first frame can
    be read."""
    source = sys.stdin.buffer if str(path) == "-" else path
    crc_on = CrcConnections()
    offloaded: dict[str, _Offloaded] = {}
    base: int | None = None
    number = 0
    end = 0
    damage: str | None = None
    records = read_capture(source)
    while True:
        try:
            rec = next(records)
        except StopIteration:
            break
        except CaptureError as fault:
            if not number:
                raise DiagramError(f"{path}: {fault}") from None
            # A capture cut short (tcpdump killed, disk full): draw what is there.
            damage = f"capture ends after frame {number}: {fault}"
            break
        number += 1
        crc_on.expire(number)
        if base is None and rec.time_ns is not None:
            base = rec.time_ns
        row = _capture_row(number, rec, base or 0, lanes, ports, checksums, crc_on,
                           offloaded)
        if row is not None:
            end = row.time_ns
            yield row
    for host, off in offloaded.items():
        n = off.count
        yield Row(end, lanes[host], None, f"{host}: {OFFLOAD_NOTE} ({n} frame"
                  f"{'s' if n > 1 else ''}, first {off.first}, last {off.last})")
    if damage is not None:
        yield Row(end, 0, None, damage)


def _capture_row(number: int, rec: CaptureRecord, base: int, lanes: dict[str, int],
                 ports: Collection[int], checksums: Mode,
                 crc_on: CrcConnections,
                 offloaded: dict[str, _Offloaded]) -> Row | None:
    t = (rec.time_ns - base) if rec.time_ns is not None else 0
    frame = as_ethernet(rec.linktype, rec.frame)
    if isinstance(frame, str):
        return Row(t, 0, None, f"not decoded ({frame})", frame=number)
    decoded = decode_leniently(frame)
    short = rec.orig_len > len(rec.frame)
    if isinstance(decoded, Undecodable) and short:
        # Captured short (snap length): drawn from the bytes the capture holds, its
        # checksums unverifiable; a note about the capture, not about the frame.
        cut = as_captured(frame)
        if cut is not None:
            captured = decode_leniently(cut)
            if not isinstance(captured, Undecodable):
                decoded = Lenient(captured.seg, Verdict.UNCHECKED, True)
    if isinstance(decoded, Undecodable):
        arp = parse_arp(frame)
        if arp is not None:
            return None if ports else _arp_row(t, number, arp, lanes)
        return Row(t, 0, None, f"not decoded ({decoded.text})", frame=number)
    seg, verdict, ip_ok = decoded.seg, decoded.checksum, decoded.ip_ok
    if ports and seg.sport not in ports and seg.dport not in ports:
        return None
    src_name = ip_text(seg.src_ip)
    src = lanes.setdefault(src_name, len(lanes))
    dst = lanes.setdefault(ip_text(seg.dst_ip), len(lanes))
    conn, side = connection_key(seg.src_ip, seg.sport, seg.dst_ip, seg.dport)
    flags = seg.flags
    if flags & SYN and not flags & ACK:
        crc_on.started(conn)
    mpa = mpa_summary(seg.payload)
    if mpa is not None and len(seg.payload) > 16 and seg.payload[16] & FLAG_CRC:
        # RFC 5044 section 7.1: CRC is used when either side sets C.
        crc_on.negotiated(conn)
    marks = _checksum_marks(verdict, ip_ok, checksums)
    if short:
        wire = len(seg.payload) + rec.orig_len - len(rec.frame)
        marks.append(f"captured {len(rec.frame)} of {rec.orig_len} bytes (snap length): "
                     f"len= counts the {len(seg.payload)} of {wire} payload bytes captured")
    if verdict is Verdict.OFFLOAD and checksums is Mode.OFFLOAD:
        off = offloaded.setdefault(src_name, _Offloaded(number))
        off.count += 1
        off.last = number
    detail_parts = [p for p in (mpa,
                                fpdu_summary(seg.payload, conn in crc_on)
                                if seg.payload and mpa is None else None,
                                *marks,
                                rec.comment.replace("\n", "; ") if rec.comment else None)
                    if p]
    label = f"{seg.sport}>{seg.dport} {segment_label(seg)}"
    if flags & (FIN | RST):
        crc_on.ending(conn, side, flags, number)
    return Row(t, src, dst, label, "; ".join(detail_parts) or None, frame=number)



def _arp_row(t: int, number: int, arp: Arp, lanes: dict[str, int]) -> Row:
    """An ARP frame (RFC 826): a request is a note on its sender's lane (it is
    broadcast), a reply an arrow to the address it answers."""
    src = lanes.setdefault(arp.sender, len(lanes))
    if arp.is_request:
        return Row(t, src, None, arp.text(), frame=number)
    return Row(t, src, lanes.setdefault(arp.target, len(lanes)), arp.text(), frame=number)


class ParkedLadder:
    """A capture's ladder read in bounded memory, ready to draw (:func:`park_capture`).

    Both drawings need every lane before their first line (the text draws a bar for
    each lane on every line, the SVG states its size first), so the rows wait in a
    temporary file, in order, until the lanes are known; the SVG body goes through a
    second temporary file. Memory holds the lanes and what :func:`capture_rows` keeps,
    not the rows."""

    def __init__(self, parked: IO[bytes], columns: list[str]) -> None:
        self._parked = parked
        self.columns = columns

    def write(self, out: TextIO, svg: bool,
              notes: Mapping[int, Sequence[str]] | None = None) -> None:
        """Draw into ``out``: SVG, or text for a terminal; ``notes`` (by frame number) are
        added to those frames' details (the stack findings of ``diagram --stacks``)."""
        self._parked.seek(0)
        rows = _unparked(self._parked)
        if notes:
            rows = _with_notes(rows, notes)
        if svg:
            gap = lane_gap(rows, len(self.columns))  # a first pass sizes the lanes
            self._parked.seek(0)
            write_svg(_unparked(self._parked), self.columns, out, gap)
        else:
            for line in render_lines(rows, self.columns):
                out.write(line + "\n")

    def close(self) -> None:
        """Delete the temporary file."""
        self._parked.close()

    def __enter__(self) -> ParkedLadder:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def park_capture(path: str | Path, ports: Collection[int] = (),
                 checksums: Mode = Mode.OFFLOAD) -> ParkedLadder:
    """Read a capture (``-``: standard input) for :class:`ParkedLadder`; arguments and
    errors as :func:`from_capture`."""
    lanes: dict[str, int] = {}
    parked = tempfile.TemporaryFile()  # noqa: SIM115 - closed by ParkedLadder.close
    try:
        with streaming():
            for row in capture_rows(path, lanes, ports, checksums):
                pickle.dump((row.time_ns, row.source, row.target, row.label, row.detail,
                             row.lost, row.frame), parked, protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException:
        parked.close()
        raise
    return ParkedLadder(parked, columns(lanes, ports))


def _with_notes(rows: Iterable[Row], notes: Mapping[int, Sequence[str]]) -> Iterator[Row]:
    for row in rows:
        extra = notes.get(row.frame) if row.frame is not None else None
        if extra:
            detail = "; ".join([*([row.detail] if row.detail else []), *extra])
            row = Row(row.time_ns, row.source, row.target, row.label, detail, row.lost,
                      row.frame)
        yield row


def _unparked(parked: IO[bytes]) -> Iterator[Row]:
    # One pickle per row, each read by its own unpickler: a long-lived one would keep
    # every row it read in its memo.
    while True:
        try:
            fields = pickle.load(parked)
        except EOFError:
            return
        yield Row(*fields)


def _checksum_marks(verdict: Verdict, ip_ok: bool, mode: Mode) -> list[str]:
    marks = []
    if not ip_ok and mode is not Mode.OFF:
        marks.append("bad IPv4 header checksum")
    if is_error(verdict, mode):
        marks.append("TCP checksum: offload artefact" if verdict is Verdict.OFFLOAD
                     else "bad TCP checksum")
    return marks


# ---- SVG ---------------------------------------------------------------------------

LANE_GAP = 420
LEFT = 110
TOP = 60
ROW_H = 22
DETAIL_H = 16
CHAR_W = 6.7
"""Width of one character of the 11 px monospace font, for sizing the picture."""
FONT = "font-family: 'DejaVu Sans Mono', Menlo, Consolas, monospace; font-size: 11px;"


MAX_LANE_GAP = 1400
"""The widest lane spacing: an arrow label longer than that wraps onto more lines."""


def lane_gap(rows: Iterable[Row], lanes: int) -> int:
    """The lane spacing that fits every arrow's label (frame number included) on one line
    between its two lanes: at least :data:`LANE_GAP`, at most :data:`MAX_LANE_GAP`."""
    need = LANE_GAP
    for row in rows:
        if row.target is None or row.target == row.source or max(row.source,
                                                                    row.target) >= lanes:
            continue
        span = abs(row.target - row.source)
        need = max(need, math.ceil((len(numbered(row)) * CHAR_W + 2 * LABEL_PAD + 2) / span))
    return min(need, MAX_LANE_GAP)


TITLE_CHAR_W = 8.1
"""Width of one character of the 13 px bold lane titles."""
LABEL_PAD = 12
"""Room kept free at each end of an arrow's label."""


def to_svg(rows: Iterable[Row], columns: Sequence[str]) -> str:
    """A ladder as SVG: a lane per column, an arrow per frame (red dashed when lost),
    notes (states, upcalls, drops) beside their lane, times on the left; the lanes as far
    apart as the longest label needs (:func:`lane_gap`), and no text ever cut."""
    out = io.StringIO()
    write_svg(rows, columns, out)
    return out.getvalue()


RowMarks = Callable[[int, Row], str | None]
"""A row's mark (a class added to its group: the HTML reports' ``hl``, ``rel``,
``ok``), from its number and the row; None for none."""


def write_svg(rows: Iterable[Row], columns: Sequence[str], out: TextIO,
              gap: int | None = None, *, marks: RowMarks | None = None,
              declaration: bool = True) -> None:
    """:func:`to_svg` written into ``out`` as the rows come: the body goes to a
    temporary file first, since the picture's size heads the document. Without ``gap``
    (the lane spacing, :func:`lane_gap`) the rows are read twice, so kept in memory: a
    caller with rows of any length passes the gap of a first pass. ``marks`` adds a
    class to the rows it names; without ``declaration`` the XML declaration line is left
    out (SVG inline in HTML)."""
    if gap is None:
        rows = list(rows)
        gap = lane_gap(rows, len(columns))
    with tempfile.TemporaryFile("w+", encoding="utf-8") as body:
        height, width = _svg_body(rows, len(columns), body, gap, marks)
        if columns:  # room for the last lane's title, centred on the lane
            width = max(width, _svg_lane_x(len(columns) - 1, gap)
                        + int(len(columns[-1]) * TITLE_CHAR_W / 2) + 20)
        body.seek(0)
        _svg_head(columns, height, width, out, gap, declaration)
        shutil.copyfileobj(body, out)
        out.write("</svg>\n")


def _svg_lane_x(lane: int, gap: int = LANE_GAP) -> int:
    """The x of lane number ``lane`` in the SVG."""
    return LEFT + 60 + lane * gap


def _svg_body(rows: Iterable[Row], lanes: int, out: TextIO,
              gap: int = LANE_GAP, marks: RowMarks | None = None) -> tuple[int, int]:
    """Write the rows' elements (each line followed by a newline) for ``lanes`` lanes
    ``gap`` apart, each row's group with its mark; the picture's height and width."""
    # The canvas ends past the last lane by what its notes need, not a lane's gap.
    right = (_svg_lane_x(lanes - 1, gap) if lanes else LEFT) + 40
    y = TOP
    last_time: int | None = None
    for number, row in enumerate(rows):
        # One group per row, so that a page can find, highlight and explain each frame.
        frame = f' data-frame="{row.frame}"' if row.frame is not None else ""
        mark = marks(number, row) if marks is not None else None
        cls = f"row {mark}" if mark else "row"
        _line(out, f'<g class="{cls}" data-row="{number}"{frame}>')
        y += ROW_H
        if row.time_ns != last_time:
            _line(out, f'<text x="8" y="{y + 4}" class="t">{row.time_ns / 1e9:.6f}</text>')
            last_time = row.time_ns
        on_lane = row.source < lanes
        x1 = _svg_lane_x(row.source, gap) if on_lane else LEFT
        label = numbered(row)
        if row.target is not None and row.target != row.source and row.target < lanes:
            x2 = _svg_lane_x(row.target, gap)
            cls = "lost" if row.lost else "arrow"
            end = x2 - 4 if x2 > x1 else x2 + 4
            _line(out, f'<line x1="{x1}" y1="{y}" x2="{end}" y2="{y}" class="{cls}" '
                        f'marker-end="url(#{"x" if row.lost else "head"})"/>')
            mid = (x1 + x2) / 2
            room = max(int((abs(x2 - x1) - 2 * LABEL_PAD) / CHAR_W), 12)
            first, *rest = textwrap.wrap(label, room) or [""]
            _line(out, f'<text x="{mid}" y="{y - 4}" class="label">{escape(first)}</text>')
            # What does not fit above the arrow, then the detail, wrap between the two
            # lanes (the detail's 10 px font: about 6.1 px a character).
            for piece in rest:
                y += DETAIL_H
                _line(out, f'<text x="{mid}" y="{y - 4}" class="label">{escape(piece)}</text>')
            for piece in textwrap.wrap(row.detail or "", max(int(abs(x2 - x1) / 6.2) - 2, 12)):
                y += DETAIL_H
                _line(out, f'<text x="{mid}" y="{y - 4}" class="detail">{escape(piece)}</text>')
            _line(out, "</g>")
            continue
        text = label + (f"  [{row.detail}]" if row.detail else "")
        # A note wraps before the next lane to its right instead of running across it.
        nearest = row.source + 1 if on_lane else 0
        next_lane = _svg_lane_x(nearest, gap) if nearest < lanes else None
        width_chars = 90 if next_lane is None else max(int((next_lane - x1 - 16) / CHAR_W), 12)
        pieces = textwrap.wrap(text, width_chars) or [""]
        right = max(right, x1 + 8 + int(max(map(len, pieces)) * CHAR_W) + 10)
        cls = "upcall" if row.label.startswith("<<") else "note"
        _line(out, f'<circle cx="{x1}" cy="{y}" r="3" class="dot"/>')
        for n, piece in enumerate(pieces):
            if n:
                y += DETAIL_H
            _line(out, f'<text x="{x1 + 8}" y="{y + 4}" class="{cls}">{escape(piece)}</text>')
        _line(out, "</g>")
    return y + 40, right


def _line(out: TextIO, text: str) -> None:
    out.write(text)
    out.write("\n")


def _svg_head(columns: Sequence[str], height: int, width: int, out: TextIO,
              gap: int = LANE_GAP, declaration: bool = True) -> None:
    """Write everything before the rows, each line followed by a newline (the lanes one
    by one: a capture may have tens of thousands)."""
    style = (
        f"text {{ {FONT} }}"
        " .title { font-size: 13px; font-weight: bold; text-anchor: middle; }"
        " .t { fill: #666; } .label { text-anchor: middle; }"
        " .detail { text-anchor: middle; fill: #225; font-size: 10px; }"
        " .note { fill: #555; } .upcall { fill: #063; font-weight: bold; }"
        " .lane { stroke: #999; stroke-width: 1; } .dot { fill: #333; }"
        " .arrow { stroke: #000; stroke-width: 1.2; }"
        " .lost { stroke: #c00; stroke-width: 1.2; stroke-dasharray: 5 3; }"
    )
    out.write("\n".join([
        *(['<?xml version="1.0" encoding="UTF-8"?>'] if declaration else []),
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">',
        f"<style>{style}</style>",
        "<defs>",
        '<marker id="head" markerWidth="8" markerHeight="8" refX="7" refY="4" '
        'orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#000"/></marker>',
        '<marker id="x" markerWidth="10" markerHeight="10" refX="5" refY="5" '
        'orient="auto"><path d="M0,0 L10,10 M10,0 L0,10" stroke="#c00" stroke-width="2"/>'
        "</marker>",
        "</defs>",
        f'<rect width="{width}" height="{height}" fill="white"/>', ""]))
    for lane, title in enumerate(columns):
        x = _svg_lane_x(lane, gap)
        _line(out, f'<text x="{x}" y="{TOP - 20}" class="title">{escape(title)}</text>')
        _line(out, f'<line x1="{x}" y1="{TOP - 10}" x2="{x}" y2="{height - 20}" '
                   'class="lane"/>')
