"""``--profile IP=STACK[,IP=STACK...]`` for the commands that read a capture (inspect,
diagram, judge, explain): the stack of a side, overriding its fingerprint."""

from __future__ import annotations

import argparse
import ipaddress
from collections.abc import Iterable

from mpa_emu.cli import CliError
from mpa_emu.judge.profile import EVERY_SIDE, ProfileError, Profiles, parse_profiles
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


def endpoint_host(endpoint: str) -> str:
    """``10.0.0.1`` of ``10.0.0.1:4000`` or ``fd00::1`` of ``[fd00::1]:5445``, as
    :func:`ipaddress.ip_address` writes it (how ``--profile`` addresses are kept)."""
    text = endpoint[1:].split("]", 1)[0] if endpoint.startswith("[") \
        else endpoint.rsplit(":", 1)[0] if endpoint.count(":") == 1 else endpoint
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return text


def check_profile_addresses(profiles: Profiles, endpoints: Iterable[str],
                            capture: str) -> None:
    """A ``--profile`` address that is no side of any connection of the capture is a
    one-line usage error (it would silently judge nothing). ``endpoints`` may be hosts
    already (:func:`endpoint_host`): a command reading a long capture keeps those, one
    per address, not one per connection."""
    named = [a for a in profiles.by_address if a != EVERY_SIDE]
    if not named:
        return
    seen = {endpoint_host(e) for e in endpoints}
    missing = [a for a in named if a not in seen]
    if missing:
        shown = ", ".join(sorted(seen)[:6]) + (", ..." if len(seen) > 6 else "")
        raise CliError(f"--profile: {', '.join(missing)} is not an address of any "
                       f"connection in {capture} (it has {shown or 'none'})")
