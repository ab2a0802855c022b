"""What every executor shares: a case's :class:`Outcome`, the :class:`Progress` bar, the
:class:`ExecutorError` and running one case here (see :mod:`mpa_emu.campaign.executor`)."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Generic, TypeVar

from mpa_emu.errors import MpaEmuError

P = TypeVar("P")
R = TypeVar("R")

ATTEMPTS = 2
"""A case runs at most this many times when its worker dies (the first try and one
retry)."""


class ExecutorError(MpaEmuError):
    """The executor cannot start (no such scheduler, the dask extra missing)."""


@dataclass(frozen=True, slots=True)
class Outcome(Generic[R]):
    """What became of one case: its result, or why there is none."""

    index: int
    result: R | None
    error: str | None = None
    attempts: int = 1


class Progress:
    """``label [#####.....] done/total cases`` redrawn on a terminal; silent elsewhere."""

    WIDTH = 30

    def __init__(self, total: int, label: str, stream: IO[str] | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.total = total
        self.label = label
        self.done = 0
        self.enabled = self.stream.isatty() and total > 1
        self._drawn = -1

    def advance(self, count: int = 1) -> None:
        """Count finished cases and redraw when the bar moved."""
        self.done += count
        if not self.enabled:
            return
        filled = self.WIDTH * self.done // max(self.total, 1)
        if filled == self._drawn and self.done != self.total:
            return
        self._drawn = filled
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (self.WIDTH - filled)}] "
                          f"{self.done}/{self.total} cases")
        self.stream.flush()

    def close(self) -> None:
        """Clear the bar's line."""
        if self.enabled and self._drawn >= 0:
            self.stream.write("\r" + " " * (self.WIDTH + len(self.label) + 30) + "\r")
            self.stream.flush()


def run_here(fn: Callable[[P], R], index: int, payload: P) -> Outcome[R]:
    """Run one case in this process; a case's own exception becomes its error."""
    try:
        return Outcome(index, fn(payload))
    except Exception as exc:  # a case's own bug: reported with the case, not raised
        return Outcome(index, None, one_line(exc))


def one_line(exc: BaseException) -> str:
    """An exception as one line, with the file and line it was raised at."""
    where = traceback.extract_tb(exc.__traceback__)
    at = f" at {os.path.basename(where[-1].filename)}:{where[-1].lineno}" if where else ""
    return f"{type(exc).__name__}: {exc}{at}"
