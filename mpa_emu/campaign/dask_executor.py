"""Cases on a Dask distributed cluster (the optional extra ``mpa_emu[dask]``).

Every case is one task submitted with ``pure=False`` (cases are seeded by their payload,
not by Dask). A task whose worker died (``KilledWorker`` once the scheduler gives up,
or a lost connection) is submitted once more under a new key; a second loss makes it an
error outcome. Results are put back in case order whatever order they finish in.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from mpa_emu.campaign.cases import ATTEMPTS, ExecutorError, Outcome, Progress, run_here

P = TypeVar("P")
R = TypeVar("R")

CONNECT_TIMEOUT_S = 10
"""How long a scheduler that refuses or does not answer is retried before the campaign
gives up with one line (distributed.Client's ``timeout``)."""


def _client(address: str) -> Any:
    try:
        # typed as Any: distributed's API is not annotated throughout
        distributed: Any = importlib.import_module("distributed")
    except ImportError:
        raise ExecutorError("--scheduler needs the dask extra: "
                            "pip install 'mpa_emu[dask]'") from None
    try:
        return distributed.Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise ExecutorError(f"cannot reach the Dask scheduler at {address}: "
                            f"{exc}") from None


def _case(fn: Callable[[P], R], index: int, payload: P) -> Outcome[R]:
    return run_here(fn, index, payload)


def run_on_dask(fn: Callable[[P], R], payloads: Sequence[P], address: str,
                progress: Progress | None) -> list[Outcome[R]]:
    """Run every payload on the cluster at ``address``; outcomes in payload order."""
    client = _client(address)
    as_completed: Any = importlib.import_module("distributed").as_completed
    try:
        attempts = [1] * len(payloads)
        owner: dict[str, int] = {}
        futures = []
        for i, payload in enumerate(payloads):
            fut = client.submit(_case, fn, i, payload, pure=False)
            owner[fut.key] = i
            futures.append(fut)
        outcomes: list[Outcome[R] | None] = [None] * len(payloads)
        queue = as_completed(futures, loop=client.loop)
        for fut in queue:
            i = owner[fut.key]
            if fut.status == "finished":
                got: Outcome[R] = fut.result()
                outcomes[i] = Outcome(i, got.result, got.error, attempts[i])
            elif attempts[i] < ATTEMPTS:
                attempts[i] += 1
                again = client.submit(_case, fn, i, payloads[i], pure=False)
                owner[again.key] = i
                queue.add(again)
                continue
            else:
                outcomes[i] = Outcome(i, None, f"worker lost {attempts[i]} times running "
                                      f"this case ({_reason(fut)})", attempts[i])
            if progress is not None:
                progress.advance()
        done = [o for o in outcomes if o is not None]
        assert len(done) == len(payloads)
        return done
    finally:
        client.close()


def _reason(fut: Any) -> str:
    try:
        exc = fut.exception(timeout=1)
    except Exception as err:  # the cluster itself went away
        return type(err).__name__
    return f"{type(exc).__name__}: {exc}" if exc is not None else fut.status
