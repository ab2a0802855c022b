"""``mpa-emu judge CAPTURE``: what tshark makes of a capture's MPA/DDP/RDMAP traffic."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Container
from typing import Any, TextIO

from mpa_emu.capture.checksums import OFFLOAD_NOTE, Mode, Verdict
from mpa_emu.capture.tshark import (
    MPA_OPTIONS,
    NO_RPCRDMA_OPTIONS,
    CrcVerdict,
    ExpertInfo,
    Tshark,
    TsharkError,
)
from mpa_emu.cli import CliError
from mpa_emu.views.inspection import InspectError, TcpFrame, decode_frame, read_frames

HELP = "run tshark on a capture with the MPA options and report its verdicts"

EPILOG = f"""\
tshark runs as: tshark -n -r CAPTURE {" ".join(MPA_OPTIONS)}
(with --no-rpcrdma also {" ".join(NO_RPCRDMA_OPTIONS)}), isolated from your Wireshark set-up:
an empty personal configuration folder and home, so your preferences, profiles and
personal plugins (the MPA v2 Lua plugin included) never change a verdict.

Reported: the checksum reading used, the MPA and DDP/RDMA summary lines, every FPDU CRC
verdict (tshark gives one only where C was set in the request or reply), the MPA expert
infos of "-z expert" (tshark 4.0 counts the request ones twice), and the problems:
expert infos of severity Error, malformed frames and bad CRCs.

--checksums offload (the default): tshark decodes as Wireshark does by default (TCP
checksums not verified, so a TX offload artefact never stops reassembly), verifies IPv4
header checksums, and judges TCP checksums in a second pass; a bad one whose field holds
only the pseudo-header sum (or zero) is a TX checksum offload artefact, noted once per
sender, not a problem. strict (a bare --checksums): tshark verifies IP and TCP checksums
while decoding, every bad one is a problem (and tshark does not reassemble such
segments). off: no checksum is verified. inspect reads checksums the same way.

exit codes: 0 tshark found no problem, 1 it found some, 2 no tshark or unreadable file
"""

IP_CHECKSUM = ("-o", "ip.check_checksum:TRUE")
TCP_CHECKSUM = ("-o", "tcp.check_checksum:TRUE")
CHECKSUM_OPTIONS = IP_CHECKSUM + TCP_CHECKSUM
MODE_OPTIONS = {Mode.STRICT: CHECKSUM_OPTIONS, Mode.OFFLOAD: IP_CHECKSUM, Mode.OFF: ()}
"""tshark's options for each ``--checksums`` reading."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mpa-emu judge``."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("capture", help="pcap or pcapng file (- reads standard input)")
    parser.add_argument("--no-rpcrdma", action="store_true",
                        help="stop the RPC-over-RDMA heuristic from claiming short Sends")
    parser.add_argument("--checksums", choices=[m.value for m in Mode], default="offload",
                        nargs="?", const="strict",
                        help="strict (alone: --checksums): tshark verifies IP and TCP "
                             "checksums, every bad one a problem; offload (default): TX "
                             "offload artefacts are notes; off: nothing verified")
    parser.add_argument("--tshark", metavar="PATH", help="the tshark binary to use")
    parser.add_argument("--json", action="store_true", help="print the verdicts as JSON")


def judge_capture(judge: Tshark, capture: str, mode: Mode = Mode.STRICT) -> dict[str, Any]:
    """Every verdict on ``capture`` as plain data (the JSON form of the report).

    ``judge`` must run with :data:`MODE_OPTIONS` of ``mode``; with ``offload`` the TCP
    checksums are judged by a second tshark pass and sorted here."""
    checksums, bad_checksums = _checksums(judge, capture, mode)
    frames = list(judge.summary_lines(capture, "iwarp_mpa || iwarp_ddp_rdmap"))
    crcs = judge.crc_verdicts(capture)
    table = judge.expert(capture)
    return {
        "capture": capture,
        "tshark": judge.version(),
        "checksums": checksums,
        "frames": frames,
        "crc": [{"frame": v.frame, "status": v.status, "text": v.text} for v in crcs],
        "expert": _iwarp_experts(table),
        "problems": _problems(judge, capture, table, [v for v in crcs if v.status == "bad"])
        + bad_checksums,
    }


