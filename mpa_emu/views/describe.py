"""Segments and upcalls in words: the one place every view, report and console takes
its descriptions from.

Segments: :func:`segment_label` (the ladder's ``[SYN, ACK] seq=.. ack=..`` with Wireshark's
option names), :func:`segment_line` (replay's one line with addresses, ``SYN|ACK`` and the
payload in MPA terms), and their parts (:func:`flags_label`, :func:`flags_joined`,
:func:`options_label`, :func:`describe_options`, :func:`mpa_summary`, :func:`fpdu_summary`,
:func:`describe_payload`, :func:`mpa_kind`). Upcalls: :func:`upcall_label` (as the
application sees it, in the ladder), :func:`upcall_line` (the live console),
:func:`upcall_text` (replay reports), with :func:`errno_text` for their status.
"""

from __future__ import annotations

from mpa_emu.cm.errors import errno_name
from mpa_emu.cm.events import IwEvent, Upcall
from mpa_emu.wire import mpa
from mpa_emu.wire.addr import ip_text
from mpa_emu.wire.ddp import (
    DDP_FLAG_LAST,
    DDP_VERSION,
    DDP_VERSION_MASK,
    OPCODE_NAMES,
    RDMAP_VERSION,
)
from mpa_emu.wire.mpa import FLAG_REJECT, KEY_REP, KEY_REQ, MpaFormatError, decode_frame
from mpa_emu.wire.segment import Segment, flag_names


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
    return (f"FPDU {name} ulpdu={len(fpdu.ulpdu)} L={last}{version_marks(fpdu.ulpdu)}"
            f"{verdict}")


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


def mpa_kind(payload: bytes) -> str:
    """"request", "reply", "reject", "data" or "" for an empty payload."""
    if not payload:
        return ""
    key = payload[:16]
    if len(payload) >= 20 and key in (KEY_REQ, KEY_REP):
        if key == KEY_REQ:
            return "request"
        return "reject" if payload[16] & FLAG_REJECT else "reply"
    return "data"


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
    """TCP options in words: MSS=1460,WS=2,EOL."""
    out: list[str] = []
    i = 0
    while i < len(opts):
        kind = opts[i]
        if kind == 0:
            out.append("EOL")
            break
        if kind == 1:
            out.append("NOP")
            i += 1
            continue
        if i + 1 >= len(opts) or opts[i + 1] < 2:
            out.append(f"bad({opts[i:].hex()})")
            break
        length = opts[i + 1]
        body = opts[i + 2:i + length]
        if kind == 2 and len(body) == 2:
            out.append(f"MSS={int.from_bytes(body, 'big')}")
        elif kind == 3 and len(body) == 1:
            out.append(f"WS={body[0]}")
        elif kind == 4:
            out.append("SACK_PERM")
        elif kind == 8 and len(body) == 8:
            out.append(f"TS={int.from_bytes(body[:4], 'big')}/{int.from_bytes(body[4:], 'big')}")
        else:
            out.append(f"opt{kind}({body.hex()})")
        i += length
    return ",".join(out)


def describe_payload(payload: bytes) -> str:
    """MPA frames in words; other payloads as their first bytes."""
    kind = mpa_kind(payload)
    if kind in ("request", "reply", "reject"):
        try:
            frame = decode_frame(payload)
        except MpaFormatError as exc:
            return f"MPA {kind} (malformed: {exc})"
        flags = "".join(ch for bit, ch in ((0x80, "M"), (0x40, "C"), (0x20, "R"), (0x10, "S"))
                        if frame.flags & bit) or "-"
        text = f"MPA {kind} rev {frame.rev} flags {flags} PD_Length {frame.wire_pd_length}"
        if frame.rtr is not None:
            r = frame.rtr
            rtr = "".join(n for on, n in ((r.peer_to_peer, "P2P "), (r.write0, "WRITE0 "),
                                          (r.read0, "READ0 "), (r.zero_len_send, "SEND0 "))
                          if on)
            text += f" [IRD {r.ird} ORD {r.ord} {rtr.strip()}]"
        if frame.private_data:
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
