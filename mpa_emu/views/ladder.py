"""A readable text ladder of a run: one column per host, an arrow per frame (flags, seq,
ack, length, and an MPA or RDMAP summary), with state transitions, drops and upcalls
interleaved in causal order::

    0.000010  |<---- SYN-ACK seq=2 ack=1 len=0 ----------------------|
              |      MPA Req v2 IRD 16 ORD 16 P2P RTR=RW pd="hello"   |

Built from :attr:`Network.journal <mpa_emu.net.network.Network.journal>`; the demo prints
it and the diagram command reuses :func:`render`.
"""

from __future__ import annotations

import errno as errno_names
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mpa_emu.cm.events import IwEvent, Upcall
from mpa_emu.cm.trace import TraceRecord
from mpa_emu.wire import mpa
from mpa_emu.wire.addr import ip_text
from mpa_emu.wire.ddp import OPCODE_NAMES
from mpa_emu.wire.segment import Segment, flag_names

if TYPE_CHECKING:
    from mpa_emu.net.network import CapturedFrame, Network

GAP = 88
"""Characters between two adjacent host lanes."""
TIME_WIDTH = 11


def text_or_hex(data: bytes, limit: int = 40) -> str:
    """Private data for people: printable ASCII in quotes, anything else as hex, and a
    printable start followed by other bytes as both (``"busy"+0a0b``). Long values are
    cut with '...'."""
    printable = 0
    while printable < len(data) and 32 <= data[printable] < 127:
        printable += 1
    if printable == len(data) and data:
        shown = data[:limit].decode("ascii")
        return f'"{shown}"' + ("..." if len(data) > limit else "")
    if printable >= 4:
        return text_or_hex(data[:printable], limit) + "+" + \
            text_or_hex(data[printable:], limit).removeprefix("0x")
    shown_hex = data[: limit // 2].hex()
    return f"0x{shown_hex}" + ("..." if len(data) > limit // 2 else "")


def mpa_summary(payload: bytes) -> str | None:
    """``MPA Req v2 IRD 16 ORD 16 P2P RTR=RW pd="hello"`` for a request, reply or reject
    (RFC 5044 section 7.1, RFC 6581 section 5); None when the payload is not one."""
    if not mpa.looks_like_mpa(payload):
        return None
    head = mpa.parse_header(payload)
    kind = "Req" if head.is_request else ("Rej" if head.flags & mpa.FLAG_REJECT else "Rep")
    parts = [f"MPA {kind} v{head.rev}"]
    try:
        frame = mpa.decode_frame(payload)
    except mpa.MpaFormatError:
        parts.append(f"PD_Length {head.pd_length} (truncated)")
        return " ".join(parts)
    if frame.rtr is not None:
        rtr = frame.rtr
        ird = "none" if rtr.ird == mpa.IRD_ORD_MASK else str(rtr.ird)
        ord_ = "none" if rtr.ord == mpa.IRD_ORD_MASK else str(rtr.ord)
        parts.append(f"IRD {ird} ORD {ord_}")
        if rtr.peer_to_peer:
            parts.append("P2P")
        ops = ("R" if rtr.read0 else "") + ("W" if rtr.write0 else "") + \
            ("S" if rtr.zero_len_send else "")
        parts.append(f"RTR={ops or '-'}")
    flag_names = [name for bit, name in ((mpa.FLAG_MARKERS, "M"), (mpa.FLAG_CRC, "CRC"))
                  if head.flags & bit]
    if flag_names:
        parts.append("+".join(flag_names))
    if frame.private_data:
        parts.append(f"pd={text_or_hex(frame.private_data)}")
    return " ".join(parts)


def fpdu_summary(payload: bytes, crc: bool | None = True) -> str | None:
    """``FPDU RDMA Read Request`` for a payload that is one FPDU without markers
    (RFC 5044 section 4, RFC 5041 section 4, RFC 5040 section 4); None otherwise.

    ``crc`` says whether CRC was negotiated (RFC 5044 section 7.1: C in the request or
    reply): only then is a wrong CRC named ("bad CRC", or "zero CRC" for a CRC field of
    zero); with ``False`` or ``None`` (not known) the summary gives no CRC verdict."""
    try:
        fpdu = mpa.unframe_fpdu(payload)
    except mpa.MpaFormatError:
        return None
    if fpdu.wire_length != len(payload) or len(fpdu.ulpdu) < 2:
        return None
    opcode = fpdu.ulpdu[1] & 0x0F
    name = OPCODE_NAMES.get(opcode, f"RDMAP opcode {opcode}")
    verdict = ""
    if crc and not fpdu.crc_ok:
        verdict = " zero CRC" if fpdu.crc == 0 else " bad CRC"
    return f"FPDU {name} ulpdu={len(fpdu.ulpdu)}{verdict}"


def flags_label(flags: int) -> str:
    """Wireshark's way: ``[SYN, ACK]``, ``[FIN, ACK]``, ``[RST, ACK]``."""
    return "[" + ", ".join(flag_names(flags)) + "]"


def options_label(options: bytes) -> str:
    """TCP options as Wireshark's Info column names them: ``MSS=1460 WS=4 SACK_PERM
    TSval=1 TSecr=0`` (RFC 9293 section 3.2, RFC 7323 sections 2.2 and 3.2, RFC 2018
    section 2; WS is the multiplier 2^shift), plus ``EOL`` for an end-of-list option
    (irdma ends its SYN options with one) and ``opt<kind>`` for any other kind."""
    parts: list[str] = []
    i = 0
    while i < len(options):
        kind = options[i]
        if kind == 0:
            parts.append("EOL")
            break
        if kind == 1:
            i += 1
            continue
        length = options[i + 1] if i + 1 < len(options) else 0
        value = options[i + 2: i + length] if length >= 2 else b""
        if kind == 2 and len(value) == 2:
            parts.append(f"MSS={int.from_bytes(value, 'big')}")
        elif kind == 3 and len(value) == 1:
            parts.append(f"WS={1 << min(value[0], 14)}")  # RFC 7323 2.3: shift <= 14
        elif kind == 4 and length == 2:
            parts.append("SACK_PERM")
        elif kind == 8 and len(value) == 8:
            parts.append(f"TSval={int.from_bytes(value[:4], 'big')} "
                         f"TSecr={int.from_bytes(value[4:], 'big')}")
        else:
            parts.append(f"opt{kind}")
        if length < 2:  # malformed: stop rather than loop
            parts.append("(bad length)")
            break
        i += length
    return " ".join(parts)


def segment_label(seg: Segment) -> str:
    """``[SYN] seq=.. ack=.. len=.. MSS=1460 WS=4 EOL``."""
    text = f"{flags_label(seg.flags)} seq={seg.seq} ack={seg.ack} len={len(seg.payload)}"
    if seg.options:
        text += " " + options_label(seg.options)
    return text


def upcall_label(upcall: Upcall) -> str:
    """``<< CONNECT_REPLY -ECONNREFUSED pd="no"`` as the application sees it."""
    name = IwEvent(upcall.event).name
    status = "" if upcall.status == 0 else " " + errno_text(upcall.status)
    text = f"<< {name}{status}"
    if upcall.event in (IwEvent.CONNECT_REQUEST, IwEvent.CONNECT_REPLY, IwEvent.ESTABLISHED):
        text += f" ird={upcall.ird} ord={upcall.ord}"
    if upcall.private_data:
        data = upcall.private_data
        past = upcall.private_data_past_frame
        sent = data[: len(data) - past]
        text += f" pd={text_or_hex(sent) if sent else chr(34) * 2}"
        if past:
            # The v2 +4 quirk: bytes from past the MPA frame (irdma_parse_mpa), not
            # something the peer sent.
            text += f" +{past} past the frame: {data[len(sent):].hex()}"
    return text


def errno_text(status: int) -> str:
    """``-111`` -> ``-ECONNREFUSED``."""
    name = errno_names.errorcode.get(-status)
    return f"-{name}" if name else str(status)


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
         since_ns: int = 0) -> list[Row]:
    """The ladder rows of a run (at or after ``since_ns``), from the network journal
    (needs ``tracing``)."""
    if net.journal is None:
        raise ValueError("the ladder needs a network built with tracing=True")
    names = list(hosts) if hosts is not None else list(net.hosts)
    lanes = {name: i for i, name in enumerate(names)}
    # A lane stands for a host, not an address: when a host sends from several
    # addresses, the arrows name them.
    with_addresses = any(len(used) > 1 for used in sent_from(net, since_ns).values())
    out: list[Row] = []
    for entry in net.journal:
        if entry.time_ns < since_ns:
            continue
        lane = lanes.get(entry.host)
        if entry.kind == "frame":
            out.extend(_frame_rows(entry.item, lanes, with_addresses))
        elif lane is None:
            continue
        elif entry.kind == "upcall":
            out.append(Row(entry.time_ns, lane, None, upcall_label(entry.item)))
        else:
            record: TraceRecord = entry.item
            if record.kind == "state_changed":
                out.append(Row(entry.time_ns, lane, None, state_change_text(record)))
            elif record.kind == "segment_dropped" and record.fn not in ("wire", "nic"):
                out.append(Row(entry.time_ns, lane, None,
                               f"drop: {record.fields.get('reason', '?')} ({record.fn})"))
            elif record.kind == "node_freed":
                conn = record.fields.get("conn")
                state = record.fields.get("state")
                out.append(Row(entry.time_ns, lane, None,
                               f"[#{conn}] freed" + (f" (was {state})" if state else "")))
            elif record.kind in ("kernel_leak", "kernel_bug", "verb_failed"):
                what = record.fields.get("what", record.fields.get("error", ""))
                out.append(Row(entry.time_ns, lane, None, f"{record.kind}: {what}".rstrip(": ")))
    return out


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
        if row.target is not None and row.target != row.source:
            x, text, rest = _arrow(row.source, row.target, row.label, row.lost)
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
        text = row.label + (f"  [{row.detail}]" if row.detail else "")
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


def ladder(net: Network, *, hosts: Sequence[str] | None = None, since_ns: int = 0) -> str:
    """The whole ladder of a run as text (rows at or after ``since_ns``)."""
    return render(rows(net, hosts=hosts, since_ns=since_ns),
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
