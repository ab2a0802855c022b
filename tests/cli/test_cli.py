"""The mpa-emu entry point: every subcommand answers --help, bad usage exits 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mpa_emu.cli import SUBCOMMANDS, main


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_every_subcommand_documents_itself(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([name, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: mpa-emu {name}")


def test_top_level_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for name in SUBCOMMANDS:
        assert name in out


def test_no_subcommand_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage: mpa-emu" in capsys.readouterr().out


def test_unknown_subcommand_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["no-such-command"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_python_dash_m_runs_the_same_entry_point() -> None:
    proc = subprocess.run([sys.executable, "-m", "mpa_emu", "kernel-map", "irdma_cm_reject"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "irdma_cm_reject" in proc.stdout


@pytest.mark.parametrize("name", sorted(set(SUBCOMMANDS) - {"demo"}))
def test_every_subcommand_help_lists_its_exit_codes(
        name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main([name, "--help"])
    out = capsys.readouterr().out
    codes = out[out.index("exit codes: "):]
    assert "0 " in codes and "2 " in codes
