"""The ``mpa-emu`` command line. Each subcommand lives in its own module under
:mod:`mpa_emu.cli` and exposes ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``.

Exit codes shared by every subcommand: 0 success, 1 a check failed (divergence, unmet
expectation), 2 bad input or usage (one-line error, no traceback).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn

from mpa_emu.errors import MpaEmuError

# Subcommand name -> module. Listed explicitly so --help order is stable.
SUBCOMMANDS: dict[str, str] = {
    "demo": "mpa_emu.cli.demo",
    "peer": "mpa_emu.cli.peer",
    "live": "mpa_emu.cli.live",
    "inspect": "mpa_emu.cli.inspect",
    "replay": "mpa_emu.cli.replay",
    "kernel-map": "mpa_emu.cli.kernel_map",
    "run": "mpa_emu.cli.run",
    "diagram": "mpa_emu.cli.diagram",
    "judge": "mpa_emu.cli.judge",
    "explain": "mpa_emu.cli.explain",
    "examples": "mpa_emu.cli.examples",
    "wireshark-plugin": "mpa_emu.cli.wireshark_plugin",
    "fuzz": "mpa_emu.cli.fuzz",
    "matrix": "mpa_emu.cli.matrix",
}


def _load(name: str) -> ModuleType:
    return importlib.import_module(SUBCOMMANDS[name])


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line naming the command and the
    problem, with a pointer to ``--help`` instead of the multi-line usage text."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _QuietParser(_Parser):
    """The same parser raising :class:`ArgumentsError` with that line instead of
    printing it and exiting (options read from a file, e.g. a suite's cases)."""

    def error(self, message: str) -> NoReturn:
        raise ArgumentsError(f"{self.prog}: error: {message} (see {self.prog} --help)")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise ArgumentsError(f"{self.prog}: error: options that print and exit "
                             "(--help, --version) are not options of a run")


def build_parser(command: str | None = None, *, quiet: bool = False
                 ) -> argparse.ArgumentParser:
    """The top-level parser. With ``command`` only that subcommand's module is imported
    (the others are registered by name only), so starting one command stays cheap.
    ``quiet``: usage errors raise :class:`ArgumentsError` instead of exiting."""
    kind = _QuietParser if quiet else _Parser
    parser = kind(
        prog="mpa-emu",
        description="Packet-level emulator of the Linux irdma iWARP connection manager.",
        epilog="Exit codes: 0 ok, 1 check failed, 2 bad input, 130 interrupted (Ctrl-C).",
    )
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="show the version and the build (pure Python or compiled)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=kind)
    for name in SUBCOMMANDS:
        if command is not None and name != command:
            sub.add_parser(name)
            continue
        mod = _load(name)
        p = sub.add_parser(name, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
    return parser


class _Version(argparse.Action):
    """``--version``: ``mpa-emu <version> (<build>, Python <version>)``, worked out only
    when asked (it imports the compiled modules' candidates). Which build answers matters
    when comparing figures (docs/compiling.md)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        from mpa_emu import __version__
        from mpa_emu.compiled import build_name

        print(f"mpa-emu {__version__} ({build_name()}, Python {sys.version.split()[0]})")
        parser.exit(0)


def _chosen(argv: Sequence[str]) -> str | None:
    """The subcommand named by the first non-option argument, if it is one of ours."""
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in SUBCOMMANDS else None
    return None


class CliError(MpaEmuError):
    """A user-facing error: printed as one line, exit code 2."""


class ArgumentsError(CliError):
    """Options a quiet parser (``build_parser(quiet=True)``) refuses: the whole line the
    command would print, ``mpa-emu CMD: error: ...``."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``mpa-emu`` and ``python -m mpa_emu``."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_chosen(arguments))
    args, unknown = parser.parse_known_args(arguments)
    if unknown:
        # Named after the subcommand they were given to, not the top-level parser.
        prog = f"mpa-emu {args.command}" if args.command else "mpa-emu"
        print(f"{prog}: error: unrecognized arguments: {' '.join(unknown)} "
              f"(see {prog} --help)", file=sys.stderr)
        return 2
    if not args.command:
        parser.print_help()
        return 2
    mod = _load(args.command)
    try:
        code: int = mod.run(args)
    except CliError as exc:
        print(f"mpa-emu {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"mpa-emu {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (``mpa-emu demo | head``): nothing left to say to it, and
        # the flush at exit must not fail either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return code
