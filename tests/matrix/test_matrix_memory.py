"""The matrix streams: ten times the cells cost at most 1.5 times the peak memory (each
cell's capture and ladder go to disk, JSON and HTML are written a cell at a time)."""

from __future__ import annotations

import contextlib
import json
import tracemalloc
from pathlib import Path

from mpa_emu.cli import main
from mpa_emu.matrix import CHUNK


def _peak(tmp: Path, repeats: int) -> int:
    argv = ["matrix", "--side", "irdma", "--side", "siw", "--captures", str(tmp / "caps"),
            "--json", str(tmp / "m.json"), "--html", str(tmp / "m.html")]
    for _ in range(repeats):
        argv += ["--scenario", "reject-pd0"]
    tmp.mkdir()
    tracemalloc.start()
    try:
        # the printed tables go to a file: what the test keeps is not the command's
        with open(tmp / "out.txt", "w") as out, contextlib.redirect_stdout(out):
            assert main(argv) == 0
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_ten_times_the_cells_costs_at_most_one_and_a_half_times_the_memory(
        tmp_path: Path) -> None:
    small = (CHUNK // 4) * 2  # whole chunks of 4 cells (2 sides squared) per scenario
    # Imports, first-use caches and the emulator's bounded tables (wire.interning's
    # SHARED_MAX values, the node settings' STEPS_MAX) are filled first: the test
    # measures the matrix in its steady state, as a long campaign runs.
    _peak(tmp_path / "warm", small * 10)
    base = _peak(tmp_path / "a", small)
    big = _peak(tmp_path / "b", small * 10)
    cells = json.loads((tmp_path / "b" / "m.json").read_text())["cells"]
    assert len(cells) == small * 10 * 4
    assert big <= 1.5 * base, (base, big)
