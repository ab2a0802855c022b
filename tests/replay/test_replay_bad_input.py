"""Bad input ends with exit 2 and one line on stderr, never a traceback."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

PCAPS = Path(__file__).resolve().parents[2] / "pcaps"
ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mpa_emu", "replay", *args],
                          capture_output=True, text=True, cwd=ROOT, check=False)


def pcap_bytes(linktype: int, frames: list[bytes]) -> bytes:
    out = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, linktype)
    for i, data in enumerate(frames):
        out += struct.pack("<IIII", 1_700_000_000 + i, 0, len(data), len(data)) + data
    return out


def assert_one_line_error(proc: subprocess.CompletedProcess[str], needle: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("mpa-emu replay: error:")
    assert needle in lines[0]
    assert proc.stdout == ""


def test_missing_file(tmp_path: Path) -> None:
    assert_one_line_error(run_cli(str(tmp_path / "nope.pcap"), "--emulate", "10.0.0.1"),
                          "nope.pcap")


def test_not_a_capture(tmp_path: Path) -> None:
    path = tmp_path / "notes.pcap"
    path.write_text("these are not packets\n")
    assert_one_line_error(run_cli(str(path), "--emulate", "10.0.0.1"), "notes.pcap")


def test_directory_instead_of_a_file(tmp_path: Path) -> None:
    assert_one_line_error(run_cli(str(tmp_path), "--emulate", "10.0.0.1"), str(tmp_path))


def test_empty_capture(tmp_path: Path) -> None:
    path = tmp_path / "empty.pcap"
    path.write_bytes(pcap_bytes(1, []))
    assert_one_line_error(run_cli(str(path), "--emulate", "10.0.0.1"), "no frames")


def test_not_ethernet(tmp_path: Path) -> None:
    # LINKTYPE_RAW (101): an IPv4 header straight away.
    path = tmp_path / "raw.pcap"
    path.write_bytes(pcap_bytes(101, [bytes.fromhex("450000280000400040060000c0a80a01c0a80a02")
                                      + bytes(20)]))
    assert_one_line_error(run_cli(str(path), "--emulate", "192.168.10.1"), "not Ethernet")


def test_no_frames_of_the_emulated_address() -> None:
    assert_one_line_error(run_cli(str(PCAPS / "v2_accept.pcap"), "--emulate", "10.9.9.9"),
                          "no TCP frames sent or received by 10.9.9.9")


@pytest.mark.parametrize("value", ["not-an-ip", "300.1.1.1", ""])
def test_bad_emulate_address(value: str) -> None:
    assert_one_line_error(run_cli(str(PCAPS / "v2_accept.pcap"), "--emulate", value), "--emulate")


def test_truncated_capture_is_bad_input(tmp_path: Path) -> None:
    data = (PCAPS / "v2_accept.pcap").read_bytes()
    path = tmp_path / "cut.pcap"
    path.write_bytes(data[:30])
    proc = run_cli(str(path), "--emulate", "192.168.10.2")
    assert proc.returncode in (0, 1, 2)
    assert "Traceback" not in proc.stderr
    if proc.returncode == 2:
        assert len(proc.stderr.strip().splitlines()) == 1


def test_unwritable_json_is_a_one_line_error(tmp_path: Path) -> None:
    proc = run_cli(str(PCAPS / "v2_accept.pcap"), "--emulate", "192.168.10.2",
                   "--json", str(tmp_path / "missing-dir" / "r.json"))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("mpa-emu replay: error: cannot write")


def test_non_tcp_frames_are_ignored_not_fatal(tmp_path: Path) -> None:
    # An ARP request (same timestamp) in front of a real conversation: ignored, counted.
    original = (PCAPS / "v2_accept.pcap").read_bytes()
    first_record = original[24:40]
    arp = bytes.fromhex("ffffffffffff02000a0000010806") + bytes(28)
    arp_record = first_record[:8] + struct.pack("<II", len(arp), len(arp)) + arp
    path = tmp_path / "with-arp.pcap"
    path.write_bytes(original[:24] + arp_record + original[24:])
    report = tmp_path / "r.json"
    proc = run_cli(str(path), "--emulate", "192.168.10.2", "--json", str(report))
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 0, proc.stdout
    data = json.loads(report.read_text())
    assert data["ignored_frames"] == {"not_ip": 1}
    # v2_accept.pcap holds 10 frames (tools/make_fixtures.py), plus the ARP request.
    assert data["frames"] == 11
    # Frame numbers stay the capture's: the recorded reply is now frame 7.
    assert [(a["verb"], a["frame"]) for a in data["actions"] if a["verb"] == "accept"] == [
        ("accept", 7)]


def test_capture_cut_mid_frame_is_replayed_up_to_the_damage(tmp_path: Path) -> None:
    path = tmp_path / "cut.pcap"
    path.write_bytes((PCAPS / "v2_accept.pcap").read_bytes()[:700])  # inside frame 8
    proc = run_cli(str(path), "--emulate", "192.168.10.2")
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.startswith("MATCH: 3/3 frames")
    assert "note: the capture is damaged after frame 7" in proc.stdout


def test_exit_codes_of_the_installed_entry_point() -> None:
    ok = run_cli(str(PCAPS / "v2_accept.pcap"), "--emulate", "192.168.10.2")
    assert (ok.returncode, ok.stderr) == (0, "")
    assert ok.stdout.startswith("MATCH: 4/4 frames of 192.168.10.2 matched")
    bad = run_cli(str(PCAPS / "divergent_linux_synack.pcap"), "--emulate", "192.168.10.2")
    assert (bad.returncode, bad.stderr) == (1, "")
    assert bad.stdout.startswith("DIVERGENCE at frame 2: window, options differ")
