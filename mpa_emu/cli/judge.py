"""``mpa-emu judge CAPTURE``: what tshark makes of a capture's MPA/DDP/RDMAP traffic."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from mpa_emu.cli import CliError
from mpa_emu.tshark import MPA_OPTIONS, NO_RPCRDMA_OPTIONS, Tshark, TsharkError

HELP = "run tshark on a capture with the MPA options and report its verdicts"

EPILOG = f"""\
tshark runs as: tshark -n -r CAPTURE {" ".join(MPA_OPTIONS)}
(with --no-rpcrdma also {" ".join(NO_RPCRDMA_OPTIONS)}), isolated from your Wireshark set-up:
an empty personal configuration folder and home, so your preferences, profiles and
personal plugins (the MPA v2 Lua plugin included) never change a verdict.

Reported: the MPA and DDP/RDMA summary lines, every FPDU CRC verdict, the MPA expert
infos of "-z expert" (tshark 4.0 counts the request ones twice), and the problems:
expert infos of severity Error, malformed frames and bad CRCs.

exit codes: 0 tshark found no problem, 1 it found some, 2 no tshark or unreadable file
"""

CHECKSUM_OPTIONS = ("-o", "ip.check_checksum:TRUE", "-o", "tcp.check_checksum:TRUE")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mpa-emu judge``."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("capture", help="pcap or pcapng file")
    parser.add_argument("--no-rpcrdma", action="store_true",
                        help="stop the RPC-over-RDMA heuristic from claiming short Sends")
    parser.add_argument("--checksums", action="store_true",
                        help="also have tshark verify IP and TCP checksums")
    parser.add_argument("--tshark", metavar="PATH", help="the tshark binary to use")
    parser.add_argument("--json", action="store_true", help="print the verdicts as JSON")


def judge_capture(judge: Tshark, capture: str) -> dict[str, Any]:
    """Every verdict on ``capture`` as plain data (the JSON form of the report)."""
    crcs = judge.crc_verdicts(capture)
    experts = [e for e in judge.expert(capture) if e.protocol.startswith("IWARP")]
    return {
        "capture": capture,
        "tshark": judge.version(),
        "frames": judge.summary(capture, "iwarp_mpa || iwarp_ddp_rdmap"),
        "crc": [{"frame": v.frame, "status": v.status, "text": v.text} for v in crcs],
        "expert": [{"severity": e.severity, "group": e.group, "protocol": e.protocol,
                    "summary": e.summary, "count": e.count} for e in experts],
        "problems": judge.problems(capture),
    }


def format_verdicts(report: dict[str, Any]) -> str:
    """The report as text for a terminal."""
    lines = [f"{report['capture']}: {report['tshark']}", "", "MPA/DDP frames:"]
    lines += [f"  {line}" for line in report["frames"]] or ["  (none)"]
    counts = {s: sum(1 for v in report["crc"] if v["status"] == s)
              for s in ("good", "bad", "unchecked")}
    lines += ["", "CRC: " + ", ".join(f"{n} {s}" for s, n in counts.items())]
    lines += [f"  frame {v['frame']}: {v['text']}" for v in report["crc"]
              if v["status"] != "good"]
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
        judge = Tshark(args.tshark, disable_rpcrdma=args.no_rpcrdma,
                       extra_options=CHECKSUM_OPTIONS if args.checksums else ())
        report = judge_capture(judge, args.capture)
    except TsharkError as exc:
        raise CliError(str(exc)) from None
    if args.json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    else:
        sys.stdout.write(format_verdicts(report))
    return 1 if report["problems"] else 0
