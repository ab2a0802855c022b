"""``mpa-emu judge CAPTURE``: what tshark makes of a capture's MPA/DDP/RDMAP traffic."""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
import tempfile
from collections.abc import Container, Iterator, Sequence
from typing import IO, Any, TextIO

from mpa_emu.capture.checksums import OFFLOAD_NOTE, Mode, Verdict
from mpa_emu.capture.pcap import CaptureError, PcapngWriter, read_capture
from mpa_emu.capture.tshark import (
    MPA_OPTIONS,
    NO_RPCRDMA_OPTIONS,
    SEVERITY_RANK,
    CrcVerdict,
    ExpertInfo,
    TreeExpert,
    Tshark,
    TsharkError,
    VersionFields,
    counted_protocol,
)
from mpa_emu.capture.tshark_pieces import Piece, Unsplittable, cut_capture
from mpa_emu.cli import CliError
from mpa_emu.cli.stack_profile import add_profile_argument, profiles_of
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
expert infos of severity Error and malformed frames raised by the iWARP, TCP and IP
dissectors, bad CRCs, and DDP or RDMAP versions other than 1 in tshark's decode
(iwarp_ddp.dv, iwarp_rdma.version). Errors of the dissectors above iWARP (SMB2, SMB
Direct, RPC-over-RDMA, NVMe, ...) judge the application's bytes: they are listed, not
counted. tshark before 4.6 does not know RFC 6581: every MPA v2 request raises "Rev field
is NOT set to one" and "Res field is NOT set to zero" (warnings); they are shown as a
known limitation, never a failure.

--checksums offload (the default): tshark decodes as Wireshark does by default (TCP
checksums not verified, so a TX offload artefact never stops reassembly), verifies IPv4
header checksums, and judges TCP checksums in a second pass; a bad one whose field holds
only the pseudo-header sum (or zero) is a TX checksum offload artefact, noted once per
sender, not a problem. strict (a bare --checksums): tshark verifies IP and TCP checksums
while decoding, every bad one is a problem (and tshark does not reassemble such
segments). off: no checksum is verified. inspect reads checksums the same way.

A capture of more than 50,000 frames is judged in pieces, each connection whole in one
piece (the frames so far of a connection open at a cut are carried into the next), so
tshark's memory stays bounded; the report is the one of the whole file, printed at the
end. Captures that cannot be cut safely (not all TCP on Ethernet, one endless connection,
...) are judged in one tshark run.

--stacks (or --profile IP=STACK, which overrides the fingerprint of that address) also
lists the stack each side of each connection is judged as, as inspect judges it.

A capture damaged part-way (cut in the middle of a frame) is judged up to the damage,
as inspect, diagram and replay read it; the report says where it stopped.

exit codes: 0 tshark found no problem, 1 it found some, 2 no tshark or unreadable file
"""

IP_CHECKSUM = ("-o", "ip.check_checksum:TRUE")
TCP_CHECKSUM = ("-o", "tcp.check_checksum:TRUE")
CHECKSUM_OPTIONS = IP_CHECKSUM + TCP_CHECKSUM
MODE_OPTIONS = {Mode.STRICT: CHECKSUM_OPTIONS, Mode.OFFLOAD: IP_CHECKSUM, Mode.OFF: ()}
"""tshark's options for each ``--checksums`` reading."""


