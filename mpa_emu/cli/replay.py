"""``mpa-emu replay CAPTURE --emulate IP``: does irdma's CM behave like this capture?

Exit 0 when every frame of IP matches, 1 on divergence, 2 on bad input.
"""

from __future__ import annotations

import argparse
import os
import sys

from mpa_emu.capture.checksums import Mode
from mpa_emu.capture.pcap import capture_error
from mpa_emu.cli import CliError
from mpa_emu.cli.campaign_options import add_campaign_arguments
from mpa_emu.cli.html_option import add_html_option
from mpa_emu.cli.values import check_range, seed
from mpa_emu.cli.wrote import wrote
from mpa_emu.ranges import FRONT_VERB_RANGES
from mpa_emu.replay import RecordingError
from mpa_emu.replay.job import OutputError, ReplayJob, run_job, write_outputs
from mpa_emu.replay.stacks import parse_profile
from mpa_emu.stacks import DEFAULT_STACK, STACKS
from mpa_emu.wire.addr import ip_bytes

MAX_SECONDS = 1e9
"""Upper bound of the time options (about 31 years of virtual time)."""

HELP = "replay a recorded capture against the CM state machine and report divergences"


EPILOG = """\
Frames sent by the --emulate host are compared with what the CM state machine sends when
fed every other frame of the capture at its recorded time; the report names the first
divergence, the fields that differ, the CM state and what became of the last frame
injected into that flow. Fixtures with their expected verdicts: pcaps/README.md.

--semantic compares outcomes per connection instead of bytes: MPA revision, flags
(M, C, R), the IRD/ORD block and RTR choice, private data, accept or reject, OFFLOADED
and ESTABLISHED, the upcalls, the NIC's events (MPA CRC error, Terminate) and who closed
first and how. Where the emulator's stream differs in length from the recording, the
peer's acknowledgements are re-based onto it (the report says so).

--checksums: offload (default) takes TX checksum offload artefacts (the capture was taken
on the sending host) as the good checksums the wire carried; strict drops them as the
NIC would; off never checks.

exit codes: 0 every frame of the emulated host matched (--semantic: every connection
had the same outcome; --profile auto: at least one profile did), 1 a divergence,
2 unreadable capture, bad option or unwritable output, 130 interrupted
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``mpa-emu replay`` (the names and meanings are a contract)."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("capture", metavar="CAPTURE", nargs="?",
                        help="pcap or pcapng, Ethernet with or without 802.1Q")
    parser.add_argument("--emulate", metavar="IP",
                        help="the host (IPv4 or IPv6) played by the emulator")
    parser.add_argument("--on-request", choices=("auto", "accept", "reject"), default="auto",
                        help="answer to MPA requests: as recorded (auto), or always accept "
                             "or reject")
    parser.add_argument("--backlog", type=int, default=4096, metavar="N",
                        help="backlog of the listeners (default 4096)")
    parser.add_argument("--time-tolerance", type=float, default=0.01, metavar="SECONDS",
                        help="allowed time difference per frame (default 0.01)")
    parser.add_argument("-o", "--output", metavar="OUT.pcapng",
                        help="write the merged conversation with per-frame comments")
    parser.add_argument("--json", metavar="REPORT.json", help="write every divergence as JSON")
    parser.add_argument("--strict-offload", action="store_true",
                        help="fail on NIC frames after OFFLOADED instead of warning")
    parser.add_argument("--semantic", action="store_true",
                        help="compare meaning (flags, MPA kind), not bytes; report what "
                             "happened to every injected frame")
    parser.add_argument("--horizon", type=float, default=400.0, metavar="SECONDS",
                        help="run timers this long after the capture's end (default 400)")
    parser.add_argument("--seed", type=seed, default=0, metavar="N",
                        help="seed of the emulated host (default 0)")
    parser.add_argument("--checksums", choices=[m.value for m in Mode],
                        default=Mode.OFFLOAD.value,
                        help="TCP checksums of injected frames: offload (default: TX "
                             "offload artefacts count as good), strict (the NIC's view), "
                             "off (never checked)")
    parser.add_argument("--profile", default=DEFAULT_STACK, metavar="STACK",
                        help=f"the emulated side's stack: {DEFAULT_STACK} (default), "
                             f"{', '.join(s for s in STACKS if s != DEFAULT_STACK)}, or "
                             "one with parameters (siw(peer_to_peer=1), cxgb4(mpa_rev=1)); "
                             "mpa-v1 = siw(mpa_version=1); ADDRESS=STACK,... names each "
                             "side; auto (with --semantic) tries each stack and names the "
                             "one that explains the recording")
    parser.add_argument("--mpa-rev", type=int, choices=(1, 2), default=None,
                        help="MPA revision the emulated node starts at (default: the "
                             "profile's)")
    add_html_option(parser)
    parser.add_argument("--suite", metavar="SUITE.toml",
                        help="run a conformance suite (cases with expected verdicts, see "
                             "docs/campaigns.md); --json then writes the suite's results")
    add_campaign_arguments(parser)


class _Progress:
    """A one-line progress bar on stderr, only when stderr is a terminal."""

    def __init__(self) -> None:
        self.shown = False

    def __call__(self, done: int, total: int) -> None:
        if total < 20_000:
            return
        width = 30
        filled = width * done // max(total, 1)
        sys.stderr.write(f"\rreplay [{'#' * filled}{'.' * (width - filled)}] "
                         f"{done}/{total} frames")
        sys.stderr.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\n")


def job_from(args: argparse.Namespace) -> ReplayJob:
    """The replay the arguments ask for (CliError for a bad combination or value)."""
    if args.junit or args.jobs > 1 or args.scheduler is not None:
        raise CliError("-j, --scheduler and --junit go with --suite SUITE.toml")
    if args.capture is None or args.emulate is None:
        raise CliError("the following arguments are required: "
                       + ("CAPTURE, " if args.capture is None else "")
                       + "--emulate (or --suite SUITE.toml)")
    try:
        ip = ip_bytes(args.emulate)
    except ValueError as exc:
        raise CliError(f"--emulate: {exc}") from None
    check_range("--backlog", args.backlog, FRONT_VERB_RANGES["backlog"])
    for option, seconds in (("--time-tolerance", args.time_tolerance),
                            ("--horizon", args.horizon)):
        # NaN fails both comparisons; the bound keeps nanoseconds a finite integer.
        if not 0 <= seconds <= MAX_SECONDS:
            raise CliError(f"{option} must be 0..{MAX_SECONDS:g} seconds, got {seconds:g}")
    try:  # checked here for a one-line error; the job parses it again where it runs
        spec = parse_profile(args.profile, args.mpa_rev)
    except ValueError as exc:
        raise CliError(f"--profile: {exc}") from None
    if spec.auto and not args.semantic:
        raise CliError("--profile auto needs --semantic (it compares outcomes)")
    return ReplayJob(
        args.capture, ip, on_request=args.on_request, backlog=args.backlog,
        time_tolerance_ns=round(args.time_tolerance * 1e9),
        strict_offload=args.strict_offload, semantic=args.semantic,
        horizon_ns=round(args.horizon * 1e9), seed=args.seed, checksums=args.checksums,
        profile=args.profile, mpa_rev=args.mpa_rev, json=args.json, output=args.output,
        html=args.html)


def run(args: argparse.Namespace) -> int:
    """Replay, print the verdict (and the first divergence), write the outputs."""
    if args.suite is not None:
        from mpa_emu.cli.suite import run_suite

        return run_suite(args, job_from)
    job = job_from(args)
    progress = _Progress() if sys.stderr.isatty() else None
    try:
        # Only the outputs the job writes read the result again (the JSON report lists
        # every verb and upcall).
        result = run_job(job, progress, journal=False)
    except RecordingError as exc:
        raise CliError(capture_error(job.capture, str(exc))) from None
    finally:
        if progress is not None:
            progress.close()
    try:
        print(result.text(), flush=True)
    except BrokenPipeError:
        # The reader went away (| head): keep the exit code, drop the rest quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    try:
        write_outputs(job, result)
    except OutputError as exc:
        raise CliError(str(exc)) from None
    if job.output:
        wrote(job.output, "merged conversation")
    if job.html is not None:
        wrote(job.html, "HTML report")
    return result.exit_code
