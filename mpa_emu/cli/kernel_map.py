"""``mpa-emu kernel-map``: every cm.c function and what models it."""

from __future__ import annotations

import argparse
import json
import sys

from mpa_emu.cli import CliError
from mpa_emu.stacks.irdma.kernel_map import (
    ENTRIES,
    KERNEL_VERSION,
    MODELLED,
    NOT_YET,
    PLUMBING,
    KernelEntry,
    entry,
    format_table,
)

HELP = "print the map from every irdma cm.c function to what models it in mpa_emu"

EPILOG = f"""\
The map follows cm.c of mainline Linux {KERNEL_VERSION}.
Columns: number in the reference's function table, cm.c function, kind (E emulated,
P plumbing, H hybrid), the mpa_emu objects modelling it, and a note.

exit codes: 0 printed, 2 unknown function or usage
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mpa-emu kernel-map``."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("function", nargs="?",
                        help="show one function (with or without the irdma_ prefix)")
    parser.add_argument("--status", choices=[MODELLED, PLUMBING, "not-yet"],
                        help="only entries with this status")
    parser.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    """Print the map (or one entry)."""
    if args.function:
        try:
            entries: tuple[KernelEntry, ...] = (entry(args.function),)
        except KeyError as exc:
            raise CliError(str(exc.args[0])) from None
    else:
        wanted = NOT_YET if args.status == "not-yet" else args.status
        entries = tuple(e for e in ENTRIES if wanted is None or e.status == wanted)
    if args.json:
        rows = [{"number": e.number, "function": e.function, "kind": e.kind,
                 "status": e.status, "models": list(e.models), "note": e.note}
                for e in entries]
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
    else:
        # An empty selection still prints the header and its "0 functions" count.
        sys.stdout.write(format_table(entries))
    return 0
