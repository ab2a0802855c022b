"""The stack of every side of a capture, read as inspect reads it (for ``diagram
--stacks`` and ``judge --stacks``)."""

from __future__ import annotations

from mpa_emu.judge.profile import Profiles
from mpa_emu.views.inspection.connections import stream_capture
from mpa_emu.views.inspection.report import CaptureReport


def address_stacks(path: str, profiles: Profiles | None = None
                   ) -> tuple[dict[str, list[str]], dict[int, list[str]]]:
    """Every IP address of a capture with the stacks its sides are judged as (in order of
    appearance), and by frame the errors each side's own stack finds there (``ERROR irdma
    initiator ... refuses ...``), read in one streamed pass as inspect reads it."""
    stacks: dict[str, list[str]] = {}
    errors: dict[int, list[str]] = {}
    report = CaptureReport(path=path)
    for conn in stream_capture(path, report, profiles=profiles):
        for side in conn.stacks:
            found = stacks.setdefault(side.address, [])
            if side.stack not in found:
                found.append(side.stack)
        for f in conn.findings:
            if f.severity == "error" and f.stack is not None and f.frame is not None:
                errors.setdefault(f.frame, []).append(f"ERROR {f.text}")
    return stacks, errors


def stack_lines(path: str, profiles: Profiles | None = None) -> list[str]:
    """``CLIENT -> SERVER: client siw (fingerprint), server irdma (profile)`` per
    connection of a capture, in first-frame order."""
    report = CaptureReport(path=path)
    lines: list[tuple[int, str]] = []
    for conn in stream_capture(path, report, profiles=profiles):
        sides = ", ".join(f"{s.side} {s.stack} ({s.source})" for s in conn.stacks)
        lines.append((conn.index, f"{conn.client} -> {conn.server}: {sides}"))
    return [text for _, text in sorted(lines)]
