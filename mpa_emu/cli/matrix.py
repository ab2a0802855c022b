"""``mpa-emu matrix``: every ordered pair of stacks through the scenario catalogue."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from typing import IO, TYPE_CHECKING

from mpa_emu.cli import CliError
from mpa_emu.cli.campaign_options import add_campaign_arguments
from mpa_emu.cli.values import seed
from mpa_emu.stacks import STACKS

if TYPE_CHECKING:
    from mpa_emu.matrix import Plan
    from mpa_emu.matrix.output import GridEntry

HELP = (f"run every ordered pair of iWARP stacks ({', '.join(STACKS)}) through a catalogue "
        "of scenarios and show what each application received")

EPILOG = """\
A side is a stack with its defaults (siw) or with parameters, written as the kernel
names them: --side 'siw(peer_to_peer=1)'. Without --side every stack is tried with its
defaults and its named parameter sets (docs/matrix.md). Each cell writes its capture
under --captures.

Each cell runs until both hosts go quiet, so every connection has its outcome by its
stacks' own timers (irdma's CM retransmissions give up after about 316 s), within an
hour of virtual time and 20,000 events. A cell stopped by either bound says so:
!bound (the event bound: the hosts never went quiet, with the kernel log line they
repeat) or !time (with when the next timer is due), and the command exits 3.

exit codes: 0 every cell ran to its outcome (whatever the outcome), 1 a cell failed to
run (an emulator error), 2 bad option or an output that cannot be written (checked
before any cell runs), 3 a cell stopped at a safety bound (and none failed),
130 interrupted
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
    from mpa_emu.matrix import default_sides, parse_side, plan, select

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
    with contextlib.ExitStack() as stack:
        # Every output is checked before any cell runs: one line and exit 2, not a
        # failure per cell.
        json_file = _open(stack, args.json, "--json") if args.json else None
        html_out = _open(stack, args.html, "--html") if args.html else None
        writable_folder(args.captures)
        return _run(args, specs, len(sides), len(scenarios), json_file, html_out)


def _run(args: argparse.Namespace, specs: Plan, n_sides: int, n_scenarios: int,
         json_file: IO[str] | None, html_out: IO[str] | None) -> int:
    from mpa_emu.campaign.cases import Progress
    from mpa_emu.campaign.executor import ExecutorError
    from mpa_emu.matrix import iter_matrix
    from mpa_emu.matrix.output import (
        LEGEND,
        STOPPED,
        GridEntry,
        JsonWriter,
        details,
        page_head,
        page_tail,
    )

    where = (f"scheduler {args.scheduler}" if args.scheduler
             else f"{args.jobs} process{'es' if args.jobs > 1 else ''}")
    print(f"matrix: {n_sides} sides, {n_scenarios} scenarios, {len(specs)} cells "
          f"on {where}", file=sys.stderr)
    started = time.perf_counter()
    # Cells come a scenario at a time (the plan's order): each scenario's grid is printed
    # and written as soon as its cells are in, so memory holds one scenario's cells.
    block = n_sides ** 2
    entries: list[GridEntry] = []
    pieces: list[str] = []
    errors: list[str] = []
    bounded: list[str] = []
    count = 0
    json_out = JsonWriter(json_file) if json_file is not None else None
    if html_out is not None:
        page_head(html_out)
    try:
        for cell in iter_matrix(specs, jobs=args.jobs, scheduler=args.scheduler,
                                progress=Progress(len(specs), "cells")):
            count += 1
            entries.append(GridEntry.of(cell))
            where_cell = f"{cell.scenario} {cell.initiator} -> {cell.responder}"
            if cell.status == "error":
                errors.append(f"error: {where_cell}: {cell.reason}")
            elif cell.status in STOPPED:
                bounded.append(f"{STOPPED[cell.status]}: {where_cell}: {cell.reason}")
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
    for line in bounded + errors:
        print(line)
    return 1 if errors else 3 if bounded else 0


def _flush(entries: list[GridEntry], pieces: list[str], html_out: IO[str] | None) -> None:
    """Print and write one scenario's grid (the connect scenario's with the "who talks
    to whom" summary above it), and forget its cells."""
    from mpa_emu.matrix.output import summary_of, summary_text, table_of, write_section

    if not entries:
        return
    # The connect scenario comes first in the catalogue: its summary tops the output.
    sys.stdout.write(summary_text(summary_of(entries)) + table_of(entries, legend=False))
    if html_out is not None:
        write_section(html_out, entries, pieces)
    entries.clear()
    pieces.clear()


def _open(stack: contextlib.ExitStack, path: str, option: str) -> IO[str]:
    try:
        return stack.enter_context(open(path, "w", encoding="utf-8"))
    except OSError as exc:
        raise CliError(f"{option} {path}: {exc.strerror or exc}") from None


def writable_folder(path: str) -> None:
    """Make the folder ``path`` (as the cells would) and write a file in it, or a
    :class:`CliError` naming the problem in one line."""
    probe = os.path.join(path, f".mpa-emu-write-check-{os.getpid()}")
    try:
        os.makedirs(path, exist_ok=True)
        with open(probe, "w", encoding="utf-8"):
            pass
        os.remove(probe)
    except OSError as exc:
        raise CliError(f"--captures {path}: cannot write there "
                       f"({exc.strerror or exc})") from None
