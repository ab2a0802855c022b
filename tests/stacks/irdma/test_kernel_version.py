"""The kernel release the model follows is pinned once (mpa_emu.stacks.irdma.kernel_map) and named
the same in docs/kernel-behaviour.md and in ``mpa-emu kernel-map --help``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mpa_emu.cli import main
from mpa_emu.stacks.irdma.kernel_map import KERNEL_VERSION

ROOT = Path(__file__).resolve().parents[3]


def test_the_version_is_a_mainline_release_number() -> None:
    assert re.fullmatch(r"[1-9]\d*\.\d+", KERNEL_VERSION)


def test_the_kernel_behaviour_page_names_the_same_release() -> None:
    page = (ROOT / "docs" / "kernel-behaviour.md").read_text(encoding="utf-8")
    named = re.findall(r"mainline \*\*Linux (\d+\.\d+)\*\*", page)
    assert named == [KERNEL_VERSION]


def test_the_kernel_map_help_names_it(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["kernel-map", "--help"])
    assert (f"--stack irdma: drivers/infiniband/hw/irdma/cm.c, mainline Linux {KERNEL_VERSION}."
            in capsys.readouterr().out)
