"""The ``wrote FILE`` line a command prints for each file it wrote (``-o``, ``--html``),
as ``mpa-emu demo`` does: on standard output, or on standard error when standard output
carries a document a program reads (``--json`` to it) that the line would break."""

from __future__ import annotations

import sys


def wrote(path: str, what: str = "", *, stdout_is_data: bool = False) -> None:
    """Print ``wrote PATH (WHAT)`` (nothing for ``-``: the file was standard output)."""
    if path == "-":
        return
    stream = sys.stderr if stdout_is_data else sys.stdout
    stream.write(f"wrote {path}" + (f" ({what})" if what else "") + "\n")
    stream.flush()
