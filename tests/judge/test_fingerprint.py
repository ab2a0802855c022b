"""The stack decided from what a side put on the wire; every expectation follows from a
fact of the kernel source the fingerprint module cites (irdma_send_syn's options and
window, tcp_syn_options, irdma always setting C and P2P, cxgb4's peer2peer with p2p_type
Read, siw's peer_to_peer off and MPA_RR_FLAG_GSO_EXP)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.inspect_builders import Conversation, write_pcap
from helpers.real_like_captures import KEY_REP, KEY_REQ
from helpers.stack_captures import (
    CXGB4_SYN,
    IRDMA_REQUEST,
    LINUX_SYN,
    LINUX_SYNACK,
    SIW_REQUEST,
    block,
    mpa,
)

from mpa_emu.views.inspection import inspect_capture

ROOT = Path(__file__).resolve().parents[2]


def _stacks(tmp_path: Path, conv: Conversation) -> list[str]:
    (conn,) = inspect_capture(write_pcap(tmp_path / "f.pcap", conv)).connections
    return [s.stack for s in conn.stacks]


def test_the_emulators_own_irdma_captures_are_irdma() -> None:
    (conn,) = inspect_capture(ROOT / "pcaps" / "v2_accept.pcap").connections
    assert [s.stack for s in conn.stacks] == ["irdma", "irdma"]


@pytest.mark.parametrize("name", ["real_peer_v2", "real_v1_crc_on", "real_peer_v1_no_crc"])
def test_userspace_peers_over_linux_sockets(name: str) -> None:
    # pcaps/real/README.md: Linux TCP endpoints, the MPA spoken by `mpa-emu peer` over
    # kernel sockets: a userspace iWARP library, not siw's defaults.
    conn = inspect_capture(ROOT / "pcaps" / "real" / f"{name}.pcap").connections[0]
    assert conn.stacks[0].stack == "linux-userspace"


def test_cxgb4_request_shape(tmp_path: Path) -> None:
    # cxgb4: MSS and WS only in the SYN, C (crc_enabled), P2P offering only the Read RTR
    # (peer2peer=1, p2p_type=1).
    conv = Conversation(client="10.0.4.1", server="10.0.4.2").handshake(CXGB4_SYN,
                                                                         LINUX_SYNACK)
    conv.client_sends(mpa(KEY_REQ, 0x50, 2, block(16, 16, p2p=True, read=True)))
    assert _stacks(tmp_path, conv)[0] == "cxgb4"


def test_siws_gso_flag(tmp_path: Path) -> None:
    conv = Conversation(client="10.0.4.1", server="10.0.4.2").handshake(LINUX_SYN,
                                                                         LINUX_SYNACK)
    conv.client_sends(mpa(KEY_REQ, 0x18, 2, block(16, 16)))
    (conn,) = inspect_capture(write_pcap(tmp_path / "g.pcap", conv)).connections
    assert conn.stacks[0].stack == "siw"
    assert any("MPA_RR_FLAG_GSO_EXP" in e for e in conn.stacks[0].evidence)


def test_siw_responder_choosing_write_answering_irdma(tmp_path: Path) -> None:
    # siw_proc_mpareq: a P2P request gets P2P back, Write chosen when offered.
    conv = Conversation(client="10.0.4.1", server="10.0.4.2").handshake(
        [("MSS", 1460), ("WScale", 2)], LINUX_SYNACK)
    conv.client_sends(IRDMA_REQUEST)
    conv.server_sends(mpa(KEY_REP, 0x50, 2, block(16, 16, p2p=True, write=True)))
    assert _stacks(tmp_path, conv) == ["irdma", "siw"]


def test_siw_request_without_a_syn_in_the_capture(tmp_path: Path) -> None:
    conv = Conversation(client="10.0.4.1", server="10.0.4.2")
    conv.client_sends(SIW_REQUEST)
    assert _stacks(tmp_path, conv)[0] == "siw"


def test_a_terminate_in_siws_bit_field_layout_points_to_siw(tmp_path: Path) -> None:
    # struct iwarp_terminate (siw's iwarp.h) on a little-endian host: Layer in the low
    # nibble of byte 0, EType in the high one, the code in byte 1, M/D/R in bits 0-2 of
    # byte 2. Layer DDP (1), EType untagged (2), code 0x02, D set, an untagged DDP
    # header (18 bytes) quoted after the segment length: only siw's reading of the
    # header-control bits announces exactly those bytes.
    import struct

    from helpers.real_like_captures import send
    from helpers.stack_captures import no_crc

    quoted = bytes([0x41, 0x43]) + struct.pack("!IIII", 0, 0, 1, 0)
    body = bytes([0x21, 0x02, 0x02, 0x00]) + struct.pack("!H", 18) + quoted
    term = bytes([0x41, 0x47]) + struct.pack("!IIII", 0, 2, 1, 0) + body
    conv = Conversation(client="10.0.4.1", server="10.0.4.2").handshake(LINUX_SYN,
                                                                         LINUX_SYNACK)
    conv.client_sends(mpa(KEY_REQ, 0x40, 2, block(16, 16, p2p=True, read=True)))
    conv.server_sends(mpa(KEY_REP, 0x40, 2, block(16, 16, p2p=True, read=True)))
    conv.client_sends(no_crc(send(1, b"s" * 20)))
    conv.server_sends(no_crc(term))
    (conn,) = inspect_capture(write_pcap(tmp_path / "t.pcap", conv)).connections
    server = conn.stacks[1]
    assert any("siw's little-endian bit-field layout" in e for e in server.evidence)
    assert server.stack == "siw"
