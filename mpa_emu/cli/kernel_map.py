"""``mpa-emu kernel-map``: every function of a stack's kernel CM source and what models it."""

from __future__ import annotations

import argparse
import json
import sys

from mpa_emu.cli import CliError
from mpa_emu.stacks import DEFAULT_STACK, STACKS
from mpa_emu.stacks.base import MODELLED, NOT_YET, PLUMBING, MapEntry

HELP = "print the map from every function of a stack's kernel CM source to its model"

_SOURCES = "\n".join(f"  --stack {name}: {st.kernel_map.source}, "
                     f"{st.kernel_map.file_name} of mainline Linux "
                     f"{st.kernel_map.kernel_version}."
                     for name, st in STACKS.items())

EPILOG = f"""\
Each map follows one kernel source file at a pinned release (irdma is the default):
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
                             "irdma_, siw_, c4iw_)")
    parser.add_argument("--stack", default=DEFAULT_STACK, choices=list(STACKS),
                        help="whose kernel source (default irdma)")
    parser.add_argument("--status", choices=[MODELLED, PLUMBING, "not-yet"],
                        help="only entries with this status")
    parser.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    """Print the map (or one entry) of the chosen stack."""
    kmap = STACKS[args.stack].kernel_map
    if args.function:
        try:
            entries: tuple[MapEntry, ...] = (kmap.entry(args.function),)
        except KeyError as exc:
            raise CliError(str(exc.args[0])) from None
    else:
        entries = kmap.select(NOT_YET if args.status == "not-yet" else args.status)
    if args.json:
        sys.stdout.write(json.dumps(kmap.rows(args.stack, entries), indent=2) + "\n")
    else:
        # An empty selection still prints the header and its "0 functions" count.
        sys.stdout.write(kmap.format_table(entries))
    return 0
