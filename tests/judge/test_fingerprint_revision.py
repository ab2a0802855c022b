"""The fingerprint names the stack whose own MPA revision a frame carries
(Fingerprint.revision): erdma's requests and replies are of revision 129
(MPA_REVISION_EXT_1) with the 8-byte struct erdma_mpa_ext after the header
(erdma_send_mpareqrep in erdma_cm.c), which no other stack writes. The frames are laid
out byte by byte from erdma_cm.h; the SYNs are a Linux socket's (erdma_connect makes a
kernel socket: tcp_syn_options)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from helpers.inspect_builders import Conversation, write_pcap

from mpa_emu.judge import fingerprint
from mpa_emu.stacks import STACKS
from mpa_emu.stacks.base import Fingerprint, RevisionMark
from mpa_emu.views.inspection import inspect_capture

LINUX_SYN = [("MSS", 1460), ("SAckOK", b""), ("Timestamp", (1, 0)), ("NOP", None),
             ("WScale", 7)]
# bits 0x0081 (MPA_REVISION_EXT_1, no flag), pd_len, cookie, ext bits (CC), private data
REQUEST = b"MPA ID Req Frame" + bytes.fromhex("0081" "0002" "00000001" "00000001") + b"hi"
REPLY = b"MPA ID Rep Frame" + bytes.fromhex("0081" "0002" "00000002" "00000001") + b"ok"
# The same header without the extension: revision 129 alone is not erdma's frame.
BARE = b"MPA ID Req Frame" + bytes.fromhex("0081" "0002") + b"hi"

ERDMA_MARK = RevisionMark(129, 8, "of revision 129 with an 8-byte extension after the "
                          "header (erdma_send_mpareqrep: MPA_REVISION_EXT_1, struct "
                          "erdma_mpa_ext)", 6)


@pytest.fixture
def erdma_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """erdma in the fingerprint's registry: the registered stack when it is there, else
    a stand-in with siw's record (a Linux socket too) and erdma's revision mark."""
    if "erdma" in STACKS:
        return
    siw = STACKS["siw"]
    weights = dataclasses.replace(siw.fingerprint.weights, mpa_rev1=-3)
    stand_in = dataclasses.replace(siw, name="erdma", fingerprint=Fingerprint(
        syn=None, flag=None, revision=ERDMA_MARK, weights=weights))
    stacks = {**STACKS, "erdma": stand_in}
    monkeypatch.setattr(fingerprint, "STACKS", stacks)
    monkeypatch.setattr(fingerprint, "_WEIGHTS", (
        *((n, s.fingerprint.weights) for n, s in stacks.items()),
        (fingerprint.LINUX_USERSPACE, fingerprint.USERSPACE)))
    monkeypatch.setattr(fingerprint, "_CANDIDATES",
                        tuple(n for n, _ in fingerprint._WEIGHTS))


def _sides(tmp_path: Path, request: bytes, reply: bytes | None) -> list[str]:
    conv = Conversation().handshake(LINUX_SYN, LINUX_SYN).client_sends(request)
    conv = conv.ack_from_server()
    if reply is not None:
        conv = conv.server_sends(reply).ack_from_client()
    report = inspect_capture(write_pcap(tmp_path / "c.pcap", conv))
    (conn,) = report.connections
    return [s.stack for s in conn.stacks]


@pytest.mark.usefixtures("erdma_registered")
def test_request_and_reply_of_revision_129_with_the_extension_name_erdma(
        tmp_path: Path) -> None:
    assert _sides(tmp_path, REQUEST, REPLY) == ["erdma", "erdma"]


@pytest.mark.usefixtures("erdma_registered")
def test_revision_129_without_the_extension_does_not_name_erdma(tmp_path: Path) -> None:
    assert "erdma" not in _sides(tmp_path, BARE, None)


def test_the_ietf_stacks_write_no_revision_of_their_own() -> None:
    for name in ("irdma", "siw", "cxgb4"):
        assert STACKS[name].fingerprint.revision is None
