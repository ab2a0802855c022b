"""``mpa-emu run SCENARIO``: run a scenario file and check its expectations."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from typing import IO, Any

from mpa_emu.cli import CliError
from mpa_emu.cli.campaign_options import add_campaign_arguments
from mpa_emu.cli.html_option import add_html_option, write_run_html
from mpa_emu.cli.values import seed
from mpa_emu.cli.wrote import wrote
from mpa_emu.net.records import SpooledRecords
from mpa_emu.scenario import (
    Scenario,
    ScenarioError,
    ScenarioRun,
    load_scenario,
    run_scenario,
)
from mpa_emu.scenario.progress import ProgressBar
from mpa_emu.scenario.summary import refusal_lines, summary
from mpa_emu.views.streamed_json import write_json

HELP = "run a scenario file (TOML) on the emulated network and check its expectations"

EPILOG = """\
The scenario format is described in docs/scenarios.md; `mpa-emu examples` lists the
example scenarios shipped with mpa_emu (--copy DIR copies them).

exit codes: 0 every expectation holds, 1 an expectation failed (each failure names its
scenario line and what happened instead), 2 bad scenario file (file, line and key named)
or unwritable output, 130 interrupted (the outputs so far are written)
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mpa-emu run``."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("scenario", nargs="+",
                        help="scenario file (.toml); several files run one after the other "
                             "(then without -o, --trace, --json and --html)")
    parser.add_argument("-o", "--output", metavar="OUT.pcapng",
                        help="write every frame to a pcapng file (one interface per host, "
                             "frame comments naming the kernel function)")
    parser.add_argument("--trace", metavar="OUT.jsonl",
                        help="write the structured trace as JSON Lines")
    parser.add_argument("--json", metavar="SUMMARY.json",
                        help="write a JSON summary (expectations, upcalls, frames)")
    parser.add_argument("--seed", type=seed, metavar="N", help="override the scenario's seed")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="print only failures and the verdict")
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress bar (it is drawn only when stderr is a terminal, "
                             "about ten times a second)")
    add_html_option(parser)
    add_campaign_arguments(parser)


@contextlib.contextmanager
def _open_text(path: str | None) -> Iterator[IO[str] | None]:
    if path is None:
        yield None
        return
    try:
        stream = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror or exc}") from None
    with stream:
        yield stream


INTERRUPTED = 130
"""Exit code after Ctrl-C (128 + SIGINT), as shells report it."""


def run(args: argparse.Namespace) -> int:
    """Run one scenario with its outputs, or several (or any with -j, --scheduler or
    --junit) as a campaign with a verdict per file."""
    campaign = (len(args.scenario) > 1 or args.junit or args.jobs > 1
                or args.scheduler is not None)
    if not campaign:
        return _run_one(args, args.scenario[0])
    if args.output or args.trace or args.json or args.html:
        raise CliError("-o, --trace, --json and --html need a single scenario file "
                       "(without -j, --scheduler and --junit)")
    # Check every file first: a typo in the last one should not cost a long run.
    for path in args.scenario:
        try:
            load_scenario(path)
        except ScenarioError as exc:
            raise CliError(str(exc)) from None
    return _campaign(args)


def _campaign(args: argparse.Namespace) -> int:
    from mpa_emu.campaign.executor import ExecutorError, Progress, run_cases
    from mpa_emu.campaign.junit import write_junit
    from mpa_emu.campaign.scenarios import ScenarioCase, run_scenario_case, scenario_junit

    cases = [ScenarioCase(path, args.seed) for path in args.scenario]
    progress = None if args.no_progress else Progress(len(cases), "run")
    try:
        outcomes = run_cases(run_scenario_case, cases, jobs=args.jobs,
                             scheduler=args.scheduler, progress=progress)
    except ExecutorError as exc:
        raise CliError(str(exc)) from None
    failed = 0
    for case, outcome in zip(cases, outcomes, strict=True):
        res = outcome.result
        if res is None:
            print(f"FAIL: could not run ({case.path}): {outcome.error}")
        else:
            print(res.text)
        failed += res is None or not res.ok
    print(f"{len(cases) - failed} of {len(cases)} scenarios pass", flush=True)
    if args.junit:
        try:
            write_junit(args.junit, "mpa-emu run",
                        [scenario_junit(o.result, c.path, o.error)
                         for c, o in zip(cases, outcomes, strict=True)])
        except OSError as exc:
            raise CliError(f"cannot write {args.junit}: {exc.strerror or exc}") from None
    return 1 if failed else 0


def _run_one(args: argparse.Namespace, path: str) -> int:
    try:
        sc = load_scenario(path)
    except ScenarioError as exc:
        raise CliError(str(exc)) from None
    # Frames, journal, trace records and upcalls wait on disk (memory bounded by what is
    # alive, not by the run's length); every output is written from there.
    with SpooledRecords() as records:
        with _open_text(args.trace) as trace:
            result = _execute(args, sc, trace, records)
        return _outputs(args, result)


def _outputs(args: argparse.Namespace, result: ScenarioRun) -> int:
    count = 0
    if args.output:
        try:
            count = result.net.write_pcapng(args.output)
        except OSError as exc:
            raise CliError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    if args.json:
        _write_json(args.json, summary(result))
    write_run_html(args.html, result)
    if result.interrupted:
        _report_interrupt(result, args)
        return INTERRUPTED
    _report(result, quiet=args.quiet)
    if args.output:
        wrote(args.output, f"{count} frames")
    if args.html:
        wrote(args.html, "HTML report")
    return 0 if result.ok else 1


def _report_interrupt(result: ScenarioRun, args: argparse.Namespace) -> None:
    kept = [f"{name} {path}" for name, path in
            (("-o", args.output), ("--trace", args.trace), ("--json", args.json),
             ("--html", args.html)) if path]
    sys.stderr.write(
        f"mpa-emu run: interrupted at {result.net.now_ns / 1e9:.6f} s (virtual) after "
        f"{len(result.net.frames)} frames; expectations not checked"
        + (f"; written so far: {', '.join(kept)}" if kept else "") + "\n")


def _execute(args: argparse.Namespace, sc: Scenario, trace: IO[str] | None,
             records: SpooledRecords) -> ScenarioRun:
    if args.seed is not None:
        from dataclasses import replace

        sc = replace(sc, seed=args.seed)
    bar = None
    if not args.no_progress and sys.stderr.isatty():
        bar = ProgressBar(sys.stderr, sc.name)
    try:
        result = run_scenario(sc, trace_stream=trace, progress=bar, interruptible=True,
                              records=records)
    except ScenarioError as exc:
        raise CliError(str(exc)) from None
    return result


def _write_json(path: str, data: dict[str, Any]) -> None:
    try:
        with open(path, "w", encoding="utf-8") as out:
            write_json(data, out)
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror or exc}") from None


def _report(result: ScenarioRun, *, quiet: bool) -> None:
    sc = result.scenario
    out = sys.stdout
    if not quiet:
        out.write(f"{sc.name}: seed {sc.seed}, {len(result.net.frames)} frames, "
                  f"stopped {result.result.reason} at {result.result.now_ns / 1e9:.6f} s "
                  f"(virtual) after {result.result.events} events\n")
    for e in result.expectations:
        if not quiet or not e.ok:
            out.write(e.text(sc.path) + "\n")
    if not quiet:
        for line in refusal_lines(result):
            out.write(line + "\n")
    failed = len(result.failures())
    total = len(result.expectations)
    verdict = "PASS" if result.ok else "FAIL"
    out.write(f"{verdict}: {total - failed} of {total} expectations hold"
              f"{'' if not quiet else f' ({sc.path})'}\n")
