"""The matrix streams: ten times the cells cost at most 1.5 times the peak memory (each
cell's capture and ladder go to disk, JSON and HTML are written a cell at a time).

Measured with tracemalloc in a fresh interpreter: the emulator's bounded tables
(wire.interning's SHARED_MAX values, the node settings' remembered steps) fill and clear
as connections come and go, so their share of a peak depends on everything run before in
the same process; a fresh process makes the measure the same at every run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mpa_emu.matrix import CHUNK

SCRIPT = """
import contextlib, json, sys, tracemalloc
from pathlib import Path
from mpa_emu.cli import main

def peak(tmp, repeats):
    tmp.mkdir()
    argv = ["matrix", "--side", "irdma", "--side", "siw", "--captures", str(tmp / "caps"),
            "--json", str(tmp / "m.json"), "--html", str(tmp / "m.html")]
    argv += ["--scenario", "reject-pd0"] * repeats
    tracemalloc.start()
    try:
        # the printed tables go to a file: what the test keeps is not the command's
        with open(tmp / "out.txt", "w") as out, contextlib.redirect_stdout(out):
            assert main(argv) == 0
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

root, small = Path(sys.argv[1]), int(sys.argv[2])
# Imports, first-use caches and the bounded tables are filled first: the test measures
# the matrix in its steady state, as a long campaign runs. The smaller run is already in
# it (whole chunks of cells); a matrix whose memory grows with its cells fills them
# further in the larger run, which is what the test is there to catch.
peak(root / "warm", small)
print(json.dumps([peak(root / "a", small), peak(root / "b", small * 10)]))
"""


@pytest.mark.memory
@pytest.mark.slow(9)
def test_ten_times_the_cells_costs_at_most_one_and_a_half_times_the_memory(
        tmp_path: Path) -> None:
    small = (CHUNK // 4) * 2  # whole chunks of 4 cells (2 sides squared) per scenario
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path), str(small)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    base, big = json.loads(proc.stdout.splitlines()[-1])
    cells = json.loads((tmp_path / "b" / "m.json").read_text())["cells"]
    assert len(cells) == small * 10 * 4
    assert big <= 1.5 * base, (base, big)
