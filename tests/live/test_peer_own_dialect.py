"""``mpa-emu peer --stack NAME`` for a stack whose MPA frames are not RFC 5044's layout:
erdma writes revision 129 (MPA_REVISION_EXT_1) with the 8-byte struct erdma_mpa_ext after
the header that PD_Length does not count (erdma_send_mpareqrep), which the peer's
framing (PeerFraming: revision, C, P2P, RTR, private data limit) cannot express. The
peer refuses it in one line and exit 2, before any connection."""

from __future__ import annotations

import dataclasses

import pytest

from mpa_emu.cli import main
from mpa_emu.stacks import STACKS
from mpa_emu.stacks.base import Fingerprint, PeerFraming, RevisionMark


@pytest.fixture
def erdma_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """erdma in the registry: the registered stack, else a stand-in with erdma's framing
    (erdma_newconn_connected: revision 129, no C, no P2P, no RTR, 256 bytes of private
    data) and its revision mark."""
    if "erdma" in STACKS:
        return
    siw = STACKS["siw"]

    def framing(p: object) -> PeerFraming:
        del p
        return PeerFraming(129, False, False, "none", 256, "none", False)

    mark = RevisionMark(129, 8, "of revision 129 with an 8-byte extension", 6)
    stand_in = dataclasses.replace(
        siw, name="erdma", peer_framing=framing,
        fingerprint=Fingerprint(syn=None, flag=None, revision=mark,
                                weights=siw.fingerprint.weights))
    monkeypatch.setitem(STACKS, "erdma", stand_in)


@pytest.mark.usefixtures("erdma_registered")
def test_peer_refuses_a_stack_of_its_own_dialect_in_one_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["peer", "--connect", "192.0.2.1:1", "--stack", "erdma"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "revision 129" in err and "8 bytes after the header" in err
    assert "revisions 1 and 2 only" in err


def test_peer_still_frames_the_rfc_stacks(capsys: pytest.CaptureFixture[str]) -> None:
    # siw's framing is RFC 6581's: the options are accepted, and the connection to a
    # port nothing listens on is the peer's own error (exit 1), not a refused --stack.
    assert main(["peer", "--connect", "127.0.0.1:9", "--stack", "siw",
                 "--timeout", "1"]) != 2
    assert "--stack" not in capsys.readouterr().err
