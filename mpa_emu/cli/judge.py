"""``mpa-emu judge CAPTURE``: what tshark makes of a capture's MPA/DDP/RDMAP traffic."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from mpa_emu.checksums import OFFLOAD_NOTE, Mode, Verdict
from mpa_emu.cli import CliError
from mpa_emu.inspect import InspectError, TcpFrame, decode_frame, read_frames
from mpa_emu.tshark import MPA_OPTIONS, NO_RPCRDMA_OPTIONS, Tshark, TsharkError

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
    parser.add_argument("capture", help="pcap or pcapng file")
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
    crcs = judge.crc_verdicts(capture)
    experts = [e for e in judge.expert(capture) if e.protocol.startswith("IWARP")]
    problems = judge.problems(capture)
    checksums: dict[str, Any] = {"mode": str(mode)}
    if mode is Mode.OFFLOAD:
        artefacts, bad = _offload_pass(judge, capture)
        checksums["offload"] = artefacts
        checksums["bad"] = bad
        problems += [f"frame {n}: bad TCP checksum (not a TX offload partial sum)"
                     for n in bad]
    return {
        "capture": capture,
        "tshark": judge.version(),
        "checksums": checksums,
        "frames": judge.summary(capture, "iwarp_mpa || iwarp_ddp_rdmap"),
        "crc": [{"frame": v.frame, "status": v.status, "text": v.text} for v in crcs],
        "expert": [{"severity": e.severity, "group": e.group, "protocol": e.protocol,
                    "summary": e.summary, "count": e.count} for e in experts],
        "problems": problems,
    }


def _offload_pass(judge: Tshark, capture: str) -> tuple[dict[str, list[int]], list[int]]:
    """tshark's TCP checksum status per frame; of the bad ones, those whose field holds
    the pseudo-header partial sum or zero (:func:`mpa_emu.checksums.tcp_verdict`) are
    offload artefacts, listed by sender; the rest are bad."""
    out = judge.run(capture, *TCP_CHECKSUM, "-Y", "tcp.checksum.status == 0", "-T",
                    "fields", "-E", "separator=|", "-e", "frame.number", "-e", "ip.src",
                    "-e", "ipv6.src")
    rows = [line.split("|") for line in out.splitlines() if line.strip()]
    if not rows:
        return {}, []
    frames = _tcp_frames(capture)
    artefacts: dict[str, list[int]] = {}
    bad: list[int] = []
    for number_text, ip4, ip6 in ([*row, "", ""][:3] for row in rows):
        number = int(number_text)
        frame = frames.get(number)
        if frame is not None and frame.checksum is Verdict.OFFLOAD:
            artefacts.setdefault(ip4 or ip6 or "?", []).append(number)
        else:
            bad.append(number)
    return artefacts, bad


def _tcp_frames(capture: str) -> dict[int, TcpFrame]:
    out: dict[int, TcpFrame] = {}
    try:
        for raw in read_frames(capture):
            decoded = decode_frame(raw)
            if isinstance(decoded, TcpFrame):
                out[decoded.number] = decoded
    except InspectError:
        pass  # damaged part-way: the frames before the damage are judged
    return out


CHECKSUM_TEXT = {
    "strict": "checksums strict: tshark verifies IP and TCP checksums",
    "offload": "checksums offload: tshark verifies IPv4 header and TCP checksums; TX "
               "checksum offload artefacts are notes, not problems",
    "off": "checksums off: not verified",
}


def format_verdicts(report: dict[str, Any]) -> str:
    """The report as text for a terminal."""
    checks = report.get("checksums", {"mode": "strict"})
    lines = [f"{report['capture']}: {report['tshark']}",
             CHECKSUM_TEXT.get(checks["mode"], checks["mode"])]
    for sender, frames in checks.get("offload", {}).items():
        n = len(frames)
        lines.append(f"  {sender}: {OFFLOAD_NOTE} ({n} frame{'s' if n > 1 else ''}, "
                     f"first {frames[0]}, last {frames[-1]})")
    lines += ["", "MPA/DDP frames:"]
    lines += [f"  {line}" for line in report["frames"]] or ["  (none)"]
    counts = {s: sum(1 for v in report["crc"] if v["status"] == s)
              for s in ("good", "bad", "unchecked")}
    off = (" (the unchecked FPDUs are on connections without CRC: neither side set C, "
           "RFC 5044 section 7.1, so there is no verdict)" if counts["unchecked"] else "")
    lines += ["", "CRC: " + ", ".join(f"{n} {s}" for s, n in counts.items()) + off]
    lines += [f"  frame {v['frame']}: {v['text']}" for v in report["crc"]
              if v["status"] == "bad"]
    lines += ["", "MPA expert infos:"]
    lines += [f"  {e['severity']}/{e['group']}: {e['summary']} (x{e['count']})"
              for e in report["expert"]] or ["  (none)"]
    lines += ["", "problems:"]
    lines += [f"  {p}" for p in report["problems"]] or ["  none"]
    return "\n".join(lines) + "\n"


CAPTURE_MAGICS = (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4",  # pcap, microseconds
                  b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d",  # pcap, nanoseconds
                  b"\x0a\x0d\x0d\x0a")                          # pcapng section header


def _check_capture(path: str) -> None:
    """Refuse what is not a pcap/pcapng file before tshark sees it: tshark reads an empty
    file or a text file as a capture of nothing and would report no problem."""
    try:
        with open(path, "rb") as stream:
            head = stream.read(4)
    except FileNotFoundError:
        raise CliError(f"no such capture file: {path}") from None
    except OSError as exc:
        raise CliError(f"{path}: cannot open capture: {exc.strerror or exc}") from None
    if not head:
        raise CliError(f"{path}: empty file: not a pcap or pcapng capture")
    if head not in CAPTURE_MAGICS:
        raise CliError(f"{path}: not a pcap or pcapng file (starts with {head.hex(' ')})")


def run(args: argparse.Namespace) -> int:
    """Judge the capture; exit 1 when tshark finds a problem."""
    _check_capture(args.capture)
    try:
        mode = Mode(args.checksums)
        judge = Tshark(args.tshark, disable_rpcrdma=args.no_rpcrdma,
                       extra_options=MODE_OPTIONS[mode])
        report = judge_capture(judge, args.capture, mode)
    except TsharkError as exc:
        raise CliError(str(exc)) from None
    if args.json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    else:
        sys.stdout.write(format_verdicts(report))
    return 1 if report["problems"] else 0