class _ChecksumsAction(argparse.Action):
    """``--checksums [MODE]``: a bare ``--checksums`` is strict, also when the capture
    follows it (``judge --checksums FILE``: the word after it that is no mode is the
    capture, kept for :func:`run`)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        modes = [m.value for m in Mode]
        if isinstance(values, str) and values not in modes:
            namespace.capture_after_checksums = values
            values = self.const
        setattr(namespace, self.dest, values)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mpa-emu judge``."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("capture", nargs="?",
                        help="pcap or pcapng file (- reads standard input)")
    parser.add_argument("--no-rpcrdma", action="store_true",
                        help="stop the RPC-over-RDMA heuristic from claiming short Sends")
    parser.add_argument("--checksums", action=_ChecksumsAction, default="offload",
                        nargs="?", const="strict", metavar="{strict,offload,off}",
                        help="strict (alone: --checksums): tshark verifies IP and TCP "
                             "checksums, every bad one a problem; offload (default): TX "
                             "offload artefacts are notes; off: nothing verified")
    parser.add_argument("--tshark", metavar="PATH", help="the tshark binary to use")
    parser.add_argument("--json", action="store_true", help="print the verdicts as JSON")
    parser.add_argument("--stacks", action="store_true",
                        help="also list the stack each side of each connection is judged "
                             "as (implied by --profile)")
    add_profile_argument(parser)


def judge_capture(judge: Tshark, capture: str, mode: Mode = Mode.STRICT) -> dict[str, Any]:
    """Every verdict on ``capture`` as plain data (the JSON form of the report).

    ``judge`` must run with :data:`MODE_OPTIONS` of ``mode``; with ``offload`` the TCP
    checksums are judged by a second tshark pass and sorted here. A long capture is
    judged in pieces (:mod:`mpa_emu.capture.tshark_pieces`) with the same verdicts."""
    with tempfile.TemporaryFile("w+", encoding="utf-8") as spool:
        verdicts = _judge_pieces(judge, capture, mode, spool, keep_crcs=True)
        spool.seek(0)
        frames = [line.rstrip("\n") for line in spool]
    return {
        "capture": capture,
        "tshark": judge.version(),
        "checksums": verdicts.checksums,
        "frames": frames,
        "crc": [{"frame": v.frame, "status": v.status, "text": v.text}
                for v in verdicts.crcs],
        "expert": _iwarp_experts(verdicts.experts.table()),
        "problems": verdicts.problems(),
        "not_counted": verdicts.not_counted(),
        "known_limitations": known_limitations(judge.version(), verdicts.experts.table()),
    }


def write_verdicts(judge: Tshark, capture: str, mode: Mode, out: TextIO,
                   name: str | None = None, cut: str | None = None) -> bool:
    """:func:`format_verdicts` of :func:`judge_capture`, in memory that does not grow
    with the capture: the capture is judged in pieces, the MPA/DDP summary lines wait
    in a temporary file until the checksum reading of the whole capture heads the
    report, and of the CRC verdicts only the counts and the bad ones are kept. ``name``
    is the capture's name in the header, ``cut`` where a damaged capture stopped. True
    when tshark found a problem."""
    with tempfile.TemporaryFile("w+", encoding="utf-8") as spool:
        verdicts = _judge_pieces(judge, capture, mode, spool, keep_crcs=False)
        out.write("\n".join(_head_lines(name or capture, judge.version(),
                                        verdicts.checksums, cut)) + "\n")
        out.write("\nMPA/DDP frames:\n")
        spool.seek(0)
        any_frame = False
        for line in spool:
            out.write(f"  {line}")
            any_frame = True
    if not any_frame:
        out.write("  (none)\n")
    problems = verdicts.problems()
    lines = _crc_lines(verdicts.crc_counts, [{"frame": v.frame, "text": v.text}
                                             for v in verdicts.bad_crcs])
    table = verdicts.experts.table()
    lines += _tail_lines(_iwarp_experts(table), problems, verdicts.not_counted(),
                         known_limitations(judge.version(), table))
    out.write("\n".join(lines) + "\n")
    return bool(problems)


def _iwarp_experts(table: list[ExpertInfo]) -> list[dict[str, Any]]:
    return [{"severity": e.severity, "group": e.group, "protocol": e.protocol,
             "summary": e.summary, "count": e.count}
            for e in table if e.protocol.startswith("IWARP")]


class _ExpertTotals:
    """The ``-z expert`` tables of the pieces added up as tshark adds up one table:
    an entry per severity, protocol and summary (its group the first one seen), in the
    order entries first appear, each severity's entries together."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str, str], list[Any]] = {}

    def add(self, table: list[ExpertInfo], carried: list[ExpertInfo]) -> None:
        """Add a piece's table less the table of its carried frames alone: the carried
        frames were counted in earlier pieces, so every entry they raise is known."""
        minus = {(e.severity, e.protocol, e.summary): e.count for e in carried}
        if any(key not in self.rows for key in minus):
            raise Unsplittable("carried frames raise an expert info not seen before")
        for e in table:
            key = (e.severity, e.protocol, e.summary)
            count = e.count - minus.pop(key, 0)
            if count < 0:
                raise Unsplittable("carried frames count more than their piece")
            if key in self.rows:
                self.rows[key][1] += count
            elif count:
                self.rows[key] = [e.group, count]
        if minus:
            raise Unsplittable("carried frames raise an expert info their piece lacks")

    def table(self) -> list[ExpertInfo]:
        """The added-up table, as :meth:`Tshark.expert` reads one."""
        rows = [ExpertInfo(severity=sev, group=group, protocol=proto, summary=summary,
                           count=count)
                for (sev, proto, summary), (group, count) in self.rows.items()]
        return sorted(rows, key=lambda e: -SEVERITY_RANK.get(e.severity, -1))


