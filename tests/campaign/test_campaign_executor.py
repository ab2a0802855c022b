"""The executors: results in case order whatever runs them, a case whose worker dies
is retried once and then reported as an error, never lost; the progress bar only on a
terminal."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from pathlib import Path

from helpers.campaign_lab import dask_cluster

from mpa_emu.campaign.executor import Progress, iter_cases, run_cases


def square(n: int) -> int:
    return n * n


def fail_on_three(n: int) -> int:
    if n == 3:
        raise ValueError("three")
    return n


def die_once(marker_and_n: tuple[str, int]) -> int:
    """Kill the worker the first time case 2 runs (the marker file remembers)."""
    marker, n = marker_and_n
    if n == 2 and not os.path.exists(marker):
        Path(marker).touch()
        os._exit(9)
    return n


def die_always(n: int) -> int:
    if n == 1:
        os._exit(7)
    return n


def test_processes_give_results_in_case_order() -> None:
    got = run_cases(square, list(range(40)), jobs=3)
    assert [o.result for o in got] == [n * n for n in range(40)]
    assert [o.index for o in got] == list(range(40))
    assert all(o.error is None and o.attempts == 1 for o in got)


def test_a_case_that_raises_is_an_error_in_its_place() -> None:
    for jobs in (1, 2):
        got = run_cases(fail_on_three, [1, 2, 3, 4], jobs=jobs)
        assert [o.result for o in got] == [1, 2, None, 4]
        assert got[2].error is not None and got[2].error.startswith("ValueError: three at ")


def test_a_dying_worker_gets_its_case_once_more(tmp_path: Path) -> None:
    marker = str(tmp_path / "died")
    got = run_cases(die_once, [(marker, n) for n in range(6)], jobs=2)
    assert [o.result for o in got] == list(range(6))
    assert got[2].attempts == 2 and os.path.exists(marker)
    # The case queued behind it on the same worker never ran there: one attempt.
    assert [o.attempts for o in got if o.index != 2] == [1] * 5


def test_a_case_that_kills_every_worker_is_an_error_after_two_tries() -> None:
    got = run_cases(die_always, [0, 1, 2, 3], jobs=2)
    assert [o.result for o in got] == [0, None, 2, 3]
    assert got[1].error == "worker died 2 times running this case (exit code 7)"
    assert got[1].attempts == 2


def test_dask_cluster_retries_a_lost_worker_once_then_reports_the_case() -> None:
    with dask_cluster() as address:
        got = run_cases(square, list(range(12)), scheduler=address)
        assert [o.result for o in got] == [n * n for n in range(12)]
        # os._exit is a builtin, so every worker can unpickle it
        lost = run_cases(os._exit, [5], scheduler=address)
    assert lost[0].result is None and lost[0].attempts == 2
    assert lost[0].error is not None and lost[0].error.startswith("worker lost 2 times")


def worker_pid(_n: int) -> int:
    return os.getpid()


def test_workers_live_for_the_whole_iteration_and_cases_are_read_a_window_ahead() -> None:
    taken: list[int] = []

    def payloads() -> Iterator[int]:
        for n in range(300):
            taken.append(n)
            yield n

    outcomes = iter_cases(worker_pid, payloads(), jobs=2, window=16)
    first = next(outcomes)
    assert first.index == 0
    # At most the window is taken ahead of the outcome yielded (16 cases), whatever the
    # length of the campaign.
    assert len(taken) <= 17
    rest = list(outcomes)
    assert [o.index for o in rest] == list(range(1, 300))
    pids = {first.result} | {o.result for o in rest}
    assert len(pids) == 2 and os.getpid() not in pids


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_only_on_a_terminal() -> None:
    pipe = io.StringIO()
    bar = Progress(10, "suite", pipe)
    for _ in range(10):
        bar.advance()
    bar.close()
    assert pipe.getvalue() == ""
    tty = _Tty()
    bar = Progress(4, "suite", tty)
    for _ in range(4):
        bar.advance()
    assert tty.getvalue().endswith("\rsuite [" + "#" * 30 + "] 4/4 cases")
    assert "\rsuite [" + "#" * 15 + "." * 15 + "] 2/4 cases" in tty.getvalue()
    bar.close()
    assert tty.getvalue().endswith("\r")
