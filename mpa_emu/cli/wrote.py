"""The ``wrote FILE`` line a command prints for each file it wrote (``-o``, ``--html``),
as ``mpa-emu demo`` does: on standard output, or on standard error when standard output
carries a document a program reads (``--json`` to it) that the line would break."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def wrote(path: str, what: str = "", *, stdout_is_data: bool = False) -> None:
    """Print ``wrote PATH (WHAT)`` (nothing for ``-``: the file was standard output)."""
    if path == "-":
        return
    stream = sys.stderr if stdout_is_data else sys.stdout
    stream.write(f"wrote {path}" + (f" ({what})" if what else "") + "\n")
    stream.flush()


def check_writable(path: str | None, option: str) -> None:
    """A one-line usage error (:class:`~mpa_emu.cli.CliError`) when ``path`` cannot be
    written: its directory missing or not writable, or it is a directory or a file that
    is not writable. Checked before any work, so a long report is not made and printed
    only to fail on its last output. Nothing is created."""
    if path is None or path == "-":
        return
    from mpa_emu.cli import CliError

    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        why = "it is a directory"
    elif target.exists():
        why = "" if os.access(target, os.W_OK) else "permission denied"
    elif not parent.is_dir():
        why = f"no directory {parent}"
    else:
        why = "" if os.access(parent, os.W_OK | os.X_OK) else "permission denied"
    if why:
        raise CliError(f"cannot write {path} ({option}): {why}")
