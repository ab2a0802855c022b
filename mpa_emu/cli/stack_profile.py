"""``--profile IP=STACK[,IP=STACK...]`` for the commands that read a capture (inspect,
diagram, judge, explain): the stack of a side, overriding its fingerprint."""

from __future__ import annotations

import argparse

from mpa_emu.cli import CliError
from mpa_emu.judge.profile import ProfileError, Profiles, parse_profiles
from mpa_emu.judge.stacks import STACK_NAMES

PROFILE_HELP = (f"the stack of a side, overriding its fingerprint: IP=STACK "
                f"(comma-separated or repeated; a bare STACK is every side); stacks: "
                f"{', '.join(STACK_NAMES)}")


def add_profile_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--profile`` (repeatable)."""
    parser.add_argument("--profile", action="append", metavar="IP=STACK", help=PROFILE_HELP)


def profiles_of(args: argparse.Namespace) -> Profiles:
    """The parsed ``--profile`` values; a bad one is a one-line usage error."""
    try:
        return parse_profiles(getattr(args, "profile", None))
    except ProfileError as exc:
        raise CliError(str(exc)) from None
