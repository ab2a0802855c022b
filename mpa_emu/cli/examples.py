"""``mpa-emu examples [--copy DIR]``: the example scenarios shipped with the package."""

from __future__ import annotations

import argparse

from mpa_emu.cli import CliError

HELP = "list the example scenarios shipped with mpa_emu, or copy them into a folder"

EPILOG = """\
Run one in place with: mpa-emu run "$(mpa-emu examples --path)/v2_accept.toml"
or copy them all to edit them: mpa-emu examples --copy my-scenarios

exit codes: 0 listed or copied, 2 the folder holds a file of the same name or is unwritable
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mpa-emu examples``."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--copy", metavar="DIR",
                       help="copy every example into DIR (created if missing; existing "
                            "files are never overwritten)")
    group.add_argument("--path", action="store_true",
                       help="print only the folder the examples are installed in")


def run(args: argparse.Namespace) -> int:
    """List, locate or copy the examples."""
    from mpa_emu.cli.packaged import copy_examples, examples, examples_dir

    if args.path:
        print(examples_dir())
        return 0
    if args.copy is not None:
        try:
            copied = copy_examples(args.copy)
        except FileExistsError as exc:
            raise CliError(f"{exc}; nothing copied (choose an empty folder)") from None
        except OSError as exc:
            raise CliError(f"cannot copy into {args.copy}: {exc.strerror or exc}") from None
        print(f"copied {len(copied)} example scenarios into {args.copy}")
        return 0
    found = examples()
    width = max(len(ex.file_name) for ex in found)
    print(f"example scenarios in {examples_dir()}:")
    for ex in found:
        print(f"  {ex.file_name:<{width}}  {ex.description or ex.name}")
    return 0
