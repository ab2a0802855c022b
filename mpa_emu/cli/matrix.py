"""``mpa-emu matrix``: every ordered pair of stacks through the scenario catalogue."""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from typing import IO, TYPE_CHECKING

from mpa_emu.cli import CliError
from mpa_emu.cli.campaign_options import add_campaign_arguments
from mpa_emu.cli.values import seed

if TYPE_CHECKING:
    from mpa_emu.matrix.output import GridEntry

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
    from mpa_emu.matrix.output import (
        LEGEND,
        GridEntry,
        JsonWriter,
        details,
        page_head,
        page_tail,
    )

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
    # Cells come a scenario at a time (the plan's order): each scenario's grid is printed
    # and written as soon as its cells are in, so memory holds one scenario's cells.
    block = len(sides) ** 2
    entries: list[GridEntry] = []
    pieces: list[str] = []
    errors: list[str] = []
    count = 0
    with contextlib.ExitStack() as stack:
        json_out = JsonWriter(_open(stack, args.json)) if args.json else None
        html_out = _open(stack, args.html) if args.html else None
        if html_out is not None:
            page_head(html_out)
        try:
            for cell in iter_matrix(specs, jobs=args.jobs, scheduler=args.scheduler,
                                    progress=Progress(len(specs), "cells")):
                count += 1
                entries.append(GridEntry.of(cell))
                if cell.status == "error":
                    errors.append(f"error: {cell.scenario} {cell.initiator} -> "
                                  f"{cell.responder}: {cell.reason}")
                if json_out is not None:
                    json_out.add(cell)
                if html_out is not None:
                    pieces.append(details(cell))
                if len(entries) == block:
                    _flush(entries, pieces, html_out)
        except ExecutorError as exc:
            raise CliError(str(exc)) from None
        _flush(entries, pieces, html_out)
        elapsed = time.perf_counter() - started
        rate = count / elapsed if elapsed > 0 else 0.0
        if json_out is not None:
            json_out.close(rate)
        if html_out is not None:
            page_tail(html_out)
    print(LEGEND)
    print(f"{count} cells in {elapsed:.1f} s ({rate:.1f} cells per second)")
    for line in errors:
        print(line)
    return 1 if errors else 0


def _flush(entries: list[GridEntry], pieces: list[str], html_out: IO[str] | None) -> None:
    """Print and write one scenario's grid, and forget its cells."""
    from mpa_emu.matrix.output import table_of, write_section

    if not entries:
        return
    sys.stdout.write(table_of(entries, legend=False))
    if html_out is not None:
        write_section(html_out, entries, pieces)
    entries.clear()
    pieces.clear()


def _open(stack: contextlib.ExitStack, path: str) -> IO[str]:
    try:
        return stack.enter_context(open(path, "w", encoding="utf-8"))
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror or exc}") from None
