"""Segments and upcalls in words: the one place every view, report and console takes
its descriptions from.

Segments: :func:`segment_label` (the ladder's ``[SYN, ACK] seq=.. ack=..`` with Wireshark's
option names), :func:`segment_line` (replay's one line with addresses, ``SYN|ACK`` and the
payload in MPA terms), and their parts (:func:`flags_label`, :func:`flags_joined`,
:func:`options_label`, :func:`describe_options`, :func:`mpa_summary`, :func:`fpdu_summary`,
:func:`describe_payload`; what a payload is in MPA terms is
:func:`mpa_emu.wire.mpa.mpa_kind`). Upcalls: :func:`upcall_label` (as the
application sees it, in the ladder), :func:`upcall_line` (the live console),
:func:`upcall_text` (replay reports), with :func:`errno_text` for their status; the
rdma_cm event beside each (:func:`rdma_cm_label`, :func:`rdma_cm_text`) and the kernel log
lines (:func:`log_label`).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from mpa_emu.stacks.contract.errors import errno_name
from mpa_emu.stacks.contract.events import IwEvent, Upcall
from mpa_emu.ulp.rdma_cm import RdmaCmEvent
from mpa_emu.wire import erdma_mpa, mpa, tcp_options
from mpa_emu.wire.addr import ip_text
from mpa_emu.wire.ddp import (
    DDP_FLAG_LAST,
    DDP_VERSION,
    DDP_VERSION_MASK,
    OPCODE_NAMES,
    RDMAP_VERSION,
)
from mpa_emu.wire.mpa import MpaFormatError, mpa_kind
from mpa_emu.wire.private_data import decode_legacy
from mpa_emu.wire.segment import Segment, flag_names
from mpa_emu.wire.tcp_options import TcpOption, option_value, parse_options
from mpa_emu.wire.ulp.detect import label_private_data, label_send


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
        # erdma's dialect: its private data follows the 8-byte extension.
        frame, ext = erdma_mpa.decode_frame(payload)
    except mpa.MpaFormatError:
        parts.append(f"PD_Length {head.pd_length} (truncated)")
        return " ".join(parts)
    if ext is not None:
        parts.append(erdma_mpa.ext_text(ext))
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
        legacy = decode_legacy(frame.private_data)
        if legacy is not None:
            # [MS-SMBD] 6.1 (SMB Direct's IRD/ORD negotiate header).
            parts.append(f"MS-SMBD legacy IRD {legacy.ird} ORD {legacy.ord}"
                         + (" (LE)" if legacy.broken else ""))
        elif (ulp := label_private_data(frame.private_data,
                                        request=head.is_request)) is not None:
            parts.append(ulp.text())
        else:
            parts.append(f"pd={text_or_hex(frame.private_data)}")
    return " ".join(parts)


def fpdu_summary(payload: bytes, crc: bool | None = True) -> str | None:
    """``FPDU RDMA Read Request ulpdu=46 L=1`` for a payload that is one FPDU without markers
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
    last = int(bool(fpdu.ulpdu[0] & DDP_FLAG_LAST))  # RFC 5041 section 4.2: L
    ulp = label_send(fpdu.ulpdu)
    return (f"FPDU {name} ulpdu={len(fpdu.ulpdu)} L={last}{version_marks(fpdu.ulpdu)}"
            f"{verdict}{_read_request_tags(fpdu.ulpdu)}" + (f" [{ulp}]" if ulp else ""))


_UNTAGGED_HEADER = 18  # RFC 5041 section 4.4: control, RsvdULP, QN, MSN, MO


def _read_request_tags(ulpdu: bytes) -> str:
    """`` sink STag 0x5a5a TO 0x10000, source STag 0x77 TO 0x2000`` for an untagged RDMA
    Read Request with its whole header (RFC 5040 section 4.4: sink STag, sink TO, size,
    source STag, source TO); "" for anything else."""
    if ulpdu[0] & 0x80 or ulpdu[1] & 0x0F != 1 or len(ulpdu) < _UNTAGGED_HEADER + 28:
        return ""
    sink, sink_to, _size, src, src_to = struct.unpack_from("!IQIIQ", ulpdu, _UNTAGGED_HEADER)
    return f" sink STag 0x{sink:x} TO 0x{sink_to:x}, source STag 0x{src:x} TO 0x{src_to:x}"


