"""``mpa-emu matrix``: every ordered pair of stacks through the scenario catalogue."""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from typing import IO

from mpa_emu.cli import CliError
from mpa_emu.cli.campaign_options import add_campaign_arguments
from mpa_emu.cli.values import seed

HELP = ("run every ordered pair of iWARP stacks (irdma, siw, cxgb4) through a catalogue "
        "of scenarios and show what each application received")

EPILOG = """\
A side is a stack with its defaults (siw) or with parameters, written as the kernel
names them: --side 'siw(peer_to_peer=1)'. Without --side every stack is tried with its
defaults and its named parameter sets (docs/matrix.md). Each cell writes its capture
under --captures.

exit codes: 0 every cell ran (whatever the connection's outcome), 1 a cell failed to run
(an emulator error), 2 bad option, 130 interrupted
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``mpa-emu matrix``."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("--side", action="append", metavar="STACK[(K=V,...)]",
                        help="a side to include (repeat; default: every stack with its "
                             "defaults and named parameter sets)")
    parser.add_argument("--stacks", metavar="A,B,...",
                        help="only these stacks, each with its defaults and named sets")
    parser.add_argument("--scenario", action="append", metavar="NAME",
                        help="only this scenario (repeat; default: all; see --list)")
    parser.add_argument("--list", action="store_true",
                        help="list the scenarios and the default sides, and exit")
    parser.add_argument("--seed", type=seed, default=0, metavar="S",
                        help="seed of every cell (default 0)")
    parser.add_argument("--captures", default="matrix-captures", metavar="DIR",
                        help="folder for each cell's pcapng (default matrix-captures)")
    parser.add_argument("--json", metavar="FILE", help="write the cells as JSON")
    parser.add_argument("--html", metavar="FILE",
                        help="write an HTML page: the tables, each cell opening its ladder")
    add_campaign_arguments(parser, junit=False)


def run(args: argparse.Namespace) -> int:
    """Run the matrix, print its tables, write what was asked for."""
    from mpa_emu.campaign.cases import Progress
    from mpa_emu.campaign.executor import ExecutorError
    from mpa_emu.matrix import default_sides, iter_matrix, parse_side, plan, select
    from mpa_emu.matrix.output import GridEntry, JsonWriter, details, table_of, write_page

    try:
        scenarios = select(args.scenario)
        if args.side:
            sides = [parse_side(text) for text in args.side]
        else:
            stacks = [s.strip() for s in args.stacks.split(",")] if args.stacks else None
            sides = default_sides(stacks)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if args.list:
        for scenario in scenarios:
            print(f"{scenario.name:22} {scenario.doc}")
        print("sides: " + ", ".join(side.label for side in sides))
        return 0
    specs = plan(sides, scenarios, seed=args.seed, captures=args.captures)
    where = (f"scheduler {args.scheduler}" if args.scheduler
             else f"{args.jobs} process{'es' if args.jobs > 1 else ''}")
    print(f"matrix: {len(sides)} sides, {len(scenarios)} scenarios, {len(specs)} cells "
          f"on {where}", file=sys.stderr)
    started = time.perf_counter()
    entries: list[GridEntry] = []
    errors: list[str] = []
    with contextlib.ExitStack() as stack:
        json_out = JsonWriter(_open(stack, args.json)) if args.json else None
        html_out = _open(stack, args.html) if args.html else None
        # The page's details come after its grids: they wait in a spool file, a cell
        # at a time, so memory holds one grid entry per cell and nothing more.
        spool = stack.enter_context(tempfile.TemporaryFile("w+", encoding="utf-8")) \
            if args.html else None
        try:
            for cell in iter_matrix(specs, jobs=args.jobs, scheduler=args.scheduler,
                                    progress=Progress(len(specs), "cells")):
                entries.append(GridEntry.of(cell))
                if cell.status == "error":
                    errors.append(f"error: {cell.scenario} {cell.initiator} -> "
                                  f"{cell.responder}: {cell.reason}")
                if json_out is not None:
                    json_out.add(cell)
                if spool is not None:
                    # one line per cell: a newline of the ladder as its character reference
                    spool.write(details(cell).replace("\n", "&#10;") + "\n")
        except ExecutorError as exc:
            raise CliError(str(exc)) from None
        elapsed = time.perf_counter() - started
        rate = len(entries) / elapsed if elapsed > 0 else 0.0
        if json_out is not None:
            json_out.close(rate)
        if spool is not None and html_out is not None:
            spool.seek(0)
            write_page(html_out, entries, (line.rstrip("\n") for line in spool))
    sys.stdout.write(table_of(entries))
    print(f"{len(entries)} cells in {elapsed:.1f} s ({rate:.1f} cells per second)")
    for line in errors:
        print(line)
    return 1 if errors else 0


def _open(stack: contextlib.ExitStack, path: str) -> IO[str]:
    try:
        return stack.enter_context(open(path, "w", encoding="utf-8"))
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror or exc}") from None
