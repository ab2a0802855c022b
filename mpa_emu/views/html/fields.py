"""A frame's decoded fields as (name, value) pairs for the HTML reports: Ethernet and IP
addresses, TCP header and options, and the MPA request/reply (RFC 5044 section 7.1,
RFC 6581 section 5) or FPDU (RFC 5044 section 4) it carries."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mpa_emu.capture.arp import Arp, mac_text, parse_arp
from mpa_emu.capture.checksums import OFFLOAD_NOTE, Mode, Verdict
from mpa_emu.capture.decode import (
    Lenient,
    Undecodable,
    as_captured,
    as_ethernet,
    decode_leniently,
)
from mpa_emu.capture.pcap import CaptureRecord, read_intact
from mpa_emu.views.describe import flags_label, fpdu_summary, text_or_hex, version_marks
from mpa_emu.views.html.fpdu_fields import FpduRows, capture_rows
from mpa_emu.views.inspection import options_text, parse_tcp_options
from mpa_emu.wire import erdma_mpa, mpa
from mpa_emu.wire.addr import ip_text
from mpa_emu.wire.private_data import decode_legacy
from mpa_emu.wire.segment import Segment
from mpa_emu.wire.ulp.detect import label_private_data

Fields = list[tuple[str, str]]
"""A frame explained: field name and value, in wire order."""

HEX_SHOWN = 96
"""Payload bytes shown in hex (a frame's full bytes are in the capture itself)."""


def _endpoint(ip: bytes, port: int) -> str:
    text = ip_text(ip)
    return f"[{text}]:{port}" if len(ip) == 16 else f"{text}:{port}"


def _mac(mac: bytes) -> str:
    return ":".join(f"{b:02x}" for b in mac)


def _mpa_fields(payload: bytes) -> Fields:
    head = mpa.parse_header(payload)
    kind = ("request" if head.is_request
            else "reject" if head.flags & mpa.FLAG_REJECT else "reply")
    out: Fields = [("MPA", f"{kind}, revision {head.rev}")]
    names = [name for bit, name in ((mpa.FLAG_MARKERS, "M (markers)"), (mpa.FLAG_CRC, "C (CRC)"),
                                    (mpa.FLAG_REJECT, "R (reject)"),
                                    (mpa.FLAG_ENHANCED, "S (enhanced RTR block)"))
             if head.flags & bit]
    out.append(("MPA flags", f"0x{head.flags:02x} " + (", ".join(names) or "none")))
    out.append(("PD_Length", str(head.pd_length)))
    try:
        # erdma's dialect: the 8-byte extension, then the private data.
        frame, ext = erdma_mpa.decode_frame(payload)
    except mpa.MpaFormatError as exc:
        out.append(("MPA problem", str(exc)))
        return out
    if ext is not None:
        out.append(("erdma extension", f"cookie 0x{ext.cookie:08x}, bits "
                    f"0x{ext.ext_bits:08x} (CC {ext.cc}: {ext.cc_name})"))
    if frame.rtr is not None:
        rtr = frame.rtr
        out.append(("IRD / ORD", f"{rtr.ird} / {rtr.ord}"))
        out.append(("peer-to-peer", "yes" if rtr.peer_to_peer else "no"))
        ops = [n for ok, n in ((rtr.zero_len_send, "zero-length Send"),
                               (rtr.write0, "zero-length RDMA Write"),
                               (rtr.read0, "zero-length RDMA Read")) if ok]
        out.append(("RTR offered", ", ".join(ops) or "none"))
    if frame.private_data:
        legacy = decode_legacy(frame.private_data)
        if legacy is not None:
            out.append(("private data format", legacy.text()))
        out += upper_protocol_fields(frame.private_data, head.is_request)
        out.append(("private data", text_or_hex(frame.private_data, limit=200)))
        out.append(("private data hex", frame.private_data[:HEX_SHOWN].hex(" ")
                    + (" ..." if len(frame.private_data) > HEX_SHOWN else "")))
    return out


def segment_fields(seg: Segment, *, seq: int | None = None) -> Fields:
    """The decoded fields of one segment. ``seq`` overrides the shown sequence number
    (replay shows the emulator's frames in the capture's numbering)."""
    out: Fields = [("from", _endpoint(seg.src_ip, seg.sport)),
                   ("to", _endpoint(seg.dst_ip, seg.dport)),
                   ("MACs", f"{_mac(seg.src_mac)} > {_mac(seg.dst_mac)}")]
    if seg.vlan is not None:
        out.append(("VLAN", f"{seg.vlan} (priority {seg.pcp})"))
    out += [("TCP flags", flags_label(seg.flags)),
            ("seq", str(seg.seq if seq is None else seq)),
            ("ack", str(seg.ack)),
            ("window", str(seg.window))]
    if seg.options:
        opts, problem = parse_tcp_options(seg.options)
        text = options_text(opts)
        if "ts" in opts:
            text += f" (TSval {opts['ts'][0]}, TSecr {opts['ts'][1]})"
        out.append(("TCP options", text + (f"; {problem}" if problem else "")))
    out.append(("payload", f"{len(seg.payload)} bytes"))
    if mpa.looks_like_mpa(seg.payload):
        out += _mpa_fields(seg.payload)
    elif seg.payload:
        fpdu = fpdu_summary(seg.payload)
        if fpdu is not None:
            out.append(("FPDU", fpdu))
        out.append(("payload hex", seg.payload[:HEX_SHOWN].hex(" ")
                    + (" ..." if len(seg.payload) > HEX_SHOWN else "")))
    return out


def arp_fields(arp: Arp) -> Fields:
    """An ARP frame's fields (RFC 826): what it asks or answers, and its addresses."""
    return [("ARP", arp.text()),
            ("sender", f"{arp.sender} ({mac_text(arp.sender_mac)})"),
            ("target", f"{arp.target} ({mac_text(arp.target_mac)})")]


def checksum_fields(verdict: Verdict, ip_ok: bool, mode: Mode) -> Fields:
    """The checksum verdicts of a captured frame as the text reports read them under
    ``--checksums`` ``mode`` (:mod:`mpa_emu.capture.checksums`): the frame is decoded
    whatever they say."""
    out: Fields = []
    if not ip_ok:
        out.append(("IPv4 header checksum", "not verified (--checksums off)"
                    if mode is Mode.OFF else "bad"))
    if mode is Mode.OFF:
        text = "not verified (--checksums off)"
    elif verdict is Verdict.OFFLOAD:
        text = (OFFLOAD_NOTE if mode is Mode.OFFLOAD
                else "TX offload partial sum: an error with --checksums strict")
    else:
        text = {Verdict.GOOD: "correct", Verdict.BAD: "bad",
                Verdict.UNCHECKED: "not verified: the frame was captured short"}[verdict]
    out.append(("TCP checksum", text))
    return out


def _with_fpdus(body: Fields, rows: Sequence[Fields], payload: bytes) -> Fields:
    """``body`` with its one-line FPDU summary replaced by inspect's rows of each FPDU
    starting in the frame (the second and later numbered), before the payload's hex; a
    DDP or RDMAP version other than 1 of an FPDU the payload starts with is named."""
    kept = [f for f in body if f[0] != "FPDU"]
    at = next((i for i, f in enumerate(kept) if f[0] == "payload hex"), len(kept))
    try:
        marks = version_marks(mpa.unframe_fpdu(payload).ulpdu)
    except mpa.MpaFormatError:  # the frame starts inside an FPDU begun before it
        marks = ""
    extra: Fields = []
    for n, one in enumerate(rows):
        extra += [(name if n == 0 else f"{name} #{n + 1}",
                   value + (";" + marks if n == 0 and name == "FPDU" and marks else ""))
                  for name, value in one]
    return kept[:at] + extra + kept[at:]


def capture_fields(path: str | Path, checksums: Mode = Mode.OFFLOAD,
                   fpdus: FpduRows | None = None) -> dict[int, Fields]:
    """Fields of every frame of a capture, by frame number (1-based), each decoded
    whatever its checksums (as inspect and diagram do) with the verdict on them under
    ``checksums``; frames that do not decode say why. A capture cut short gives the
    frames before the cut. The FPDUs are inspect's (``fpdus``, by the frame each starts
    in; read from the capture as inspect reads it when not given)."""
    if fpdus is None:
        fpdus = capture_rows(path, checksums)
    records, _fault = read_intact(path)
    base = next((r.time_ns for r in records if r.time_ns is not None), 0)
    return {number: record_fields(number, rec, base, checksums, fpdus.get(number))
            for number, rec in enumerate(records, start=1)}


def record_fields(number: int, rec: CaptureRecord, base: int, checksums: Mode,
                  fpdu_rows: Sequence[Fields] | None = None) -> Fields:
    """The fields of one captured frame (``number``, 1-based), its time from ``base``;
    ``fpdu_rows`` inspect's rows of the FPDUs that start in it."""
    head: Fields = [("frame", str(number)),
                    ("time", f"{((rec.time_ns or base) - base) / 1e9:.6f} s")]
    frame = as_ethernet(rec.linktype, rec.frame)
    if isinstance(frame, str):
        return [*head, ("not decoded", frame)]
    decoded = decode_leniently(frame)
    short = rec.orig_len > len(rec.frame)
    if isinstance(decoded, Undecodable) and short:
        cut = as_captured(frame)  # captured short: the bytes the capture holds
        captured = decode_leniently(cut) if cut is not None else decoded
        if not isinstance(captured, Undecodable):
            decoded = Lenient(captured.seg, Verdict.UNCHECKED, True)
    if isinstance(decoded, Undecodable):
        arp = parse_arp(frame)
        return [*head, *(arp_fields(arp) if arp is not None
                         else [("not decoded", decoded.text)])]
    body = segment_fields(decoded.seg)
    if fpdu_rows:
        body = _with_fpdus(body, fpdu_rows, decoded.seg.payload)
    if short:
        body.append(("captured", f"{len(rec.frame)} of {rec.orig_len} bytes (snap "
                                 "length): the payload shown is what the capture holds"))
    body += checksum_fields(decoded.checksum, decoded.ip_ok, checksums)
    if rec.comment:
        body.append(("comment", rec.comment.replace("\n", "; ")))
    return head + body


def upper_protocol_fields(data: bytes, request: bool) -> Fields:
    """The upper protocol's fields of a frame's private data when its bytes prove the
    format (:func:`mpa_emu.wire.ulp.detect.label_private_data`), else none."""
    ulp = label_private_data(data, request=request)
    if ulp is None:
        return []
    return [("upper protocol", ulp.text())] + [
        (f"  {name}", str(value)) for name, value in ulp.fields().items()]
