"""inspect's SMB Direct reading agrees with tshark's own smb_direct dissector (which
Wireshark runs on iWARP Sends once the MPA heuristic has the connection), message by
message: the Negotiate Request's and Response's sizes, versions and credits, and the
data messages' credits, offsets and lengths. The captures are written by
helpers.ulp_captures from [MS-SMBD]."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import ulp_captures as caps

from mpa_emu.views.inspection import inspect_capture

pytestmark = pytest.mark.tshark

FIELDS = ["frame.number", "smb_direct.version.min", "smb_direct.version.max",
          "smb_direct.credits.requested", "smb_direct.credits.granted",
          "smb_direct.preferred_send_size", "smb_direct.max_receive_size",
          "smb_direct.max_fragmented_size", "smb_direct.max_read_write_size",
          "smb_direct.remaining_length", "smb_direct.data_offset", "smb_direct.data_length"]
OURS = {"smb_direct.version.min": "min_version", "smb_direct.version.max": "max_version",
        "smb_direct.credits.requested": "credits_requested",
        "smb_direct.credits.granted": "credits_granted",
        "smb_direct.preferred_send_size": "preferred_send_size",
        "smb_direct.max_receive_size": "max_receive_size",
        "smb_direct.max_fragmented_size": "max_fragmented_size",
        "smb_direct.max_read_write_size": "max_read_write_size",
        "smb_direct.remaining_length": "remaining_data_length",
        "smb_direct.data_offset": "data_offset", "smb_direct.data_length": "data_length"}


@pytest.fixture(autouse=True)
def _need_tshark() -> None:
    if shutil.which("tshark") is None:
        pytest.fail("tshark is required")


def tshark_rows(capture: Path) -> dict[int, dict[str, str]]:
    proc = subprocess.run(
        ["tshark", "-r", str(capture), "-o", "tcp.try_heuristic_first:TRUE",
         "--enable-heuristic", "iwarp_mpa_tcp", "-T", "fields", "-E", "header=y",
         "-E", "occurrence=f", *[a for f in FIELDS for a in ("-e", f)]],
        capture_output=True, text=True, check=True)
    lines = proc.stdout.splitlines()
    header = lines[0].split("\t")
    out = {}
    for line in lines[1:]:
        row = dict(zip(header, line.split("\t"), strict=True))
        if any(row[f] for f in FIELDS[1:]):
            out[int(row["frame.number"])] = row
    return out


def _int(text: str) -> int:
    return int(text, 16) if text.startswith("0x") else int(text)


def test_each_message_as_tshark_reads_it(tmp_path: Path) -> None:
    path = caps.smbd_healthy(tmp_path / "smbd.pcap")
    theirs = tshark_rows(path)
    (conn,) = inspect_capture(path).connections
    assert conn.ulp is not None
    ours = {m.frame: m for m in conn.ulp.messages}
    assert set(theirs) == set(ours)
    compared = 0
    for frame, row in theirs.items():
        for field, name in OURS.items():
            if row[field] and name in ours[frame].fields:
                assert _int(row[field]) == ours[frame].fields[name], (frame, field)
                compared += 1
    assert compared >= 20
