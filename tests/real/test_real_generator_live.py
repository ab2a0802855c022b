"""tools/make_real_captures.py still runs end to end (root, namespaces, tcpdump) and makes
captures with the committed captures' structure: same connections, MPA revisions, flags,
FPDU opcodes and CRC kinds (bytes, times, ISNs and ports differ per run)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "pcaps" / "real"

pytestmark = [pytest.mark.live,
              pytest.mark.skipif(os.geteuid() != 0 or shutil.which("tcpdump") is None,
                                 reason="needs root and tcpdump")]


def shape(side: dict[str, Any]) -> list[Any]:
    out = []
    for conn in side["connections"]:
        mpa = conn["mpa"]
        if mpa is None:
            out.append(None)
            continue
        out.append({kind: (mpa[kind]["rev"], mpa[kind]["flags"], mpa[kind]["pd_length"])
                    for kind in ("request", "reply")}
                   | {"fpdus": [(f["from"], f["opcode"], f["crc"]) for f in conn["fpdus"]]})
    return out


@pytest.mark.parametrize("name", ["real_v1_crc_off_zero_crc", "real_second_non_mpa_conn"])
def test_generator_reproduces_the_structure(name: str, tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(ROOT / "tools" / "make_real_captures.py"),
                    "--out", str(tmp_path), name], check=True, timeout=120)
    fresh = json.loads((tmp_path / f"{name}.json").read_text())
    committed = json.loads((REAL / f"{name}.json").read_text())
    assert shape(fresh) == shape(committed)
    assert fresh["checksums"]["offload_partial"]
    assert [r["from"] for c in fresh["connections"] for r in c["rsts"]] == \
        [r["from"] for c in committed["connections"] for r in c["rsts"]]
