"""The README's promises hold: its two set-up commands and its Python example."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mpa_emu.cm.events import ECONNREFUSED, IwEvent

ROOT = Path(__file__).resolve().parent.parent
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
