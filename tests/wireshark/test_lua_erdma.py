"""The Lua plugin's erdma fields (mpa_emu.erdma.*) under tshark, on frames laid out as
erdma_cm.h declares them: ``struct mpa_rr`` (the 16-byte key, ``__be16 bits`` whose low
byte is the revision, ``__be16 pd_len``), then ``struct erdma_mpa_ext`` (``__be32
cookie``, ``__be32 bits``, MPA_EXT_FLAG_CC its low four bits) that pd_len does not
count, then the private data. The expected values are these bytes, not the plugin's
output."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.inspect_builders import Conversation, write_pcap

pytestmark = pytest.mark.tshark

PLUGIN = Path(__file__).resolve().parents[2] / "mpa_emu" / "wireshark" / "mpa_v2.lua"
FIELDS = ["frame.number", "mpa_emu.erdma", "mpa_emu.erdma.cookie", "mpa_emu.erdma.bits",
          "mpa_emu.erdma.cc", "mpa_emu.erdma.private_data",
          "mpa_emu.erdma.private_data_len", "mpa_emu.erdma.private_data_text",
          "mpa_v2.request", "iwarp_mpa.legacy.ird"]

KEY_REQ = b"MPA ID Req Frame"
KEY_REP = b"MPA ID Rep Frame"
# bits 0x0081: no M, C or R flag, MPA_REVISION_EXT_1 (129); pd_len 5; cookie 0x12345678;
# ext bits 0x00000002 (ERDMA_CC_HPCC_RTT); then the private data.
REQUEST = KEY_REQ + bytes.fromhex("0081" "0005" "12345678" "00000002") + b"hello"
# The reply: cookie 0x00000010, CC 1 (ERDMA_CC_CUBIC), 8 bytes of private data (the size
# of [MS-SMBD] 6.1's header, which the extension must not be read as).
REPLY = KEY_REP + bytes.fromhex("0081" "0008" "00000010" "00000001") + b"accepted"
# A reject (bits 0x2081: MPA_RR_FLAG_REJECT) with no private data.
REJECT = KEY_REP + bytes.fromhex("2081" "0000" "00000000" "00000000")


def rows(capture: Path) -> dict[int, dict[str, str]]:
    proc = subprocess.run(
        ["tshark", "-r", str(capture), "-o", "tcp.try_heuristic_first:TRUE",
         "--enable-heuristic", "iwarp_mpa_tcp", "-X", f"lua_script:{PLUGIN}",
         "-T", "fields", "-E", "header=y", *[a for f in FIELDS for a in ("-e", f)]],
        capture_output=True, text=True, check=True)
    assert "Lua: Error" not in proc.stderr, proc.stderr
    lines = proc.stdout.splitlines()
    header = lines[0].split("\t")
    out = {}
    for line in lines[1:]:
        row = dict(zip(header, line.split("\t"), strict=True))
        if row["mpa_emu.erdma"]:
            out[int(row["frame.number"])] = row
    return out


@pytest.fixture(autouse=True)
def _need_tshark() -> None:
    if shutil.which("tshark") is None:
        pytest.fail("tshark is required for the Lua plugin tests (tools/test.sh installs it)")


def test_request_and_reply_show_the_extension_and_the_private_data_after_it(
        tmp_path: Path) -> None:
    conv = (Conversation().handshake().client_sends(REQUEST).ack_from_server()
            .server_sends(REPLY).ack_from_client())
    found = rows(write_pcap(tmp_path / "erdma.pcap", conv))
    assert sorted(found) == [4, 6]
    req, rep = found[4], found[6]
    assert (req["mpa_emu.erdma"], req["mpa_emu.erdma.cookie"], req["mpa_emu.erdma.bits"],
            req["mpa_emu.erdma.cc"]) == ("request", "0x12345678", "0x00000002", "2")
    assert req["mpa_emu.erdma.private_data"] == b"hello".hex()
    assert req["mpa_emu.erdma.private_data_len"] == "5"
    assert req["mpa_emu.erdma.private_data_text"] == "hello"
    assert (rep["mpa_emu.erdma"], rep["mpa_emu.erdma.cookie"], rep["mpa_emu.erdma.cc"],
            rep["mpa_emu.erdma.private_data"]) == ("reply", "0x00000010", "1",
                                                   b"accepted".hex())
    # Revision 129 has no RFC 6581 block and its extension is no SMB Direct header.
    assert not req["mpa_v2.request"] and not rep["mpa_v2.request"]
    assert not rep["iwarp_mpa.legacy.ird"]


def test_reject_is_named_and_carries_no_private_data(tmp_path: Path) -> None:
    conv = (Conversation().handshake().client_sends(REQUEST).ack_from_server()
            .server_sends(REJECT, flags="FA"))
    found = rows(write_pcap(tmp_path / "reject.pcap", conv))
    rej = found[max(found)]
    assert rej["mpa_emu.erdma"] == "reject"
    assert rej["mpa_emu.erdma.private_data_len"] == "0"
    assert rej["mpa_emu.erdma.private_data"] == ""
