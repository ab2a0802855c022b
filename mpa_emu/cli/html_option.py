"""``--html FILE`` of ``replay``, ``inspect`` and ``run``: the option, and the writers of
the inspect and run pages (the page parts live in :mod:`mpa_emu.views.html`, each
report's page beside its producer, e.g. :mod:`mpa_emu.scenario.html_page`; replay writes
its own with its other outputs, :func:`mpa_emu.replay.job.write_outputs`). Renderers are
imported only when asked for."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from mpa_emu.cli import CliError

if TYPE_CHECKING:
    from mpa_emu.scenario import ScenarioRun
    from mpa_emu.views.inspection import CaptureReport


def add_html_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--html FILE``."""
    parser.add_argument("--html", metavar="REPORT.html",
                        help="write a self-contained HTML report (ladder, frame fields on "
                             "hover or click, what went wrong highlighted)")


def write_inspect_html(path: str | None, report: CaptureReport) -> None:
    """Write the inspect report to ``path`` (nothing when None)."""
    if path is not None:
        from mpa_emu.views.html.inspect_page import write_inspect_page

        try:
            with open(path, "w", encoding="utf-8") as out:
                write_inspect_page(report, out)
        except OSError as exc:
            raise CliError(f"cannot write {path}: {exc.strerror or exc}") from None


def write_run_html(path: str | None, run: ScenarioRun) -> None:
    """Write the run report to ``path`` (nothing when None), as it is made: its ladder,
    tables and frame fields are read from the run's records while written."""
    if path is not None:
        from mpa_emu.scenario.html_page import write_run_page

        try:
            with open(path, "w", encoding="utf-8") as out:
                write_run_page(run, out)
        except OSError as exc:
            raise CliError(f"cannot write {path}: {exc.strerror or exc}") from None
