"""``mpa-emu kernel-map``: every function of a stack's kernel CM source and what models it."""

from __future__ import annotations

import argparse
import json
import sys

from mpa_emu.cli import CliError
from mpa_emu.stacks import DEFAULT_STACK, STACKS
from mpa_emu.stacks.base import MODELLED, NOT_YET, PLUMBING, KernelMap, MapEntry

HELP = "print the map from every function of a stack's kernel CM source to its model"

_SOURCES = "\n".join(f"  --stack {name}: "
                     + " and ".join(k.source for k in st.kernel_map.files)
                     + f", mainline Linux {st.kernel_map.kernel_version}."
                     for name, st in STACKS.items())

EPILOG = f"""\
Each map follows a stack's kernel source files at a pinned release (irdma is the
default; a stack of two files prints both tables, each under its file's name):
{_SOURCES}
Columns: number (irdma: in the reference's function table; others: in the file), the
function, kind (E emulated, P plumbing, H hybrid; the table's last line says), the
mpa_emu objects modelling it, and a note. The JSON names each row's stack, source and
kernel_version.

exit codes: 0 printed, 2 unknown function, unknown stack or usage
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mpa-emu kernel-map``."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("function", nargs="?",
                        help="show one function (with or without the stack's prefix: "
                             "irdma_, siw_, c4iw_, qedr_ or qed_iwarp_, erdma_)")
    parser.add_argument("--stack", default=DEFAULT_STACK, choices=list(STACKS),
                        help="whose kernel source (default irdma)")
    parser.add_argument("--status", choices=[MODELLED, PLUMBING, "not-yet"],
                        help="only entries with this status")
    parser.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    """Print the map (or one entry) of the chosen stack: every source file's."""
    kmap = STACKS[args.stack].kernel_map
    if args.function:
        try:
            found, entry = kmap.find(args.function)
        except KeyError as exc:
            raise CliError(str(exc.args[0])) from None
        chosen: list[tuple[KernelMap, tuple[MapEntry, ...]]] = [(found, (entry,))]
    else:
        status = NOT_YET if args.status == "not-yet" else args.status
        chosen = [(k, k.select(status)) for k in kmap.files]
    if args.json:
        rows = [row for k, entries in chosen for row in k.rows(args.stack, entries)]
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return 0
    # An empty selection still prints the header and its "0 functions" count; a stack
    # of several files gets each table under its file's name.
    several = len(kmap.files) > 1
    parts = [(f"{k.source} (Linux {k.kernel_version})\n" if several else "")
             + k.format_table(entries) for k, entries in chosen]
    sys.stdout.write("\n".join(parts))
    return 0
