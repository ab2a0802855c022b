"""A readable text ladder of a run: one column per host, an arrow per frame (flags, seq,
ack, length, and an MPA or RDMAP summary), with state transitions, drops and upcalls
interleaved in causal order::

    0.000010  |<---- #2 SYN-ACK seq=2 ack=1 len=0 -------------------|
              |      MPA Req v2 IRD 16 ORD 16 P2P RTR=RW pd="hello"   |

Built from :attr:`Network.journal <mpa_emu.net.network.Network.journal>`; the demo prints
it and the diagram command reuses :func:`render`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mpa_emu.stacks.contract.trace import TraceRecord
from mpa_emu.views.describe import (
    fpdu_summary,
    log_label,
    mpa_summary,
    rdma_cm_label,
    segment_label,
    upcall_label,
)
from mpa_emu.wire.addr import ip_text

if TYPE_CHECKING:
    from mpa_emu.net.network import CapturedFrame, JournalEntry, Network

GAP = 88
"""Characters between two adjacent host lanes."""
TIME_WIDTH = 11


@dataclass(frozen=True, slots=True)
class Row:
    """One ladder line: a frame between two lanes, or a note on one lane."""

    time_ns: int
    source: int
    target: int | None
    label: str
    detail: str | None = None
    lost: bool = False
    frame: int | None = None
    """The frame's number (1-based, as in the capture file) for a frame row."""


def state_change_text(record: TraceRecord) -> str:
    """``[#3] SYN_SENT -> MPAREQ_SENT`` from a ``state_changed`` trace record."""
    fields = record.fields
    old = fields.get("old", fields.get("from"))
    new = fields.get("new", fields.get("to", fields.get("state")))
    conn = fields.get("conn")
    prefix = f"[#{conn}] " if conn is not None else ""
    return f"{prefix}{old} -> {new}" if old is not None else f"{prefix}-> {new}"


def _frame_rows(frame: CapturedFrame, lanes: dict[str, int],
                with_addresses: bool = False) -> list[Row]:
    source = lanes.get(frame.sender, 0)
    seg = frame.segment
    if seg is None:
        return [Row(frame.time_ns, source, None, f"undecodable frame ({len(frame.data)} bytes)")]
    if with_addresses:
        label = (f"{_endpoint(seg.src_ip, seg.sport)}>{_endpoint(seg.dst_ip, seg.dport)} "
                 f"{segment_label(seg)}")
    else:
        label = f"{seg.sport}>{seg.dport} {segment_label(seg)}"
    detail = mpa_summary(seg.payload) or (fpdu_summary(seg.payload) if seg.payload else None)
    fate = [n for n in frame.notes if not n.startswith("loopback")]
    lost = any(n.startswith(("wire: lost", "wire: dropped", "dropped by", "not delivered"))
               for n in frame.notes)
    if fate:
        detail = "; ".join(([detail] if detail else []) + fate)
    number = frame.index + 1
    if frame.loopback:
        return [Row(frame.time_ns, source, None, f"(lo) {label}", detail, frame=number)]
    targets: list[int | None] = [lanes[r] for r in frame.receivers if r in lanes] or [None]
    return [Row(frame.time_ns, source, t, label, detail, lost, number) for t in targets[:1]]


def rows(net: Network, *, hosts: Sequence[str] | None = None,
         since_ns: int = 0, logs: bool = False) -> list[Row]:
    """The ladder rows of a run (at or after ``since_ns``), from the network journal
    (needs ``tracing``). Each upcall is followed by the rdma_cm event the application
    gets for it (``=> RDMA_CM_EVENT_...``); ``logs`` adds the driver's kernel log lines
    (``klog ...``)."""
    return [row for _, row in journal_rows(net, hosts=hosts, since_ns=since_ns, logs=logs)]


def journal_rows(net: Network, *, hosts: Sequence[str] | None = None,
                 since_ns: int = 0, logs: bool = False) -> Iterator[tuple[JournalEntry, Row]]:
    """:func:`rows` as they are made, each with the journal entry it comes from (a
    frame's entry carries its :class:`~mpa_emu.net.network.CapturedFrame`): one pass over
    the journal, which may be on disk."""
    if net.journal is None:
        raise ValueError("the ladder needs a network built with tracing=True")
    names = list(hosts) if hosts is not None else list(net.hosts)
    lanes = {name: i for i, name in enumerate(names)}
    # A lane stands for a host, not an address: when a host sends from several
    # addresses, the arrows name them.
    with_addresses = any(len(used) > 1 for used in sent_from(net, since_ns).values())
    for entry in net.journal:
        if entry.time_ns < since_ns:
            continue
        lane = lanes.get(entry.host)
        if entry.kind == "frame":
            for row in _frame_rows(entry.item, lanes, with_addresses):
                yield entry, row
        elif lane is None:
            continue
        elif entry.kind == "upcall":
            yield entry, Row(entry.time_ns, lane, None, upcall_label(entry.item))
        else:
            record: TraceRecord = entry.item
            if record.kind == "state_changed":
                yield entry, Row(entry.time_ns, lane, None, state_change_text(record))
            elif record.kind == "segment_dropped" and record.fn not in ("wire", "nic"):
                yield entry, Row(entry.time_ns, lane, None,
                                 f"drop: {record.fields.get('reason', '?')} ({record.fn})")
            elif record.kind == "node_freed":
                conn = record.fields.get("conn")
                state = record.fields.get("state")
                yield entry, Row(entry.time_ns, lane, None,
                                 f"[#{conn}] freed" + (f" (was {state})" if state else ""))
            elif record.kind == "rdma_cm_event":
                yield entry, Row(entry.time_ns, lane, None, rdma_cm_label(record.fields))
            elif record.kind == "kernel_log":
                if logs:
                    yield entry, Row(entry.time_ns, lane, None, log_label(record.fields))
            elif record.kind in ("kernel_leak", "kernel_bug", "verb_failed"):
                what = record.fields.get("what", record.fields.get("error", ""))
                yield entry, Row(entry.time_ns, lane, None,
                                 f"{record.kind}: {what}".rstrip(": "))