class _Verdicts:
    """What the passes over the pieces found, in the capture's frame numbers."""

    def __init__(self, mode: Mode, keep_crcs: bool) -> None:
        self.mode = mode
        self.keep_crcs = keep_crcs
        self.artefacts: dict[str, list[int]] = {}
        self.bad_checksums: list[int] = []
        self.crc_counts = {"good": 0, "bad": 0, "unchecked": 0}
        self.crcs: list[CrcVerdict] = []
        self.bad_crcs: list[CrcVerdict] = []
        self.experts = _ExpertTotals()
        self.tree_problems: list[str] = []
        self.tree_others: list[str] = []
        self.version_problems: list[str] = []

    @property
    def checksums(self) -> dict[str, Any]:
        """The report's ``checksums`` entry."""
        checksums: dict[str, Any] = {"mode": str(self.mode)}
        if self.mode is Mode.OFFLOAD:
            checksums["offload"] = self.artefacts
            checksums["bad"] = self.bad_checksums
        return checksums

    def problems(self) -> list[str]:
        """Error-level expert infos (table, then tree) and malformed frames of the
        iWARP/TCP/IP dissectors, bad CRCs and bad TCP checksums, one line each."""
        out = [f"expert {e.severity}/{e.group} {e.protocol}: {e.summary} (x{e.count})"
               for e in self.experts.table()
               if e.severity == "Error" and counted_protocol(e.protocol)]
        out += self.tree_problems
        out += self.version_problems
        out += [f"frame {v.frame}: {v.text}" for v in self.bad_crcs]
        out += [f"frame {n}: bad TCP checksum (not a TX offload partial sum)"
                for n in self.bad_checksums]
        return out

    def not_counted(self) -> list[str]:
        """Error-level expert infos and malformed frames of the dissectors above iWARP
        (:func:`~mpa_emu.capture.tshark.counted_protocol`): listed, not problems."""
        out = [f"expert {e.severity}/{e.group} {e.protocol}: {e.summary} (x{e.count})"
               for e in self.experts.table()
               if e.severity == "Error" and not counted_protocol(e.protocol)]
        return out + self.tree_others


REV_NOT_ONE = "Rev field is NOT set to one as required by RFC 5044"
RES_NOT_ZERO = "Res field is NOT set to zero as required by RFC 5044"


def known_limitations(version: str, table: list[ExpertInfo]) -> list[str]:
    """What tshark says only because it predates RFC 6581 (Wireshark 4.6 decodes the
    enhanced block): the Rev and Res warnings on MPA v2 requests."""
    old = not _at_least(version, (4, 6))
    out = []
    for e in table:
        if old and e.protocol.startswith("IWARP") and e.summary in (REV_NOT_ONE,
                                                                     RES_NOT_ZERO):
            out.append(f"{e.severity}/{e.group}: {e.summary} (x{e.count}): expected for MPA "
                       "rev 2 (RFC 6581) from a tshark before 4.6, which checks RFC 5044 "
                       "only; not a problem")
    return out


def _at_least(version: str, wanted: tuple[int, int]) -> bool:
    """``TShark (Wireshark) 4.0.17 (...)`` at least ``wanted`` (major, minor)."""
    for word in version.split():
        parts = word.split(".")
        if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
            return (int(parts[0]), int(parts[1])) >= wanted
    return False


def _judge_pieces(judge: Tshark, capture: str, mode: Mode, spool: TextIO,
                  keep_crcs: bool) -> _Verdicts:
    """Run every pass of tshark on each piece of ``capture``; the summary lines go to
    ``spool``. Should the capture prove unsafe to cut once pieces were judged, or tshark
    fail on a piece, everything is judged again on the whole capture, as one run."""
    verdicts = _Verdicts(mode, keep_crcs)
    try:
        for piece in cut_capture(capture):
            if piece.whole:
                break
            try:
                _passes(judge, piece, verdicts, spool)
            finally:
                piece.remove()
        else:
            return verdicts
    except (Unsplittable, TsharkError):
        pass  # judged whole below
    spool.seek(0)
    spool.truncate()
    verdicts = _Verdicts(mode, keep_crcs)
    _passes(judge, Piece(capture, whole=True), verdicts, spool)
    return verdicts