def version_marks(ulpdu: bytes) -> str:
    """`` DDP version 0`` / `` RDMAP version 2`` for a DDP or RDMAP version that is not 1
    (RFC 5041 section 4.2: DV is 01b; RFC 5040 section 4.2: RV is 01b); "" otherwise."""
    if len(ulpdu) < 2:
        return ""
    dv, rv = ulpdu[0] & DDP_VERSION_MASK, ulpdu[1] >> 6
    return (f" DDP version {dv}" if dv != DDP_VERSION else "") + \
        (f" RDMAP version {rv}" if rv != RDMAP_VERSION else "")


def flags_label(flags: int) -> str:
    """Wireshark's way: ``[SYN, ACK]``, ``[FIN, ACK]``, ``[RST, ACK]``."""
    return "[" + ", ".join(flag_names(flags)) + "]"


def options_label(options: bytes) -> str:
    """TCP options named as Wireshark's Info column names them: ``MSS=1460 WS=2 SACK_PERM
    TSval=1 TSecr=0`` (RFC 9293 section 3.2, RFC 7323 sections 2.2 and 3.2, RFC 2018
    section 2), plus ``EOL`` for an end-of-list option (irdma ends its SYN options with
    one) and ``opt<kind>`` for any other kind. WS is the shift count the option carries
    (RFC 7323 section 2.2), as everywhere in mpa_emu; Wireshark's Info column shows the
    factor 2^shift instead."""
    parsed = parse_options(options)
    parts: list[str] = []
    for opt in parsed.options:
        if opt.kind == tcp_options.EOL:
            parts.append("EOL")
        elif opt.kind != tcp_options.NOP:
            parts.append(_option_label(opt))
    problem = parsed.problem
    if problem is not None and problem.what != "past end":  # stop rather than loop
        parts.append(f"opt{problem.kind} (bad length)")
    return " ".join(parts)


def _option_label(opt: TcpOption) -> str:
    value = option_value(opt)
    if isinstance(value, tuple):
        return f"TSval={value[0]} TSecr={value[1]}"
    if value is not None:
        return f"{'MSS' if opt.kind == tcp_options.MSS else 'WS'}={value}"
    if opt.kind == tcp_options.SACK_PERMITTED and opt.length == 2:
        return "SACK_PERM"
    return f"opt{opt.kind}"


def segment_label(seg: Segment) -> str:
    """``[SYN] seq=.. ack=.. len=.. MSS=1460 WS=2 EOL``."""
    text = f"{flags_label(seg.flags)} seq={seg.seq} ack={seg.ack} len={len(seg.payload)}"
    if seg.options:
        text += " " + options_label(seg.options)
    return text


def segment_line(seg: Segment) -> str:
    """One line for a segment: addresses, flags, numbers, options and payload summary."""
    src = ip_text(seg.src_ip)
    dst = ip_text(seg.dst_ip)
    if len(seg.src_ip) == 16:
        src, dst = f"[{src}]", f"[{dst}]"
    vlan = f" vlan {seg.vlan}" if seg.vlan is not None else ""
    text = (f"{src}:{seg.sport} > {dst}:{seg.dport}{vlan} [{flags_joined(seg.flags)}] "
            f"seq={seg.seq} ack={seg.ack} win={seg.window}")
    if seg.options:
        text += f" opts={describe_options(seg.options)}"
    if seg.payload:
        text += f" len={len(seg.payload)} {describe_payload(seg.payload)}"
    return text


def flags_joined(flags: int) -> str:
    """``SYN|ACK`` (``none`` when no flag is set)."""
    return "|".join(flag_names(flags)) or "none"


def describe_options(opts: bytes) -> str:
    """TCP options in words: MSS=1460,WS=2,EOL (WS the shift count, RFC 7323 section
    2.2)."""
    parsed = parse_options(opts)
    out: list[str] = []
    for opt in parsed.options:
        value = option_value(opt)
        if opt.kind == tcp_options.EOL:
            out.append("EOL")
        elif opt.kind == tcp_options.NOP:
            out.append("NOP")
        elif isinstance(value, tuple):
            out.append(f"TS={value[0]}/{value[1]}")
        elif value is not None:
            out.append(f"{'MSS' if opt.kind == tcp_options.MSS else 'WS'}={value}")
        elif opt.kind == tcp_options.SACK_PERMITTED:
            out.append("SACK_PERM")
        else:
            out.append(f"opt{opt.kind}({opt.value.hex()})")
    problem = parsed.problem
    if problem is not None and problem.what != "past end":
        out.append(f"bad({problem.rest.hex()})")
    return ",".join(out)


