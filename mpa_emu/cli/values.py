"""Argument types shared by the subcommands: each refuses a bad value with one line that
argparse prints as ``mpa-emu CMD: error: argument OPTION: ...`` (exit 2)."""

from __future__ import annotations

import argparse
import math
import os

from mpa_emu.ranges import EMULATOR_RANGES, Range


def _integer(text: str) -> int:
    try:
        return int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def capture_port(text: str) -> int:
    """A TCP port as it may appear in a capture: 0..65535."""
    value = _integer(text)
    if not 0 <= value <= 0xFFFF:
        raise argparse.ArgumentTypeError(f"a TCP port is 0..65535, got {value}")
    return value


def positive(text: str) -> int:
    """An integer of 1 or more (a connection number as printed, a count)."""
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected 1 or more, got {value}")
    return value


def check_seconds(option: str, value: float | None, *, positive: bool = False) -> None:
    """A time option must be a finite number of seconds, 0 or more (more than 0 with
    ``positive``); NaN and infinity are refused (CliError)."""
    from mpa_emu.cli import CliError

    if value is None:
        return
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        bound = "more than 0" if positive else "0 or more"
        raise CliError(f"{option} must be a finite number of seconds, {bound}; got {value:g}")


def check_range(option: str, value: int | None, allowed: Range) -> None:
    """An integer option must lie within ``allowed``, a range of the tables scenario files
    and the Python API check too (a stack's :attr:`ConfigRecord.ranges
    <mpa_emu.stacks.base.ConfigRecord.ranges>`, :mod:`mpa_emu.ranges`);
    CliError naming the range and the type behind it."""
    from mpa_emu.cli import CliError

    if value is not None and allowed.problem(value) is not None:
        raise CliError(f"{option} must be {allowed.text()} ({allowed.why}), got {value}")


def check_writable(option: str, path: str | None) -> None:
    """Refuse an output path that cannot be written before any work is done (CliError):
    a directory, or a file in a directory that does not exist."""
    from mpa_emu.cli import CliError

    if path is None:
        return
    if os.path.isdir(path):
        raise CliError(f"{option} {path}: is a directory")
    parent = os.path.dirname(path) or "."
    if not os.path.isdir(parent):
        raise CliError(f"{option} {path}: no such directory {parent}")
    if not os.access(parent, os.W_OK):
        raise CliError(f"{option} {path}: directory {parent} is not writable")


def seed(text: str) -> int:
    """A seed: an integer of 0 or more, as in a scenario file's ``seed``."""
    value = _integer(text)
    allowed = EMULATOR_RANGES["seed"]
    if value < 0:
        raise argparse.ArgumentTypeError(f"a seed is 0 or more, got {value}")
    if value > allowed.hi:
        raise argparse.ArgumentTypeError(f"a seed is {allowed.text()} ({allowed.why}), "
                                         f"got {value}")
    return value
