"""``mpa-emu fuzz``: seeded random and mutated segments and verbs against the CM core,
checking its invariants; each failure shrunk and written as a runnable reproducer."""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

from mpa_emu.cli import CliError
from mpa_emu.cli.campaign_options import add_campaign_arguments
from mpa_emu.cli.values import positive, seed

HELP = "fuzz the CM core (or, with --live, a real peer) with seeded random segments and verbs"

EPILOG = """\
Invariants checked on every case: no exception escapes receive, handle_timer or a verb
(escape); every emitted frame decodes with good checksums (frame); no node in a state
the transition table marks unreachable (reachability); no timer left 3000 s after the
script (timer); every node left behind is a leak the kernel has (leak); with
--two-cores, the cores go quiet once the middlebox is honest (quiet). Each failure is
shrunk and written to --out as NAME.json (run it with --reproduce) and NAME.pcapng.
--mixed: hosts of every ordered pair of stacks, checked for escapes, refusals of
out-of-range values in one line, unbounded runs, ACKs per received segment, iw_cm
BUG() conditions, the rdma_cm event sequence and leaks after idle (case I of seed S is
mpa_emu.campaign.mixed.case_of(S, I)). --mutate-captures DIR: tracebacks and exit
codes of inspect, explain, diagram and judge on mutated captures. See
docs/campaigns.md.

exit codes: 0 no invariant broken, 1 a failure (or a case that could not run),
2 bad option, 130 interrupted
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``mpa-emu fuzz``."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("--cases", type=positive, default=1000, metavar="N",
                        help="number of cases (default 1000)")
    parser.add_argument("--seed", type=seed, default=0, metavar="S",
                        help="campaign seed; case i is the same for the same S (default 0)")
    parser.add_argument("--time-budget", type=float, metavar="SECONDS",
                        help="start no case after this much wall-clock time")
    parser.add_argument("--out", default="fuzz-failures", metavar="DIR",
                        help="where reproducers are written (default fuzz-failures)")
    parser.add_argument("--reproduce", metavar="FILE.json",
                        help="run one reproducer written by an earlier campaign")
    parser.add_argument("--two-cores", action="store_true",
                        help="fuzz two cores (active and passive) through a hostile "
                             "middlebox that loses, duplicates, reorders, corrupts and "
                             "mutates frames, with verbs on both sides")
    parser.add_argument("--mixed", action="store_true",
                        help="fuzz two hosts of every ordered pair of registered stacks "
                             "(their parameters in and just outside their ranges) "
                             "through a hostile middlebox, with verbs on both sides, "
                             "each case run until both hosts go quiet")
    parser.add_argument("--mutate-captures", metavar="DIR",
                        help="run inspect, explain, diagram and judge (every stack's "
                             "profile) on mutated copies of the captures in DIR")
    add_campaign_arguments(parser, junit=False)
    from mpa_emu.cli.live_fuzz import add_live_arguments

    add_live_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """A campaign, a reproducer, or (--live) a campaign against a real peer."""
    if args.time_budget is not None and not (math.isfinite(args.time_budget)
                                             and args.time_budget > 0):
        raise CliError(f"--time-budget must be more than 0 seconds, got {args.time_budget:g}")
    if args.accept and args.live is None:
        raise CliError("--accept goes with --live IP:PORT (the peer and our port)")
    if args.live is not None:
        from mpa_emu.cli.live_fuzz import run_live

        return run_live(args)
    if args.json:
        raise CliError("--json goes with --live (a campaign prints its failures and "
                       "writes reproducers)")
    if args.reproduce and args.two_cores:
        raise CliError("--reproduce reads the mode from the reproducer: no --two-cores")
    if args.reproduce:
        return _reproduce(args.reproduce)
    if args.mixed and (args.two_cores or args.mutate_captures):
        raise CliError("--mixed is a campaign of its own: no --two-cores or "
                       "--mutate-captures with it")
    if args.mixed:
        return _mixed(args)
    if args.mutate_captures:
        if args.two_cores:
            raise CliError("--mutate-captures is a campaign of its own: no --two-cores")
        from mpa_emu.cli.fuzz_captures import run_mutations

        return run_mutations(args)
    return _campaign(args)


def _mixed(args: argparse.Namespace) -> int:
    from mpa_emu.campaign.executor import ExecutorError, Progress, run_cases
    from mpa_emu.campaign.mixed import CHUNK, KERNEL_OWN, MixedChunk, pairs, run_mixed_chunk

    started = time.time()
    deadline = started + args.time_budget if args.time_budget else None
    chunks = [MixedChunk(args.seed, start, min(CHUNK, args.cases - start), deadline)
              for start in range(0, args.cases, CHUNK)]
    executor = (f"scheduler {args.scheduler}" if args.scheduler
                else f"{args.jobs} process{'es' if args.jobs > 1 else ''}")
    print(f"fuzz (mixed stacks, {len(pairs())} ordered pairs, through a hostile "
          f"middlebox): seed {args.seed}, {args.cases} cases on {executor}", flush=True)
    try:
        outcomes = run_cases(run_mixed_chunk, chunks, jobs=args.jobs,
                             scheduler=args.scheduler, progress=Progress(len(chunks), "fuzz"))
    except ExecutorError as exc:
        raise CliError(str(exc)) from None
    seconds = time.time() - started
    counts: dict[str, int] = {}
    ran = steps = events = refused = failed = 0
    shown: dict[str, int] = {}
    for chunk, outcome in zip(chunks, outcomes, strict=True):
        if outcome.result is None:
            failed += 1
            print(f"ERROR cases {chunk.start}..{chunk.start + chunk.count - 1}: "
                  f"{outcome.error}")
            continue
        r = outcome.result
        ran += r.ran
        steps += r.steps
        events += r.events
        refused += r.refused
        for inv, n in r.counts.items():
            counts[inv] = counts.get(inv, 0) + n
        for f in r.failures:
            if shown.get(f.invariant, 0) >= 3:
                continue
            shown[f.invariant] = shown.get(f.invariant, 0) + 1
            print(f"FAIL {f.invariant} (case {f.index}: {f.case}): {f.message}")
    broken = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "none"
    rate = ran / seconds if seconds > 0 else float("inf")
    print(f"{ran} cases ({refused} with a parameter outside its range, refused) in "
          f"{seconds:.1f} s ({rate:.0f} cases/s), {steps} steps, {events} events; "
          f"failing cases by invariant: {broken}"
          + ("" if ran == args.cases else f"; time budget reached after {ran} of "
             f"{args.cases} cases"), flush=True)
    # A loop or a BUG() condition the kernel has too is reported, not a failure of the
    # model.
    real = {k: n for k, n in counts.items() if k not in KERNEL_OWN}
    return 1 if real or failed else 0


def _reproduce(path: str) -> int:
    from mpa_emu.campaign.fuzz import load_reproducer, run_script

    try:
        script, plant, data = load_reproducer(path)
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise CliError(f"{path}: not a fuzz reproducer ({type(exc).__name__}: {exc})") \
            from None
    got = run_script(script, plant_name=plant)
    if got is None:
        print(f"PASS: no invariant broken ({len(script.steps)} steps; recorded: "
              f"{data.get('invariant', '?')})")
        return 0
    print(f"FAIL {got.invariant}: {got.message} ({len(script.steps)} steps"
          + (f", planted defect {plant}" if plant else "") + ")")
    return 1


def _campaign(args: argparse.Namespace) -> int:
    from mpa_emu.campaign.executor import ExecutorError, Progress, run_cases
    from mpa_emu.campaign.fuzz import CHUNK, Chunk, run_chunk, write_reproducer
    from mpa_emu.campaign.fuzz import plant as planted

    plant = planted()
    started = time.time()
    deadline = started + args.time_budget if args.time_budget else None
    chunks = [Chunk(args.seed, start, min(CHUNK, args.cases - start), deadline, plant,
                    args.two_cores)
              for start in range(0, args.cases, CHUNK)]
    executor = (f"scheduler {args.scheduler}" if args.scheduler
                else f"{args.jobs} process{'es' if args.jobs > 1 else ''}")
    mode = " (two cores through a hostile middlebox)" if args.two_cores else ""
    print(f"fuzz{mode}: seed {args.seed}, {args.cases} cases on {executor}"
          + (f" (planted defect: {plant})" if plant else ""), flush=True)
    try:
        outcomes = run_cases(run_chunk, chunks, jobs=args.jobs, scheduler=args.scheduler,
                             progress=Progress(len(chunks), "fuzz"))
    except ExecutorError as exc:
        raise CliError(str(exc)) from None
    seconds = time.time() - started
    ran = sum(o.result.ran for o in outcomes if o.result is not None)
    counts: dict[str, int] = {}
    shown: set[str] = set()
    failed = 0
    for chunk, outcome in zip(chunks, outcomes, strict=True):
        if outcome.result is None:
            failed += 1
            print(f"ERROR cases {chunk.start}..{chunk.start + chunk.count - 1}: "
                  f"{outcome.error}")
            continue
        for inv, n in outcome.result.counts:
            counts[inv] = counts.get(inv, 0) + n
        for failure in outcome.result.failures:
            inv = failure.violation.invariant
            if inv in shown:
                continue
            shown.add(inv)
            try:
                path = write_reproducer(Path(args.out), args.seed, failure, plant)
            except OSError as exc:
                raise CliError(f"cannot write a reproducer to {args.out}: "
                               f"{exc.strerror or exc}") from None
            print(f"FAIL {inv} (case {failure.index}, shrunk from {failure.original_steps} "
                  f"to {len(failure.script.steps)} steps): {failure.violation.message}")
            print(f"  reproducer: {path} and {path.with_suffix('.pcapng')}")
            print(f"  run: mpa-emu fuzz --reproduce {path}")
    escapes = counts.get("escape", 0)
    broken = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "none"
    rate = ran / seconds if seconds > 0 else float("inf")
    print(f"{ran} cases in {seconds:.1f} s ({rate:.0f} cases/s): {escapes} escapes; "
          f"failing cases by invariant: {broken}"
          + ("" if ran == args.cases else f"; time budget reached after {ran} of "
             f"{args.cases} cases"), flush=True)
    if sys.stdout.isatty() and counts:
        print(f"reproducers in {args.out}/")
    return 1 if counts or failed else 0
