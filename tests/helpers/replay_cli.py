"""``mpa-emu replay`` run in-process, as the replay tests use it."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

from mpa_emu.cli import main

PCAPS = Path(__file__).resolve().parents[2] / "pcaps"


def replay(path: Path, *args: str, tmp_path: Path) -> tuple[int, str, dict[str, Any]]:
    """``mpa-emu replay PATH ARGS --json REPORT``: the exit code, what it printed and the
    JSON report."""
    report = tmp_path / "report.json"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["replay", str(path), *args, "--json", str(report)])
    return rc, out.getvalue(), json.loads(report.read_text())
