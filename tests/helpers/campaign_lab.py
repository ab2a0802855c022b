"""Helpers for the campaign tests: the CLI in-process, and a Dask cluster on localhost."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path

from mpa_emu.cli import main

ROOT = Path(__file__).resolve().parents[2]
PCAPS = ROOT / "pcaps"


def cli(*argv: str) -> tuple[int, str, str]:
    """``mpa-emu ARGV`` in this process: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(list(argv))
        except SystemExit as exc:
            rc = int(exc.code or 0)
    return rc, out.getvalue(), err.getvalue()


@contextlib.contextmanager
def dask_cluster() -> Iterator[str]:
    """A scheduler and two single-threaded worker processes on 127.0.0.1; its address.
    Worker loss is not retried by the scheduler (allowed-failures 0), so the
    campaign's own retry is what the tests see."""
    import dask
    from distributed import LocalCluster

    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                         host="127.0.0.1", dashboard_address=None) as cluster:
        yield cluster.scheduler_address