def _passes(judge: Tshark, piece: Piece, verdicts: _Verdicts, spool: TextIO) -> None:
    """tshark's runs over one piece, as few as the facts need: the TCP checksums (offload
    mode only, with tshark's checksum check on), the summary lines, the expert table (of
    the piece, and of the prefix it carries), and one PDML pass for the CRCs, the tree's
    Error and Malformed infos and the DDP/RDMAP versions (:meth:`Tshark.judge_stream`)."""
    if verdicts.mode is Mode.OFFLOAD:
        for number, sender, artefact in _offload_pass(judge, piece):
            if artefact:
                verdicts.artefacts.setdefault(sender, []).append(number)
            else:
                verdicts.bad_checksums.append(number)
    for line in judge.summary_lines(piece.path, "iwarp_mpa || iwarp_ddp_rdmap"):
        shown = piece.summary_line(line)
        if shown is not None:
            spool.write(shown + "\n")
    carried = judge.expert(piece.prefix_path) if piece.prefix_path else []
    verdicts.experts.add(judge.expert(piece.path), carried)
    for found in judge.judge_stream(piece.path):
        at = piece.number(found.frame)
        if at is None:
            continue
        if isinstance(found, CrcVerdict):
            v = dataclasses.replace(found, frame=at)
            verdicts.crc_counts[v.status] = verdicts.crc_counts.get(v.status, 0) + 1
            if verdicts.keep_crcs:
                verdicts.crcs.append(v)
            if v.status == "bad":
                verdicts.bad_crcs.append(v)
        elif isinstance(found, TreeExpert):
            line = f"frame {at}: {found.severity}/{found.group}: {found.message}"
            if counted_protocol(found.protocol):
                verdicts.tree_problems.append(line)
            else:
                verdicts.tree_others.append(f"{line} ({found.protocol})")
        else:
            verdicts.version_problems.append(f"frame {at}: {_version_words(found)}")


def _version_words(found: VersionFields) -> str:
    """What a frame's DDP and RDMAP versions other than 1 are (RFC 5041 section 4.2,
    RFC 5040 section 4.2: both are 1; tshark itself raises no expert info for them)."""
    words = [f"DDP version {v} (RFC 5041 section 4.2: 1)" for v in found.ddp if v and v != "1"]
    words += [f"RDMAP version {v} (RFC 5040 section 4.2: 1)"
              for v in found.rdmap if v and v != "1"]
    return ", ".join(words)


def _offload_pass(judge: Tshark, piece: Piece) -> Iterator[tuple[int, str, bool]]:
    """tshark's TCP checksum status per frame; of the bad ones, those whose field holds
    the pseudo-header partial sum or zero (:func:`mpa_emu.capture.checksums.tcp_verdict`)
    are offload artefacts. Yields (capture frame number, sender, artefact) in order."""
    lines = judge.run_lines(piece.path, *TCP_CHECKSUM, "-Y", "tcp.checksum.status == 0",
                            "-T", "fields", "-E", "separator=|", "-e", "frame.number", "-e",
                            "ip.src", "-e", "ipv6.src")
    flagged: dict[int, str] = {}
    for line in lines:
        if line.strip():
            number_text, ip4, ip6 = [*line.rstrip("\n").split("|"), "", ""][:3]
            if piece.number(int(number_text)) is not None:
                flagged[int(number_text)] = ip4 or ip6 or "?"
    if not flagged:
        return
    offload = _offload_frames(piece.path, flagged)
    for local, sender in flagged.items():
        number = piece.number(local)
        assert number is not None
        yield number, sender, local in offload


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
    lines = _head_lines(report["capture"], report["tshark"], checks, report.get("cut"))
    lines += ["", "MPA/DDP frames:"]
    lines += [f"  {line}" for line in report["frames"]] or ["  (none)"]
    counts = {s: sum(1 for v in report["crc"] if v["status"] == s)
              for s in ("good", "bad", "unchecked")}
    lines += _crc_lines(counts, [v for v in report["crc"] if v["status"] == "bad"])
    lines += _tail_lines(report["expert"], report["problems"], report.get("not_counted", []),
                         report.get("known_limitations", []))
    return "\n".join(lines) + "\n"


