"""The example scenarios and the Lua plugin ship inside the package: a wheel built from
the project carries them, ``mpa-emu examples`` lists and copies them, and building prints
no setuptools warnings."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from mpa_emu.cli import main

ROOT = Path(__file__).resolve().parents[2]
SOURCE_EXAMPLES = sorted(p.name for p in (ROOT / "mpa_emu" / "examples").glob("*.toml"))


def test_examples_lists_every_scenario_with_its_description(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["examples"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("example scenarios in ") and lines[0].endswith("examples:")
    assert [line.split()[0] for line in lines[1:]] == SOURCE_EXAMPLES
    v2 = next(line for line in lines if line.split()[0] == "v2_accept.toml")
    assert "MPA v2 with private data both ways" in v2  # its description = "..." line


def test_copy_writes_identical_files_and_never_overwrites(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "mine"
    assert main(["examples", "--copy", str(target)]) == 0
    assert capsys.readouterr().out.strip() == (
        f"copied {len(SOURCE_EXAMPLES)} example scenarios into {target}")
    assert sorted(p.name for p in target.iterdir()) == SOURCE_EXAMPLES
    for name in SOURCE_EXAMPLES:
        assert (target / name).read_bytes() == (ROOT / "mpa_emu" / "examples" / name).read_bytes()
    (target / "v2_accept.toml").write_text("# edited\n", encoding="utf-8")
    assert main(["examples", "--copy", str(target)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"mpa-emu examples: error: {target / 'address_removal.toml'} already "
                   "exists; nothing copied (choose an empty folder)"]
    assert (target / "v2_accept.toml").read_text(encoding="utf-8") == "# edited\n"


def test_copied_example_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["examples", "--copy", str(tmp_path)]) == 0
    assert main(["run", str(tmp_path / "v2_accept.toml"), "-q"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("PASS: ")


def test_wireshark_plugin_dir_needs_install(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["wireshark-plugin", "--dir", "x"]) == 2
    assert capsys.readouterr().err.strip() == (
        "mpa-emu wireshark-plugin: error: --dir needs --install")


@pytest.mark.source
@pytest.mark.slow(8)
def test_a_built_wheel_carries_examples_and_plugin_without_warnings(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path),
         str(ROOT)], capture_output=True, text=True, check=False,
        # The pure wheel carries the same files; compiling (minutes) is the README
        # test's part, in the run on the pure package.
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "MPA_EMU_COMPILE": "0"})
    assert built.returncode == 0, built.stderr
    assert "Warning" not in built.stderr and "!!" not in built.stderr, built.stderr
    (wheel,) = tmp_path.glob("mpa_emu-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"mpa_emu/examples/{n}" for n in SOURCE_EXAMPLES} <= names
    assert "mpa_emu/wireshark/mpa_v2.lua" in names
    assert not any(n.startswith(("tests/", "tools/")) for n in names)
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(target), str(wheel)], check=True, capture_output=True)
    env = {**os.environ, "PYTHONPATH": str(target)}
    for argv, expected in ((["examples", "--path"], "mpa_emu/examples"),
                           (["wireshark-plugin"], "mpa_emu/wireshark/mpa_v2.lua")):
        out = subprocess.run([sys.executable, "-m", "mpa_emu", *argv], capture_output=True,
                             text=True, check=True, cwd=tmp_path, env=env).stdout.strip()
        assert Path(out) == target / expected
    # The --html reports come from the installed package alone: a copied example run and
    # inspected with the wheel's code, outside the source tree.
    subprocess.run([sys.executable, "-m", "mpa_emu", "examples", "--copy", "ex"],
                   capture_output=True, text=True, check=True, cwd=tmp_path, env=env)
    scenario = tmp_path / "ex" / "v2_accept.toml"
    for argv in (["run", str(scenario), "-o", "run.pcapng", "--html", "run.html"],
                 ["inspect", "run.pcapng", "--html", "inspect.html"]):
        done = subprocess.run([sys.executable, "-m", "mpa_emu", *argv], capture_output=True,
                              text=True, check=False, cwd=tmp_path, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
    for page in ("run.html", "inspect.html"):
        text = (tmp_path / page).read_text()
        assert "<svg" in text and "http://" not in text.replace("http://www.w3.org", "")