def write_verdicts(judge: Tshark, capture: str, mode: Mode, out: TextIO,
                   name: str | None = None) -> bool:
    """:func:`format_verdicts` of :func:`judge_capture`, written as tshark's passes
    run: the MPA/DDP summary lines go out as tshark prints them and of the CRC verdicts
    only the counts and the bad ones are kept, so memory does not grow with the
    capture. ``name`` is the capture's name in the header. True when tshark found a
    problem."""
    checksums, bad_checksums = _checksums(judge, capture, mode)
    out.write("\n".join(_head_lines(name or capture, judge.version(), checksums)) + "\n")
    out.write("\nMPA/DDP frames:\n")
    any_frame = False
    for line in judge.summary_lines(capture, "iwarp_mpa || iwarp_ddp_rdmap"):
        out.write(f"  {line}\n")
        any_frame = True
    if not any_frame:
        out.write("  (none)\n")
    out.flush()
    counts = {"good": 0, "bad": 0, "unchecked": 0}
    bad: list[CrcVerdict] = []
    for v in judge.crc_verdict_stream(capture):
        counts[v.status] = counts.get(v.status, 0) + 1
        if v.status == "bad":
            bad.append(v)
    table = judge.expert(capture)
    problems = _problems(judge, capture, table, bad) + bad_checksums
    lines = _crc_lines(counts, [{"frame": v.frame, "text": v.text} for v in bad])
    lines += _tail_lines(_iwarp_experts(table), problems)
    out.write("\n".join(lines) + "\n")
    return bool(problems)


def _iwarp_experts(table: list[ExpertInfo]) -> list[dict[str, Any]]:
    return [{"severity": e.severity, "group": e.group, "protocol": e.protocol,
             "summary": e.summary, "count": e.count}
            for e in table if e.protocol.startswith("IWARP")]


def _problems(judge: Tshark, capture: str, table: list[ExpertInfo],
              bad_crcs: list[CrcVerdict]) -> list[str]:
    """:meth:`Tshark.problems` from a table and CRC verdicts already read (one tshark
    pass for the tree instead of three more)."""
    out = [f"expert {e.severity}/{e.group} {e.protocol}: {e.summary} (x{e.count})"
           for e in table if e.severity == "Error"]
    out += [f"frame {e.frame}: {e.severity}/{e.group}: {e.message}"
            for e in judge.tree_expert_stream(capture)
            if e.severity == "Error" or e.group == "Malformed"]
    out += [f"frame {v.frame}: {v.text}" for v in bad_crcs]
    return out


def _checksums(judge: Tshark, capture: str,
               mode: Mode) -> tuple[dict[str, Any], list[str]]:
    """The report's ``checksums`` entry and the problems of the offload pass."""
    checksums: dict[str, Any] = {"mode": str(mode)}
    problems: list[str] = []
    if mode is Mode.OFFLOAD:
        artefacts, bad = _offload_pass(judge, capture)
        checksums["offload"] = artefacts
        checksums["bad"] = bad
        problems = [f"frame {n}: bad TCP checksum (not a TX offload partial sum)"
                    for n in bad]
    return checksums, problems


def _offload_pass(judge: Tshark, capture: str) -> tuple[dict[str, list[int]], list[int]]:
    """tshark's TCP checksum status per frame; of the bad ones, those whose field holds
    the pseudo-header partial sum or zero (:func:`mpa_emu.capture.checksums.tcp_verdict`) are
    offload artefacts, listed by sender; the rest are bad."""
    lines = judge.run_lines(capture, *TCP_CHECKSUM, "-Y", "tcp.checksum.status == 0", "-T",
                            "fields", "-E", "separator=|", "-e", "frame.number", "-e",
                            "ip.src", "-e", "ipv6.src")
    flagged: dict[int, str] = {}
    for line in lines:
        if line.strip():
            number_text, ip4, ip6 = [*line.rstrip("\n").split("|"), "", ""][:3]
            flagged[int(number_text)] = ip4 or ip6 or "?"
    if not flagged:
        return {}, []
    offload = _offload_frames(capture, flagged)
    artefacts: dict[str, list[int]] = {}
    bad: list[int] = []
    for number, sender in flagged.items():
        if number in offload:
            artefacts.setdefault(sender, []).append(number)
        else:
            bad.append(number)
    return artefacts, bad


def _offload_frames(capture: str, wanted: Container[int]) -> set[int]:
    """Of the frames numbered in ``wanted``, those whose TCP checksum is an offload
    artefact (the capture read once, only those frames decoded)."""
    found: set[int] = set()
    try:
        for raw in read_frames(capture):
            if raw.number in wanted:
                decoded = decode_frame(raw)
                if isinstance(decoded, TcpFrame) and decoded.checksum is Verdict.OFFLOAD:
                    found.add(raw.number)
    except InspectError:
        pass  # damaged part-way: the frames before the damage are judged
    return found


