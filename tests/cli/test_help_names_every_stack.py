"""The help texts that list the stacks list every registered one (read from the
registry, :data:`mpa_emu.stacks.STACKS`), so a new stack is named without editing them."""

from __future__ import annotations

import pytest

from mpa_emu.cli import main
from mpa_emu.stacks import STACKS


@pytest.mark.parametrize("command", ["matrix", "replay", "inspect"])
def test_help_names_every_registered_stack(command: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for name in STACKS:
        assert name in text, (command, name)


def test_the_top_level_help_names_every_stack_for_the_matrix(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"iWARP stacks ({', '.join(STACKS)})" in text
