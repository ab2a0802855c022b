"""``mpa-emu demo``: two emulated irdma hosts run the stories of :mod:`mpa_emu.demo.stories` (a
connection accepted with MPA v2 IRD/ORD negotiation, one rejected with private data, one
closed, and any story added there), write a pcapng for Wireshark, and print a ladder of
every frame with the state transitions and upcalls, then a summary."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import IO

from mpa_emu.cli import CliError
from mpa_emu.cli.values import seed

HELP = ("run two emulated irdma hosts through the demo stories (accept, reject, close, ...), "
        "print their ladder and write demo.pcapng")

TSHARK_HINT = ("tshark -r {path} -o tcp.try_heuristic_first:TRUE "
               "--enable-heuristic iwarp_mpa_tcp")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``mpa-emu demo``."""
    parser.add_argument("-o", "--output", default="demo.pcapng", metavar="FILE",
                        help="pcapng file to write (default: demo.pcapng)")
    parser.add_argument("--seed", type=seed, default=0, metavar="N",
                        help="seed for ISNs and anything random (default: 0)")
    parser.add_argument("--trace", metavar="FILE.jsonl",
                        help="also write the JSON Lines trace of the cores and the wire")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="print only the summary, not the ladders")
    parser.add_argument("--logs", action="store_true",
                        help="add to the ladders what the drivers write to the kernel log "
                             "(klog lines; '(dyndbg)' marks those only dynamic debug shows)")


def _open(path: str, mode: str) -> IO[str]:
    try:
        return open(path, mode, encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror}") from None


def run(args: argparse.Namespace) -> int:
    """Run the demo stories and write the capture."""
    from mpa_emu.demo.stories import run_demo

    output = Path(args.output)
    if output.is_dir():
        raise CliError(f"{output} is a directory; give a file name")
    with contextlib.ExitStack() as stack:
        trace = stack.enter_context(_open(args.trace, "w")) if args.trace else None
        result = run_demo(args.seed, trace_stream=trace, logs=args.logs)
        try:
            count = result.net.write_pcapng(output)
        except OSError as exc:
            raise CliError(f"cannot write {output}: {exc.strerror}") from None
    out = sys.stdout
    if not args.quiet:
        for title, text in result.ladders:
            out.write(f"== {title}\n{text}\n")
    out.write("Summary\n")
    for line in result.summary:
        out.write(f"{line}\n")
    out.write(f"\nwrote {output} ({count} frames, seed {args.seed})"
              + (f" and {args.trace}" if args.trace else "") + "\n")
    out.write(f"decode it with: {TSHARK_HINT.format(path=output)}\n")
    if result.failures:
        print(f"mpa-emu demo: {len(result.failures)} stor"
              f"{'y' if len(result.failures) == 1 else 'ies'} did not run through: "
              f"{', '.join(result.failures)}", file=sys.stderr)
        return 1
    return 0
