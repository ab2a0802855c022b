"""Run independent cases serially, on local worker processes (``-j N``) or on a Dask
distributed cluster (``--scheduler ADDRESS``), with the same results in case order.

A case is ``fn(payload)`` where ``fn`` is a module-level function (picklable) that
returns a picklable result and catches its own errors. The executors differ only in
where ``fn`` runs: a worker that dies while running a case (killed, crashed, lost with
its machine) gets the case once more; when it dies again the case is reported as an
:class:`Outcome` with ``error`` set, never dropped.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any, TypeVar

from mpa_emu.campaign.cases import (
    ATTEMPTS,
    ExecutorError,
    Outcome,
    Progress,
    run_here,
)

__all__ = ["ATTEMPTS", "ExecutorError", "Outcome", "Progress", "run_cases"]

P = TypeVar("P")
R = TypeVar("R")

def run_cases(fn: Callable[[P], R], payloads: Sequence[P], *, jobs: int = 1,
              scheduler: str | None = None,
              progress: Progress | None = None) -> list[Outcome[R]]:
    """Run ``fn`` on every payload; the outcomes come back in payload order."""
    if scheduler is not None:
        from mpa_emu.campaign.dask_executor import run_on_dask

        outcomes = run_on_dask(fn, payloads, scheduler, progress)
    elif jobs <= 1 or len(payloads) <= 1:
        outcomes = []
        for i, payload in enumerate(payloads):
            outcomes.append(run_here(fn, i, payload))
            if progress is not None:
                progress.advance()
    else:
        outcomes = _run_on_processes(fn, payloads, jobs, progress)
    if progress is not None:
        progress.close()
    return outcomes


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
    case: int | None = None


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
    proc.start()
    child.close()
    return _Slot(proc, parent)


def _run_on_processes(fn: Callable[[P], R], payloads: Sequence[P], jobs: int,
                      progress: Progress | None) -> list[Outcome[R]]:
    pending = list(range(len(payloads)))
    pending.reverse()  # pop() takes the lowest index first
    attempts = [0] * len(payloads)
    outcomes: list[Outcome[R] | None] = [None] * len(payloads)
    slots = [_start(fn) for _ in range(min(jobs, len(payloads)))]

    def feed(slot: _Slot) -> None:
        if pending:
            slot.case = pending.pop()
            attempts[slot.case] += 1
            slot.conn.send((slot.case, payloads[slot.case]))
        else:
            slot.case = None

    def finish(index: int, outcome: Outcome[R]) -> None:
        outcomes[index] = outcome
        if progress is not None:
            progress.advance()

    try:
        for slot in slots:
            feed(slot)
        while any(s.case is not None for s in slots):
            busy = [s for s in slots if s.case is not None]
            ready = wait([s.conn for s in busy] + [s.process.sentinel for s in busy])
            for slot in busy:
                assert slot.case is not None
                if slot.conn in ready and slot.conn.poll():
                    try:
                        got: Outcome[R] = slot.conn.recv()
                    except (EOFError, OSError):
                        got = None  # type: ignore[assignment]
                    if got is not None:
                        finish(slot.case, Outcome(got.index, got.result, got.error,
                                                  attempts[slot.case]))
                        feed(slot)
                        continue
                if slot.process.sentinel in ready or not slot.process.is_alive():
                    slot.process.join()
                    case = slot.case
                    code = slot.process.exitcode
                    slot.conn.close()
                    fresh = _start(fn)
                    slot.process, slot.conn, slot.case = fresh.process, fresh.conn, None
                    if attempts[case] < ATTEMPTS:
                        pending.append(case)
                    else:
                        finish(case, Outcome(case, None, f"worker died {attempts[case]} "
                                             f"times running this case (exit code {code})",
                                             attempts[case]))
                    feed(slot)
    finally:
        for slot in slots:
            with contextlib.suppress(OSError):
                slot.conn.send(None)
            slot.process.join(timeout=5)
            if slot.process.is_alive():
                slot.process.terminate()
                slot.process.join()
    done = [o for o in outcomes if o is not None]
    assert len(done) == len(payloads)
    return done
