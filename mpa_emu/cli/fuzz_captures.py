"""``mpa-emu fuzz --mutate-captures DIR``: the reading commands on mutated captures
(:mod:`mpa_emu.campaign.capture_mutation`)."""

from __future__ import annotations

import argparse
import shutil
import time

from mpa_emu.cli import CliError


def run_mutations(args: argparse.Namespace) -> int:
    """Run ``--cases`` mutation runs over the captures in ``--mutate-captures``; exit 1
    when a command escaped with a traceback or an undocumented exit code."""
    from mpa_emu.campaign.capture_mutation import (
        CHUNK,
        MutationChunk,
        capture_sources,
        run_mutation_chunk,
    )
    from mpa_emu.campaign.executor import ExecutorError, Progress, run_cases

    sources = tuple(capture_sources(args.mutate_captures))
    if not sources:
        raise CliError(f"--mutate-captures {args.mutate_captures}: no .pcap or .pcapng "
                       "files there")
    started = time.time()
    deadline = started + args.time_budget if args.time_budget else None
    tshark = shutil.which("tshark") is not None
    chunks = [MutationChunk(args.seed, start, min(CHUNK, args.cases - start), sources,
                            args.out, tshark, deadline)
              for start in range(0, args.cases, CHUNK)]
    print(f"fuzz (mutated captures): seed {args.seed}, {args.cases} runs over "
          f"{len(sources)} captures" + ("" if tshark else " (no tshark: judge left out)"),
          flush=True)
    try:
        outcomes = run_cases(run_mutation_chunk, chunks, jobs=args.jobs,
                             scheduler=args.scheduler, progress=Progress(len(chunks), "fuzz"))
    except ExecutorError as exc:
        raise CliError(str(exc)) from None
    ran, failures, errors = 0, 0, 0
    per: dict[str, int] = {}
    for chunk, outcome in zip(chunks, outcomes, strict=True):
        if outcome.result is None:
            errors += 1
            print(f"ERROR runs {chunk.start}..{chunk.start + chunk.count - 1}: "
                  f"{outcome.error}")
            continue
        ran += outcome.result.ran
        for command, n in outcome.result.per_command.items():
            per[command] = per.get(command, 0) + n
        for line in outcome.result.failures:
            failures += 1
            print(f"FAIL {line}")
    seconds = time.time() - started
    counts = ", ".join(f"{n} {c}" for c, n in sorted(per.items()))
    print(f"{ran} runs ({counts}) in {seconds:.1f} s: {failures} failing", flush=True)
    return 1 if failures or errors else 0
