"""Signal dispositions for child processes that a test stops with SIGINT."""

from __future__ import annotations

import signal


def sigint_as_in_a_terminal() -> None:
    """``preexec_fn`` for a child that a test stops with SIGINT: its SIGINT disposition as in
    a terminal (the default), not the ignored one that a test run started with `&` from a
    script hands down, which Python and the ``live`` command keep (docs/live.md)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
