"""The Lua plugin's SMB Direct fields (mpa_emu.smbd.*) under tshark, on captures whose
Sends tests/helpers/ulp_captures.py packs from [MS-SMBD] 2.2.1-2.2.3 and [MS-SMB2] 2.2.1:
the expected values are those bytes (the helper's constants), not the plugin's output."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import ulp_captures as caps
from helpers.smbd_scenarios import EXAMPLE

from mpa_emu.scenario import loads, run_scenario

pytestmark = pytest.mark.tshark

PLUGIN = Path(__file__).resolve().parents[2] / "mpa_emu" / "wireshark" / "mpa_v2.lua"
FIELDS = ["frame.number", "mpa_emu.smbd", "mpa_emu.smbd.min_version",
          "mpa_emu.smbd.max_version", "mpa_emu.smbd.negotiated_version",
          "mpa_emu.smbd.credits_requested", "mpa_emu.smbd.credits_granted",
          "mpa_emu.smbd.status", "mpa_emu.smbd.max_read_write_size",
          "mpa_emu.smbd.preferred_send_size", "mpa_emu.smbd.max_receive_size",
          "mpa_emu.smbd.max_fragmented_size", "mpa_emu.smbd.flags",
          "mpa_emu.smbd.response_requested", "mpa_emu.smbd.remaining_data_length",
          "mpa_emu.smbd.data_offset", "mpa_emu.smbd.data_length",
          "mpa_emu.smbd.smb2_command"]


def rows(capture: Path) -> dict[int, dict[str, str]]:
    proc = subprocess.run(
        ["tshark", "-r", str(capture), "-o", "tcp.try_heuristic_first:TRUE",
         "--enable-heuristic", "iwarp_mpa_tcp", "-X", f"lua_script:{PLUGIN}",
         "-T", "fields", "-E", "header=y", *[a for f in FIELDS for a in ("-e", f)]],
        capture_output=True, text=True, check=True)
    assert "Lua: Error" not in proc.stderr, proc.stderr
    lines = proc.stdout.splitlines()
    header = [h.removeprefix("mpa_emu.smbd.") for h in lines[0].split("\t")]
    out = {}
    for line in lines[1:]:
        row = dict(zip(header, line.split("\t"), strict=True))
        if row["mpa_emu.smbd"]:
            out[int(row["frame.number"])] = row
    return out


@pytest.fixture(autouse=True)
def _need_tshark() -> None:
    if shutil.which("tshark") is None:
        pytest.fail("tshark is required for the Lua plugin tests")


def test_negotiate_request_and_response_fields(tmp_path: Path) -> None:
    got = rows(caps.smbd_healthy(tmp_path / "h.pcap"))
    req, resp = got[caps.SMBD_FRAMES["negotiate"]], got[caps.SMBD_FRAMES["negotiate_response"]]
    # SMBD_NEG_REQ: versions 0x0100, CreditsRequested 255, PreferredSendSize 1364,
    # MaxReceiveSize 8192, MaxFragmentedSize 1 MiB.
    assert (req["mpa_emu.smbd"], req["min_version"], req["max_version"],
            req["credits_requested"], req["preferred_send_size"], req["max_receive_size"],
            req["max_fragmented_size"]) == ("Negotiate Request", "0x0100", "0x0100", "255",
                                            "1364", "8192", "1048576")
    assert not req["credits_granted"] and not req["status"]
    # SMBD_NEG_RESP: NegotiatedVersion 0x0100, credits 255/255, Status 0, 8 MiB, 1364,
    # 1364, 1 MiB.
    assert (resp["mpa_emu.smbd"], resp["negotiated_version"], resp["credits_requested"],
            resp["credits_granted"], resp["status"], resp["max_read_write_size"],
            resp["preferred_send_size"], resp["max_receive_size"],
            resp["max_fragmented_size"]) == ("Negotiate Response", "0x0100", "255", "255",
                                             "0x00000000", "8388608", "1364", "1364",
                                             "1048576")


def test_data_transfer_fields_and_the_smb2_command(tmp_path: Path) -> None:
    got = rows(caps.smbd_healthy(tmp_path / "h.pcap"))
    neg = got[caps.SMBD_FRAMES["smb2_negotiate"]]
    # data_transfer(10, smb2(NEGOTIATE) + 36 bytes, flags=1): DataOffset 24, DataLength
    # 100, RESPONSE_REQUESTED.
    assert (neg["mpa_emu.smbd"], neg["credits_requested"], neg["credits_granted"],
            neg["flags"], neg["response_requested"], neg["data_offset"],
            neg["data_length"], neg["remaining_data_length"], neg["smb2_command"]) == \
        ("Data Transfer", "255", "10", "0x0001", "1", "24", "100", "0", "0")
    data = [r for r in got.values() if r["mpa_emu.smbd"] == "Data Transfer"]
    # Negotiate, its response, the WRITE's two fragments, the WRITE's response.
    assert len(data) == 5
    first, second = (r for r in data if r["remaining_data_length"] not in ("", "0")
                     or r["smb2_command"] == "")
    payload = 64 + 48 + 2000
    assert (first["smb2_command"], first["data_length"], first["remaining_data_length"]) \
        == ("9", "1340", str(payload - 1340))
    # The second fragment opens with no SMB2 header: read as this stream's Data Transfer.
    assert (second["smb2_command"], second["data_length"]) == ("", str(payload - 1340))


def test_first_segment_of_a_long_send(tmp_path: Path) -> None:
    got = rows(caps.smbd_falloc(tmp_path / "f.pcap"))
    first = got[caps.SMBD_FRAMES["write_first"]]
    # 16,520 bytes in segments of 1,424: only MO 0 carries the header (WRITE, 16,496).
    assert (first["smb2_command"], first["data_length"], first["credits_granted"]) == \
        ("9", str(caps.WRITE_SIZE - 24), "0")
    assert caps.SMBD_FRAMES["overflow_segment"] not in got


def test_other_protocols_are_not_smb_direct(tmp_path: Path) -> None:
    for build in (caps.nvme_admin_accept, caps.iser_login, caps.rpcrdma_inline):
        assert rows(build(tmp_path / f"{build.__name__}.pcap")) == {}, build.__name__


def test_emulated_negotiation(tmp_path: Path) -> None:
    pcap = tmp_path / "ex.pcapng"
    run_scenario(loads(EXAMPLE.read_text(), "smbd.toml")).net.write_pcapng(pcap)
    got = rows(pcap)
    kinds = [(r["mpa_emu.smbd"], r["credits_requested"]) for r in got.values()]
    assert kinds == [("Negotiate Request", "255"), ("Negotiate Response", "255"),
                     ("Negotiate Request", "0")]
    resp = next(r for r in got.values() if r["mpa_emu.smbd"] == "Negotiate Response")
    assert (resp["credits_granted"], resp["max_fragmented_size"]) == ("254", "173910")