def _endpoint(ip: bytes, port: int) -> str:
    text = ip_text(ip)
    return f"[{text}]:{port}" if ":" in text else f"{text}:{port}"


def sent_from(net: Network, since_ns: int = 0) -> dict[str, list[bytes]]:
    """The source addresses each host sent frames from (at or after ``since_ns``), in
    order of first use."""
    used: dict[str, list[bytes]] = {}
    for frame in net.frames:
        if frame.segment is not None and frame.time_ns >= since_ns:
            seen = used.setdefault(frame.sender, [])
            if frame.segment.src_ip not in seen:
                seen.append(frame.segment.src_ip)
    return used


def _lane_x(lane: int) -> int:
    return TIME_WIDTH + 1 + lane * (GAP + 1)


def _split_label(label: str, room: int) -> tuple[str, str]:
    """The longest start of ``label`` that fits ``room`` characters, cut at a space, and
    the rest (shown on the next line: a ladder never cuts a label short)."""
    if len(label) <= room:
        return label, ""
    cut = label.rfind(" ", 0, room + 1)
    if cut <= 0:
        cut = room
    return label[:cut], label[cut:].strip()


def _arrow(source: int, target: int, label: str, lost: bool) -> tuple[int, str, str]:
    """Where the arrow starts, its text, and what of the label did not fit on it."""
    left, right = sorted((source, target))
    span = (right - left) * (GAP + 1) - 1
    shown, rest = _split_label(label, span - 8)
    body = f" {shown} "
    if source < target:
        head = "x" if lost else ">"
        text = "--" + body + "-" * (span - 3 - len(body)) + head
    else:
        head = "x" if lost else "<"
        text = head + "-" * (span - 3 - len(body)) + body + "--"
    return _lane_x(left) + 1, text, rest


def numbered(row: Row) -> str:
    """A row's label, led by its frame's number (``#4``, as reports name frames) when the
    row is a frame."""
    return row.label if row.frame is None else f"#{row.frame} {row.label}"


def render(rows_: Iterable[Row], columns: Sequence[str]) -> str:
    """Draw rows under a header of column titles (one per lane)."""
    return "\n".join(render_lines(rows_, columns)) + "\n"


def render_lines(rows_: Iterable[Row], columns: Sequence[str]) -> Iterator[str]:
    """:func:`render` line by line (no newlines), for rows read as a stream."""
    width = _lane_x(len(columns) - 1) + 1
    header = [" "] * (width + GAP)
    for i, title in enumerate(columns):
        x = _lane_x(i)
        for j, ch in enumerate(title):
            if x + j < len(header):
                header[x + j] = ch
    yield "".join(header).rstrip()
    last_time: int | None = None
    for row in rows_:
        line = [" "] * width
        for i in range(len(columns)):
            line[_lane_x(i)] = "|"
        stamp = f"{row.time_ns / 1e9:.6f}" if row.time_ns != last_time else ""
        last_time = row.time_ns
        line[: len(stamp)] = list(stamp)
        label = numbered(row)
        if row.target is not None and row.target != row.source:
            x, text, rest = _arrow(row.source, row.target, label, row.lost)
            line[x: x + len(text)] = list(text)
            yield "".join(line).rstrip()
            for extra in (rest, row.detail):
                if extra:
                    detail_line = [" "] * width
                    for i in range(len(columns)):
                        detail_line[_lane_x(i)] = "|"
                    left = _lane_x(min(row.source, row.target)) + 4
                    detail_line[left:] = list(extra)
                    yield "".join(detail_line).rstrip()
            continue
        text = label + (f"  [{row.detail}]" if row.detail else "")
        x = _lane_x(row.source) + 2
        if x + len(text) > len(line):
            line.extend(" " * (x + len(text) - len(line)))
        line[x: x + len(text)] = list(text)
        yield "".join(line).rstrip()


def column_titles(net: Network, hosts: Sequence[str] | None = None,
                  since_ns: int = 0) -> list[str]:
    """``alice 192.0.2.1`` for each host: its addresses, those it sent from first (an
    address removed during the run included)."""
    names = list(hosts) if hosts is not None else list(net.hosts)
    used = sent_from(net, since_ns)
    titles = []
    for name in names:
        addrs = list(used.get(name, []))
        addrs += [a for a in net.hosts[name].addresses if a not in addrs]
        titles.append(" ".join([name, *(ip_text(a) for a in addrs)][:3]))
    return titles


def ladder(net: Network, *, hosts: Sequence[str] | None = None, since_ns: int = 0,
           logs: bool = False) -> str:
    """The whole ladder of a run as text (rows at or after ``since_ns``; ``logs``: with
    the kernel log lines)."""
    return render(rows(net, hosts=hosts, since_ns=since_ns, logs=logs),
                  column_titles(net, hosts, since_ns))


def describe_frame(frame: CapturedFrame) -> dict[str, Any]:
    """A frame as plain values (for JSON summaries)."""
    seg = frame.segment
    return {
        "index": frame.index, "t_ns": frame.time_ns, "interface": frame.interface,
        "kind": frame.kind, "label": segment_label(seg) if seg is not None else None,
        "mpa": mpa_summary(seg.payload) if seg is not None else None,
        "comment": frame.comment,
    }
