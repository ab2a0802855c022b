"""Run independent cases serially, on local worker processes (``-j N``) or on a Dask
distributed cluster (``--scheduler ADDRESS``), with the same results in case order.

A case is ``fn(payload)`` where ``fn`` is a module-level function (picklable) that
returns a picklable result and catches its own errors. The executors differ only in
where ``fn`` runs: a worker that dies while running a case (killed, crashed, lost with
its machine) gets the case once more; when it dies again the case is reported as an
:class:`Outcome` with ``error`` set, never dropped.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import itertools
import multiprocessing
import signal
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any, Generic, TypeVar

from mpa_emu.campaign.cases import (
    ATTEMPTS,
    ExecutorError,
    Outcome,
    Progress,
    run_here,
)

__all__ = ["ATTEMPTS", "ExecutorError", "Outcome", "Progress", "iter_cases", "run_cases"]

P = TypeVar("P")
R = TypeVar("R")

WINDOW = 256
"""Cases read ahead of the last outcome yielded (:func:`iter_cases`)."""
QUEUED = 2
"""Cases a local worker holds: the one it runs and the next, already sent."""

def run_cases(fn: Callable[[P], R], payloads: Sequence[P], *, jobs: int = 1,
              scheduler: str | None = None,
              progress: Progress | None = None) -> list[Outcome[R]]:
    """Run ``fn`` on every payload; the outcomes come back in payload order."""
    return list(iter_cases(fn, payloads, jobs=jobs, scheduler=scheduler, progress=progress))


def iter_cases(fn: Callable[[P], R], payloads: Iterable[P], *, jobs: int = 1,
               scheduler: str | None = None, progress: Progress | None = None,
               window: int = WINDOW) -> Iterator[Outcome[R]]:
    """Run ``fn`` on every payload and yield the outcomes in payload order as they are
    ready. ``payloads`` is read lazily: at most ``window`` cases are taken ahead of the
    last outcome yielded, so a long campaign holds a window of cases and results, never
    all of them. Local workers live for the whole iteration, each with a second case
    queued behind the one it runs, so that no worker waits for this process to hand it
    the next case."""
    window = max(window, 1)
    try:
        if scheduler is not None:
            from mpa_emu.campaign.dask_executor import run_on_dask

            source = iter(payloads)
            base = 0
            while chunk := list(itertools.islice(source, window)):
                for got in run_on_dask(fn, chunk, scheduler, progress):
                    yield Outcome(base + got.index, got.result, got.error, got.attempts)
                base += len(chunk)
        elif jobs <= 1 or (isinstance(payloads, Sequence) and len(payloads) <= 1):
            for i, payload in enumerate(payloads):
                yield run_here(fn, i, payload)
                if progress is not None:
                    progress.advance()
        else:
            yield from _run_on_processes(fn, payloads, jobs, progress,
                                         max(window, jobs * QUEUED))
    finally:
        if progress is not None:
            progress.close()


def _worker(conn: Connection, fn: Callable[[Any], Any]) -> None:
    """A worker process: run each (index, payload) received, send the outcome back."""
    # Ctrl-C is the parent's to handle: it stops the campaign and ends the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        index, payload = message
        conn.send(run_here(fn, index, payload))


@dataclass
class _Slot:
    process: BaseProcess
    conn: Connection
    cases: collections.deque[int] = field(default_factory=collections.deque)
    """The cases sent to this worker, oldest first: the first is the one it runs."""


def _context() -> multiprocessing.context.BaseContext:
    # fork is cheap and keeps what the parent imported; where it is unsafe (threads
    # in the parent on macOS) or missing, spawn.
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods
                                       and sys.platform == "linux" else "spawn")


def _start(fn: Callable[[Any], Any]) -> _Slot:
    ctx = _context()
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_worker, args=(child, fn), daemon=True)  # type: ignore[attr-defined]
    # A forked worker's collector would walk (and so copy, page by page) every object it
    # inherited; frozen, they stay shared. This process unfreezes at once.
    gc.freeze()
    try:
        proc.start()
    finally:
        gc.unfreeze()
    child.close()
    return _Slot(proc, parent)


class _Cases(Generic[P, R]):
    """The bookkeeping of a local run: cases read ahead from the payloads, retries, and
    outcomes held until every earlier one is yielded."""

    def __init__(self, payloads: Iterable[P], window: int) -> None:
        self.source = enumerate(payloads)
        self.window = window
        self.payloads: dict[int, P] = {}
        self.attempts: dict[int, int] = {}
        self.retry: list[int] = []
        self.done: dict[int, Outcome[R]] = {}
        self.next_out = 0
        self.exhausted = False

    def take(self) -> int | None:
        """The next case to send (a retried one first), or None when there is none
        now: all are sent, or the window ahead of the oldest unfinished case is full."""
        if self.retry:
            return self.retry.pop()
        if self.exhausted:
            return None
        # The window bounds what is held: payloads sent or waiting, outcomes waiting.
        if len(self.payloads) >= self.window:
            return None
        try:
            index, payload = next(self.source)
        except StopIteration:
            self.exhausted = True
            return None
        self.payloads[index] = payload
        self.attempts[index] = 0
        return index

    def finish(self, index: int, outcome: Outcome[R]) -> None:
        self.done[index] = outcome

    def ready(self) -> Iterator[Outcome[R]]:
        """The outcomes that can be yielded now, in order, forgotten once yielded."""
        while self.next_out in self.done:
            index = self.next_out
            del self.payloads[index], self.attempts[index]
            self.next_out += 1
            yield self.done.pop(index)


def _run_on_processes(fn: Callable[[P], R], payloads: Iterable[P], jobs: int,
                      progress: Progress | None, window: int) -> Iterator[Outcome[R]]:
    cases: _Cases[P, R] = _Cases(payloads, window)
    slots: list[_Slot] = []

    def feed(slot: _Slot) -> None:
        while len(slot.cases) < QUEUED:
            index = cases.take()
            if index is None:
                return
            slot.cases.append(index)
            slot.conn.send((index, cases.payloads[index]))

    def finish(index: int, outcome: Outcome[R]) -> None:
        cases.finish(index, outcome)
        if progress is not None:
            progress.advance()

    def lost(slot: _Slot) -> None:
        """The worker died: the case it ran is tried again or reported; the one queued
        behind it never started and goes back to be sent again as it was."""
        slot.process.join()
        code = slot.process.exitcode
        slot.conn.close()
        running, *queued = slot.cases
        cases.attempts[running] += 1
        if cases.attempts[running] < ATTEMPTS:
            cases.retry.append(running)
        else:
            finish(running, Outcome(running, None, f"worker died "
                                    f"{cases.attempts[running]} times running this case "
                                    f"(exit code {code})", cases.attempts[running]))
        cases.retry.extend(reversed(queued))
        fresh = _start(fn)
        slot.process, slot.conn, slot.cases = fresh.process, fresh.conn, fresh.cases

    try:
        while len(slots) < jobs:
            slot = _start(fn)
            slots.append(slot)
            feed(slot)
            if not slot.cases:
                break
        while True:
            yield from cases.ready()
            for slot in slots:  # retries, and the room the yielded outcomes made
                feed(slot)
            busy = [s for s in slots if s.cases]
            if not busy:
                # Nothing to send with nothing running: the window cannot be full of
                # finished cases (ready() has just yielded them), so all are done.
                break
            ready = wait([s.conn for s in busy] + [s.process.sentinel for s in busy])
            for slot in busy:
                if slot.conn in ready and slot.conn.poll():
                    try:
                        got: Outcome[R] | None = slot.conn.recv()
                    except (EOFError, OSError):
                        got = None
                    if got is not None:
                        index = slot.cases.popleft()
                        attempts = cases.attempts[index] + 1
                        finish(index, Outcome(got.index, got.result, got.error, attempts))
                        continue
                if slot.process.sentinel in ready or not slot.process.is_alive():
                    lost(slot)
    finally:
        for slot in slots:
            with contextlib.suppress(OSError):
                slot.conn.send(None)
            slot.process.join(timeout=5)
            if slot.process.is_alive():
                slot.process.terminate()
                slot.process.join()