def _head_lines(capture: str, tshark: str, checks: dict[str, Any],
                cut: str | None = None) -> list[str]:
    lines = [f"{capture}: {tshark}"] + ([f"note: {cut}"] if cut else [])
    lines.append(CHECKSUM_TEXT.get(checks["mode"], checks["mode"]))
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


def _tail_lines(expert: list[dict[str, Any]], problems: list[str],
                not_counted: Sequence[str] = (), known: Sequence[str] = ()) -> list[str]:
    lines = ["", "MPA expert infos:"]
    lines += [f"  {e['severity']}/{e['group']}: {e['summary']} (x{e['count']})"
              for e in expert] or ["  (none)"]
    if known:
        lines += ["", "known limitations of this tshark:"]
        lines += [f"  {k}" for k in known]
    if not_counted:
        lines += ["", "errors of dissectors above iWARP (not counted):"]
        lines += [f"  {n}" for n in not_counted]
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
    late = getattr(args, "capture_after_checksums", None)
    if late is not None and args.capture is not None:
        raise CliError(f"argument --checksums: invalid choice: {late!r} (choose from "
                       "strict, offload, off)")
    if late is not None:
        args.capture = late
    if args.capture is None:
        raise CliError("the following arguments are required: capture")
    if args.capture != "-":
        return _judge(args, args.capture)
    with tempfile.NamedTemporaryFile(prefix="mpa-emu-judge-", suffix=".pcap") as copy:
        shutil.copyfileobj(sys.stdin.buffer, copy)
        copy.flush()
        return _judge(args, copy.name, shown="-")


def _judge(args: argparse.Namespace, path: str, shown: str | None = None) -> int:
    _check_capture(path, shown or path)
    profiles = profiles_of(args)
    stacks: list[str] | None = None
    if args.stacks or profiles:
        from mpa_emu.views.inspection import InspectError as ReadError
        from mpa_emu.views.inspection.capture_stacks import stack_lines

        try:
            stacks = stack_lines(path, profiles)
        except ReadError as exc:
            raise CliError(str(exc).replace(path, shown or path)) from None
    try:
        return _verdict(args, path, shown or path, stacks=stacks)
    except TsharkError as exc:
        error = CliError(str(exc).replace(path, shown or path))
    # tshark refuses a capture damaged part-way (an interrupted tcpdump, a full disk);
    # inspect, diagram and replay read up to the damage, and so does judge.
    with tempfile.NamedTemporaryFile(prefix="mpa-emu-judge-", suffix=".pcapng") as copy:
        cut = intact_copy(path, copy)
        if cut is None:
            raise error from None
        copy.flush()
        try:
            return _verdict(args, copy.name, shown or path, cut, stacks=stacks)
        except TsharkError as exc:
            raise CliError(str(exc).replace(copy.name, shown or path)) from None


def intact_copy(path: str, copy: IO[bytes]) -> str | None:
    """Write the frames of ``path`` up to its first damage into ``copy`` (pcapng) and say
    where the capture stopped; None (and ``copy`` to be discarded) when it reads to its
    end or not even its first frame is whole."""
    writer = PcapngWriter(copy, application="mpa-emu judge")
    number = 0
    try:
        for record in read_capture(path):
            number += 1
            writer.write_record(record)
    except CaptureError as fault:
        if not number:
            return None  # not even one frame: unreadable, as for inspect
        writer.flush()
        return f"capture ends after frame {number}: {fault}; judged up to there"
    return None


def _verdict(args: argparse.Namespace, path: str, name: str, cut: str | None = None, *,
             stacks: list[str] | None = None) -> int:
    mode = Mode(args.checksums)
    judge = Tshark(args.tshark, disable_rpcrdma=args.no_rpcrdma,
                   extra_options=MODE_OPTIONS[mode])
    if not args.json:
        failed = write_verdicts(judge, path, mode, sys.stdout, name, cut)
        if stacks is not None:
            sys.stdout.write("\nstacks:\n" + "".join(f"  {s}\n" for s in stacks))
        return 1 if failed else 0
    report = judge_capture(judge, path, mode)
    report["capture"] = name
    report["cut"] = cut
    if stacks is not None:
        report["stacks"] = stacks
    sys.stdout.write(json.dumps(report, indent=2) + "\n")
    return 1 if report["problems"] else 0
