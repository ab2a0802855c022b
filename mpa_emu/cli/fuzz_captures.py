"""``mpa-emu fuzz --mutate-captures DIR``: the reading commands on mutated captures
(:mod:`mpa_emu.campaign.capture_mutation`)."""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import tempfile
import time
import traceback
from collections.abc import Sequence

from mpa_emu.campaign.capture_mutation import (
    COMMANDS,
    JUDGE_EVERY,
    MutationChunk,
    MutationResult,
    argv_of,
    mutate,
)
from mpa_emu.capture.pcap import CaptureError, PcapngWriter, read_capture
from mpa_emu.cli import CliError, main


def run_mutations(args: argparse.Namespace) -> int:
    """Run ``--cases`` mutation runs over the captures in ``--mutate-captures``; exit 1
    when a command escaped with a traceback or an undocumented exit code."""
    from mpa_emu.campaign.capture_mutation import CHUNK, capture_sources
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


def run_mutation_chunk(chunk: MutationChunk) -> MutationResult:
    """Run a chunk of mutation runs (picklable in and out)."""
    out = MutationResult()
    with tempfile.TemporaryDirectory(prefix="mpa-emu-mutate-") as tmp:
        for index in range(chunk.start, chunk.start + chunk.count):
            if chunk.deadline is not None and time.time() > chunk.deadline:
                break
            rng = random.Random(f"{chunk.seed}:mutate:{index}")
            source = chunk.sources[index % len(chunk.sources)]
            try:
                records = list(read_capture(source))
            except CaptureError:
                continue
            frames, what = mutate(records, rng)
            path = os.path.join(tmp, f"run{index}.pcapng")
            with open(path, "wb") as f:
                writer = PcapngWriter(f, application="mpa-emu fuzz --mutate-captures")
                writer.add_interface("mutated")
                for t, data, orig in frames:
                    writer.write(t, data, orig_len=orig)
                writer.flush()
            commands = [c for c in COMMANDS if c != "judge"
                        or (chunk.tshark and index % JUDGE_EVERY == 0)]
            command = commands[index % len(commands)] if index % JUDGE_EVERY or \
                not chunk.tshark else "judge"
            argv = argv_of(command, path, rng)
            out.ran += 1
            out.per_command[command] = out.per_command.get(command, 0) + 1
            problem = _run(argv)
            if problem:
                kept = os.path.join(chunk.out, f"mutated-{chunk.seed}-{index}.pcapng")
                with contextlib.suppress(OSError):
                    os.makedirs(chunk.out, exist_ok=True)
                    shutil.copyfile(path, kept)
                out.failures.append(f"run {index} ({os.path.basename(source)}: "
                                    f"{'; '.join(what)}): mpa-emu {' '.join(argv[:1] + argv[2:])}"
                                    f" {kept}: {problem}")
            os.unlink(path)
    return out


def _run(argv: Sequence[str]) -> str:
    """"" when the command ended with a documented exit code, else what went wrong."""
    with open(os.devnull, "w", encoding="utf-8") as sink, \
            contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        try:
            code: int | str | None = main(list(argv))
        except SystemExit as exc:
            code = exc.code
        except Exception as exc:  # every escape is the finding
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            return (f"traceback: {type(exc).__name__}: {exc} "
                    f"({os.path.basename(frame.filename)}:{frame.lineno} {frame.name})")
    if code not in (0, 1, 2):
        return f"exit code {code}"
    return ""