def describe_payload(payload: bytes) -> str:
    """MPA frames in words; other payloads as their first bytes."""
    kind = mpa_kind(payload)
    if kind in ("request", "reply", "reject"):
        try:
            frame, ext = erdma_mpa.decode_frame(payload)
        except MpaFormatError as exc:
            return f"MPA {kind} (malformed: {exc})"
        flags = "".join(ch for bit, ch in ((0x80, "M"), (0x40, "C"), (0x20, "R"), (0x10, "S"))
                        if frame.flags & bit) or "-"
        text = f"MPA {kind} rev {frame.rev} flags {flags} PD_Length {frame.wire_pd_length}"
        if ext is not None:
            text += f" [{erdma_mpa.ext_text(ext)}]"
        if frame.rtr is not None:
            r = frame.rtr
            rtr = "".join(n for on, n in ((r.peer_to_peer, "P2P "), (r.write0, "WRITE0 "),
                                          (r.read0, "READ0 "), (r.zero_len_send, "SEND0 "))
                          if on)
            text += f" [IRD {r.ird} ORD {r.ord} {rtr.strip()}]"
        legacy = decode_legacy(frame.private_data)
        ulp = label_private_data(frame.private_data, request=kind == "request")
        if legacy is not None:
            text += f" [{legacy.text()}]"
        elif ulp is not None:
            text += f" [{ulp.text()}]"
        elif frame.private_data:
            text += f" pdata={frame.private_data[:24].hex()}"
            if len(frame.private_data) > 24:
                text += "..."
        return text
    return f"data {payload[:16].hex()}{'...' if len(payload) > 16 else ''}"


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
    name = errno_name(-status)
    return f"-{name}" if name != str(-status) else str(status)


def upcall_line(upcall: Upcall) -> str:
    """One line per upcall, as the application sees it."""
    status = "" if upcall.status == 0 else f" status {upcall.status}"
    text = (f"t={upcall.time_ns / 1e9:.3f}s {IwEvent(upcall.event).name} conn {upcall.conn}"
            f"{status} {ip_text(upcall.local_ip)}:{upcall.local_port} <-> "
            f"{ip_text(upcall.remote_ip)}:{upcall.remote_port}")
    if upcall.event in (IwEvent.CONNECT_REQUEST, IwEvent.CONNECT_REPLY, IwEvent.ESTABLISHED):
        text += f" ird {upcall.ird} ord {upcall.ord}"
    if upcall.private_data or upcall.private_data_len:
        data = upcall.private_data
        printable = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in data)
        text += (f" private data len {upcall.private_data_len}: {data.hex()} \"{printable}\"")
    return text


def upcall_text(up: Upcall) -> str:
    """``CONNECT_REPLY status -111 (-ECONNREFUSED) pdata_len 4 (conn 1)``, as replay
    reports show it."""
    status = f" status {up.status} ({errno_text(up.status)})" if up.status else ""
    pd = f" pdata_len {up.private_data_len}" if up.private_data_len else ""
    return f"{up.event.name}{status}{pd} (conn {up.conn})"


def rdma_cm_label(fields: Mapping[str, Any]) -> str:
    """``=> RDMA_CM_EVENT_REJECTED status -111 (-ECONNREFUSED)`` from the fields of an
    ``rdma_cm_event`` trace record (or :meth:`mpa_emu.ulp.rdma_cm.UlpStep.trace_fields`):
    the event the application gets for the upcall just before it, or why it gets none."""
    event = fields.get("event")
    if event is None:
        note = fields.get("note") or "nothing goes up"
        return f"=> no rdma_cm event: {note}"
    status = int(fields.get("status") or 0)
    text = f"=> {event} status {status}"
    if status:
        text += f" ({errno_text(status)})"
    plen = fields.get("private_data_len") or 0
    if plen:
        text += f" pdata_len {plen}"
    return text


def rdma_cm_text(event: RdmaCmEvent) -> str:
    """``RDMA_CM_EVENT_REJECTED status -111 (conn 1)``, as replay reports and summaries
    show an rdma_cm event."""
    status = f" status {event.status}" if event.status else ""
    pd = f" pdata_len {event.private_data_len}" if event.private_data_len else ""
    return f"{event.name}{status}{pd} (conn {event.conn})"


def log_label(fields: Mapping[str, Any]) -> str:
    """``klog err: MPA reply error: ...`` from a ``kernel_log`` trace record's fields
    (``(dyndbg)`` marks a line only seen with dynamic debug on)."""
    level = fields.get("level", "?")
    dyn = " (dyndbg)" if fields.get("dynamic_debug") else ""
    return f"klog {level}{dyn}: {fields.get('text', '')}"
