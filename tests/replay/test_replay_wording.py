"""The words of replay's report say what happened: an application that was told nothing
is told "nothing", not "nothing more"."""

from __future__ import annotations

from pathlib import Path

from helpers.replay_cli import replay
from helpers.third_party_captures import SERVER, smb_direct_siw


def test_an_application_told_nothing_is_not_told_nothing_more(tmp_path: Path) -> None:
    # siw's request has no P2P bit: irdma_parse_mpa refuses it (-EOPNOTSUPP) before any
    # upcall, so irdma's listener hears of no CONNECT_REQUEST; the recorded server did.
    path = smb_direct_siw(tmp_path / "smb.pcap")
    rc, out, report = replay(path, "--emulate", SERVER, "--semantic", tmp_path=tmp_path)
    assert rc == 1
    assert report["upcalls"] == []
    first = next(line for line in out.splitlines() if line.startswith("first divergence:"))
    assert "irdma tells the application nothing (" in first
    assert "nothing more" not in first