CHECKSUM_TEXT = {
    "strict": "checksums strict: tshark verifies IP and TCP checksums",
    "offload": "checksums offload: tshark verifies IPv4 header and TCP checksums; TX "
               "checksum offload artefacts are notes, not problems",
    "off": "checksums off: not verified",
}


def format_verdicts(report: dict[str, Any]) -> str:
    """The report as text for a terminal."""
    checks = report.get("checksums", {"mode": "strict"})
    lines = _head_lines(report["capture"], report["tshark"], checks)
    lines += ["", "MPA/DDP frames:"]
    lines += [f"  {line}" for line in report["frames"]] or ["  (none)"]
    counts = {s: sum(1 for v in report["crc"] if v["status"] == s)
              for s in ("good", "bad", "unchecked")}
    lines += _crc_lines(counts, [v for v in report["crc"] if v["status"] == "bad"])
    lines += _tail_lines(report["expert"], report["problems"])
    return "\n".join(lines) + "\n"


def _head_lines(capture: str, tshark: str, checks: dict[str, Any]) -> list[str]:
    lines = [f"{capture}: {tshark}", CHECKSUM_TEXT.get(checks["mode"], checks["mode"])]
    for sender, frames in checks.get("offload", {}).items():
        n = len(frames)
        lines.append(f"  {sender}: {OFFLOAD_NOTE} ({n} frame{'s' if n > 1 else ''}, "
                     f"first {frames[0]}, last {frames[-1]})")
    return lines


def _crc_lines(counts: dict[str, int], bad: list[dict[str, Any]]) -> list[str]:
    counts = {s: counts.get(s, 0) for s in ("good", "bad", "unchecked")}
    off = (" (the unchecked FPDUs are on connections without CRC: neither side set C, "
           "RFC 5044 section 7.1, so there is no verdict)" if counts["unchecked"] else "")
    lines = ["", "CRC: " + ", ".join(f"{n} {s}" for s, n in counts.items()) + off]
    return lines + [f"  frame {v['frame']}: {v['text']}" for v in bad]


def _tail_lines(expert: list[dict[str, Any]], problems: list[str]) -> list[str]:
    lines = ["", "MPA expert infos:"]
    lines += [f"  {e['severity']}/{e['group']}: {e['summary']} (x{e['count']})"
              for e in expert] or ["  (none)"]
    lines += ["", "problems:"]
    lines += [f"  {p}" for p in problems] or ["  none"]
    return lines


CAPTURE_MAGICS = (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4",  # pcap, microseconds
                  b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d",  # pcap, nanoseconds
                  b"\x0a\x0d\x0d\x0a")                          # pcapng section header


def _check_capture(path: str, name: str) -> None:
    """Refuse what is not a pcap/pcapng file before tshark sees it: tshark reads an empty
    file or a text file as a capture of nothing and would report no problem."""
    try:
        with open(path, "rb") as stream:
            head = stream.read(4)
    except FileNotFoundError:
        raise CliError(f"no such capture file: {name}") from None
    except OSError as exc:
        raise CliError(f"{name}: cannot open capture: {exc.strerror or exc}") from None
    if not head:
        raise CliError(f"{name}: empty file: not a pcap or pcapng capture")
    if head not in CAPTURE_MAGICS:
        raise CliError(f"{name}: not a pcap or pcapng file (starts with {head.hex(' ')})")


def run(args: argparse.Namespace) -> int:
    """Judge the capture; exit 1 when tshark finds a problem. tshark reads the capture
    several times, so standard input (``-``) is first copied to a temporary file."""
    if args.capture != "-":
        return _judge(args, args.capture)
    with tempfile.NamedTemporaryFile(prefix="mpa-emu-judge-", suffix=".pcap") as copy:
        shutil.copyfileobj(sys.stdin.buffer, copy)
        copy.flush()
        return _judge(args, copy.name, shown="-")


def _judge(args: argparse.Namespace, path: str, shown: str | None = None) -> int:
    _check_capture(path, shown or path)
    try:
        mode = Mode(args.checksums)
        judge = Tshark(args.tshark, disable_rpcrdma=args.no_rpcrdma,
                       extra_options=MODE_OPTIONS[mode])
        if not args.json:
            return 1 if write_verdicts(judge, path, mode, sys.stdout, shown) else 0
        report = judge_capture(judge, path, mode)
    except TsharkError as exc:
        raise CliError(str(exc).replace(path, shown or path)) from None
    if shown is not None:
        report["capture"] = shown
    sys.stdout.write(json.dumps(report, indent=2) + "\n")
    return 1 if report["problems"] else 0
