"""One-line errors and truthful lines of the commands that read a capture: a
``--profile`` address that is in no connection, ``judge --checksums`` before the capture,
what ``diagram -p`` filtered, and the "wrote FILE" lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from mpa_emu.cli import main

ROOT = Path(__file__).resolve().parents[2]
V2_ACCEPT = ROOT / "pcaps" / "v2_accept.pcap"
# pcaps/README.md: initiator A 192.168.10.1, responder B 192.168.10.2.


@pytest.mark.parametrize("command", ["inspect", "explain"])
def test_a_profile_address_not_in_the_capture_is_a_one_line_error(
        command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, str(V2_ACCEPT), "--profile", "10.9.9.9=siw"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "--profile: 10.9.9.9 is not an address of any connection in" in err
    assert "192.168.10.1, 192.168.10.2" in err


@pytest.mark.parametrize("command", ["inspect", "explain"])
def test_a_profile_address_in_the_capture_is_taken(
        command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, str(V2_ACCEPT), "--profile", "192.168.10.1=irdma"]) == 0
    assert capsys.readouterr().err == ""
