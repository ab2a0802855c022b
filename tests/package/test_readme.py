"""The README's promises hold: its two set-up commands and its Python example."""

from __future__ import annotations

import re
from errno import ECONNREFUSED
from pathlib import Path

import pytest
from mpa_emu.stacks.contract.events import IwEvent

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_starts_with_exactly_two_setup_commands() -> None:
    first_block = re.search(r"```sh\n(.*?)```", README, re.S)
    assert first_block is not None
    assert README.index("```sh") < README.index("## ")
    commands = [line for line in first_block.group(1).splitlines() if line.strip()]
    assert len(commands) == 2
    assert "mpa-emu demo" in commands[0]
    assert commands[1] == "bash tools/test.sh"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "tools/test.sh" in ci


def test_readme_python_example_runs_and_shows_the_reject(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    block = re.search(r"```python\n(.*?)```", README, re.S)
    assert block is not None
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(block.group(1), "README.md", "exec"), namespace)
    assert (tmp_path / "out.pcapng").stat().st_size > 0
    alice = namespace["alice"]
    replies = [u for u in alice.upcalls if u.event == IwEvent.CONNECT_REPLY]  # type: ignore[attr-defined]
    assert len(replies) == 1
    assert replies[0].status == -ECONNREFUSED
    assert replies[0].private_data.startswith(b"no resources")
    assert "CONNECT_REPLY -111" in capsys.readouterr().out


def _sh_blocks() -> list[str]:
    return re.findall(r"```sh\n(.*?)```", README, re.S)


@pytest.mark.source
@pytest.mark.slow(25)
def test_readme_commands_work_pasted_in_order_into_a_fresh_shell(tmp_path: Path) -> None:
    """The set-up command, then the first-steps block, exactly as written, in a bare shell
    (PATH without the virtual environment) in a copy of the project."""
    import os
    import shutil
    import subprocess

    for name in ("mpa_emu", "pyproject.toml", "setup.py", "build_backend.py", "README.md"):
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, tmp_path / name,
                            ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copyfile(source, tmp_path / name)
    setup, first_steps = _sh_blocks()[:2]
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.environ["HOME"],
           "LANG": "C.UTF-8", **{k: v for k, v in os.environ.items()
                                 if k.startswith(("PIP_", "WIRESHARK_", "XDG_"))}}
    # The first command compiles when a compiler is there (about two minutes). The test
    # command (tools/test.sh) makes its compiled build with that very command and runs
    # the whole suite on it (which fails if a module is not compiled); here the pure
    # package, so that the commands' sequence is checked without a second compile.
    env["MPA_EMU_COMPILE"] = "0"

    def shell(script: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=600, check=False)

    done = shell(setup.splitlines()[0])
    assert done.returncode == 0, done.stderr
    assert "wrote demo.pcapng" in done.stdout
    version = shell(".venv/bin/mpa-emu --version").stdout
    assert "pure Python (MPA_EMU_COMPILE=0)" in version
    assert shell("mpa-emu --help").returncode == 127  # not on PATH until activated
    done = shell(first_steps)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "MPA" in out and "PASS" in out
    assert "problems:\n  none" in out
    assert (tmp_path / "my-scenarios" / "v2_accept.toml").is_file()
    assert (tmp_path / "v2.svg").read_text(encoding="utf-8").startswith("<?xml")
    # The last command: tshark with the plugin, one row per MPA v2 request and reply.
    rows = [line.split("\t") for line in out.splitlines()[-2:]]
    assert all(len(row) == 3 and all(field.isdigit() for field in row) for row in rows), out
