"""inspect on captures shaped like third-party traffic (SMB Direct over siw, a siw
Terminate, a DDP version 0 Send): the expected side comes from the bytes
``helpers.third_party_captures`` writes and from RFC 5040/5041/6581."""

from __future__ import annotations

from pathlib import Path

from helpers.third_party_captures import (
    READ_SEGMENT,
    READ_SEGMENTS,
    READ_STAG,
    READ_TO,
    SMB_FRAMES,
    smb_direct_siw,
)

from mpa_emu.views.inspection import inspect_capture


def test_server_read_request_is_answered_by_the_client_read_responses(tmp_path: Path) -> None:
    (conn,) = inspect_capture(smb_direct_siw(tmp_path / "smb.pcap")).connections
    read = next(i for i in conn.fpdu_list if i.frame == SMB_FRAMES["read_request"])
    assert (read.side, read.stag, read.to, read.read_size) == (
        "server", READ_STAG, READ_TO, READ_SEGMENTS * READ_SEGMENT)
    responses = [i for i in conn.fpdu_list if i.what.startswith("RDMA Read Response")]
    assert [i.frame for i in responses] == list(range(SMB_FRAMES["first_response"],
                                                      SMB_FRAMES["last_response"] + 1))
    assert not [f for f in conn.findings if "never answered" in f.text]
    assert not [f for f in conn.findings if "Read Response" in f.text]


def test_fpdus_are_listed_in_frame_order(tmp_path: Path) -> None:
    (conn,) = inspect_capture(smb_direct_siw(tmp_path / "smb.pcap")).connections
    frames = [i.frame for i in conn.fpdu_list]
    assert frames == sorted(frames)


def test_a_read_answered_only_in_part_or_at_another_offset_stays_open(tmp_path: Path) -> None:
    path = smb_direct_siw(tmp_path / "smb.pcap")
    from scapy.utils import rdpcap, wrpcap
    frames = list(rdpcap(str(path)))
    # Drop the last Read Response segment: 11,000 of 12,000 bytes arrive, none with L.
    last = SMB_FRAMES["last_response"]
    del frames[last - 1:]
    wrpcap(str(tmp_path / "cut.pcap"), frames)
    (conn,) = inspect_capture(tmp_path / "cut.pcap").connections
    (open_read,) = [f for f in conn.findings if "never answered" in f.text]
    assert open_read.frame == SMB_FRAMES["read_request"]
    assert f"{(READ_SEGMENTS - 1) * READ_SEGMENT} of {READ_SEGMENTS * READ_SEGMENT} bytes" \
        in open_read.text
