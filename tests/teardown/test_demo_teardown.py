"""The teardown story of ``mpa-emu demo``: only the removed address's connections are
reset, on the wire (judged by tshark) and in the upcalls."""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path

import pytest

from mpa_emu.demo.stories import STORIES, run_demo
from mpa_emu.demo.teardown import SECOND_IP, TEARDOWN_PORT, address_removal

STORY = "mpa_emu.demo.teardown:address_removal"


def test_story_is_registered_in_the_demo() -> None:
    assert address_removal in STORIES


def test_only_the_removed_address_is_reset() -> None:
    result = run_demo(0, stories=[STORY])
    text = "\n".join(result.summary)
    assert "2 RST on the wire, all from 192.0.2.3" in text
    lines = [line for line in result.summary if line.strip().startswith("alice :")]
    assert len(lines) == 4
    for line in lines:
        if "-> 192.0.2.3" in line:
            assert "reset" in line and "DISCONNECT(-ECONNRESET), CLOSE" in line
            assert line.endswith("node freed")
        else:
            assert "untouched" in line and "upcalls none" in line
            assert line.endswith("node OFFLOADED")
    assert "2 of 2 connections on 192.0.2.2 still OFFLOADED" in text
    assert "CLOSE upcalls" in text


def test_story_capture_is_reproducible() -> None:
    first, second = io.BytesIO(), io.BytesIO()
    run_demo(4, stories=[STORY]).net.write_pcapng(first)
    run_demo(4, stories=[STORY]).net.write_pcapng(second)
    assert first.getvalue() == second.getvalue()


@pytest.mark.tshark
def test_tshark_sees_resets_only_from_the_removed_address(tmp_path: Path) -> None:
    assert shutil.which("tshark") is not None, "tshark is a test dependency: install it"
    path = tmp_path / "teardown.pcapng"
    run_demo(0, stories=[STORY]).net.write_pcapng(path)
    out = subprocess.run(
        ["tshark", "-r", str(path), "-o", "tcp.try_heuristic_first:TRUE",
         "--enable-heuristic", "iwarp_mpa_tcp", "-Y", "tcp.flags.reset == 1",
         "-T", "fields", "-e", "ip.src", "-e", "tcp.srcport"],
        capture_output=True, text=True, check=True).stdout
    rows = [line.split("\t") for line in out.splitlines()]
    assert rows == [[SECOND_IP, str(TEARDOWN_PORT)]] * 2
    crc = subprocess.run(
        ["tshark", "-r", str(path), "-o", "tcp.try_heuristic_first:TRUE",
         "--enable-heuristic", "iwarp_mpa_tcp", "-O", "iwarp_mpa", "-Y", "iwarp_mpa.fpdu"],
        capture_output=True, text=True, check=True).stdout
    verdicts = [line for line in crc.splitlines() if "CRC check" in line]
    # Four RTRs (zero-length Read Requests) and the four zero-length Read Responses that
    # answer them (RFC 5040 section 5.3).
    assert len(verdicts) == 8 and all("Good CRC32" in v for v in verdicts)
