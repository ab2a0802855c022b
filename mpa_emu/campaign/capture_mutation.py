"""A capture-mutation campaign: the reading commands on mutated copies of captures.

Run ``i`` of seed ``S`` (``random.Random(f"{S}:mutate:{i}")``) takes capture
``i mod n`` of the sources, changes it in one to three places (a byte flipped past the
Ethernet header, a frame cut short as a snap length cuts it, a frame dropped,
duplicated or swapped with the next, an MPA key or zeros written into a payload, the
TCP flags byte replaced), writes the copy as pcapng and runs one command on it through
the CLI, in turn: ``inspect``, ``explain`` and ``judge`` with no ``--profile`` or with
one of every stack name the judge knows, and ``diagram``. ``judge`` runs tshark, so it
takes every :data:`JUDGE_EVERY`-th run where tshark is installed.

The invariant: the command returns one of its documented exit codes (0, 1, 2) and no
exception escapes it (a traceback). Each failure keeps its mutated capture. The runner,
which calls the CLI, is
:func:`mpa_emu.cli.fuzz_captures.run_mutation_chunk` (the CLI sits above campaigns).
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from pathlib import Path

from mpa_emu.capture.pcap import CaptureRecord
from mpa_emu.judge.stacks import STACK_NAMES

KEY_REQ = b"MPA ID Req Frame"
COMMANDS = ("inspect", "explain", "diagram", "judge")
JUDGE_EVERY = 25
CHUNK = 40


@dataclass(frozen=True, slots=True)
class MutationChunk:
    """Runs ``start .. start + count - 1`` of ``seed`` over ``sources``; failures are
    copied into ``out``; no run starts past ``deadline``."""

    seed: int
    start: int
    count: int
    sources: tuple[str, ...]
    out: str
    tshark: bool = False
    deadline: float | None = None


@dataclass(slots=True)
class MutationResult:
    """Runs made per command, and each failure (a line naming the run and its file)."""

    ran: int = 0
    per_command: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


def capture_sources(folder: str | Path) -> list[str]:
    """Every pcap or pcapng under ``folder``, sorted."""
    root = Path(folder)
    return sorted(str(p) for p in root.rglob("*") if p.suffix in (".pcap", ".pcapng")
                  and p.is_file())


def mutate(records: list[CaptureRecord], rng: random.Random) -> tuple[
        list[tuple[int, bytes, int]], list[str]]:
    """The frames (time, bytes, original length) of a mutated copy, and what changed."""
    frames = [(r.time_ns or 0, bytes(r.frame), r.orig_len) for r in records]
    what: list[str] = []
    for _ in range(rng.randint(1, 3)):
        if not frames:
            break
        i = rng.randrange(len(frames))
        t, data, orig = frames[i]
        kind = rng.randrange(7)
        if kind == 0 and len(data) > 14:
            pos = rng.randrange(14, len(data))
            data = data[:pos] + bytes([data[pos] ^ (1 << rng.randrange(8))]) + data[pos + 1:]
            what.append(f"frame {i + 1}: bit flipped at byte {pos}")
        elif kind == 1 and len(data) > 20:
            cut = rng.randrange(14, len(data))
            what.append(f"frame {i + 1}: cut to {cut} of {orig} bytes")
            data = data[:cut]
        elif kind == 2:
            del frames[i]
            what.append(f"frame {i + 1} dropped")
            continue
        elif kind == 3:
            frames.insert(i, frames[i])
            what.append(f"frame {i + 1} duplicated")
            continue
        elif kind == 4 and i + 1 < len(frames):
            frames[i], frames[i + 1] = frames[i + 1], frames[i]
            what.append(f"frames {i + 1} and {i + 2} swapped")
            continue
        elif kind == 5 and len(data) > 54:
            pos = rng.randrange(54, len(data))
            filler = rng.choice([KEY_REQ, bytes(20), b"\xff" * 8])
            data = (data[:pos] + filler + data[pos + len(filler):])[:max(len(data), pos)]
            what.append(f"frame {i + 1}: {len(filler)} bytes written at {pos}")
        elif kind == 6 and len(data) > 47:
            data = data[:47] + bytes([rng.randrange(256)]) + data[48:]
            what.append(f"frame {i + 1}: TCP flags byte replaced")
        frames[i] = (t, data, max(orig, len(data)))
    return frames, what


def argv_of(command: str, path: str, rng: random.Random) -> list[str]:
    profile = rng.choice([None, *STACK_NAMES])
    extra = ["--profile", profile] if profile is not None and command != "diagram" else []
    if command == "diagram":
        return ["diagram", path, "-o", os.devnull]
    return [command, path, *extra]
