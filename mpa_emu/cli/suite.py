"""``mpa-emu replay --suite SUITE.toml``: every case, a line each, a summary, JSON and
JUnit outputs. Exit 0 only when every case gets its expected verdict."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from mpa_emu.campaign.executor import ExecutorError, Outcome, Progress, run_cases
from mpa_emu.campaign.junit import JUnitCase, write_junit
from mpa_emu.campaign.suite import (
    CaseResult,
    SuiteCase,
    SuiteError,
    load_suite,
    result_json,
    run_case,
)
from mpa_emu.cli import ArgumentsError, CliError, build_parser
from mpa_emu.replay.job import ReplayJob


def run_suite(args: argparse.Namespace,
              read_job: Callable[[argparse.Namespace], ReplayJob]) -> int:
    """Run the suite named by ``args.suite`` with the campaign options of ``args``; each
    case's options become a job through ``read_job`` (replay's own reading)."""
    if args.capture is not None or args.emulate is not None:
        raise CliError("--suite takes its captures, addresses and options from the suite "
                       "file (no CAPTURE or --emulate)")
    try:
        cases = [_with_job(case, read_job) for case in load_suite(args.suite)]
    except SuiteError as exc:
        raise CliError(str(exc)) from None
    try:
        outcomes = run_cases(run_case, cases, jobs=args.jobs, scheduler=args.scheduler,
                             progress=Progress(len(cases), "suite"))
    except ExecutorError as exc:
        raise CliError(str(exc)) from None
    results = [o.result for o in outcomes]
    errors = [o.error for o in outcomes]
    for case, outcome in zip(cases, outcomes, strict=True):
        print(_line(case.name, outcome))
    passed = sum(1 for r in results if r is not None and r.passed)
    print(f"{passed} passed, {len(cases) - passed} failed", flush=True)
    suite_name = Path(args.suite).stem
    try:
        if args.json:
            Path(args.json).write_text(json.dumps(result_json(results, errors), indent=2)
                                       + "\n", encoding="utf-8")
        if args.junit:
            write_junit(args.junit, suite_name,
                        [_junit(suite_name, c.name, o) for c, o in
                         zip(cases, outcomes, strict=True)])
    except OSError as exc:
        raise CliError(f"cannot write output: {exc.strerror or exc}") from None
    return 0 if passed == len(cases) else 1


def _with_job(case: SuiteCase, read_job: Callable[[argparse.Namespace], ReplayJob]
              ) -> SuiteCase:
    """The case with its options read as ``mpa-emu replay CAPTURE --emulate IP ARGS``
    reads them, or with the one-line error the command would print for them."""
    argv = ["replay", case.capture, "--emulate", case.emulate, *case.args]
    try:
        args, unknown = build_parser("replay", quiet=True).parse_known_args(argv)
        if unknown:  # named as mpa_emu.cli.main names them
            return replace(case, error="mpa-emu replay: error: unrecognized arguments: "
                                       f"{' '.join(unknown)} (see mpa-emu replay --help)")
        return replace(case, job=read_job(args))
    except ArgumentsError as exc:
        return replace(case, error=str(exc))
    except CliError as exc:
        return replace(case, error=f"mpa-emu replay: error: {exc}")


def _line(name: str, outcome: Outcome[CaseResult]) -> str:
    if outcome.result is None:
        return f"FAIL {name}: could not run: {outcome.error}"
    return outcome.result.line()


def _junit(suite: str, name: str, outcome: Outcome[CaseResult]) -> JUnitCase:
    res = outcome.result
    if res is None:
        return JUnitCase(name, suite, error=f"could not run: {outcome.error}")
    return JUnitCase(name, suite, res.seconds,
                     failure=None if res.passed else f"{res.reason}: {res.summary}",
                     output=res.summary)
