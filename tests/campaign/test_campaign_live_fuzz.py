"""``mpa-emu fuzz --live`` against ``mpa-emu peer`` (the Linux TCP stack and our MPA
responder) in a namespace the test creates: bounded in cases and time, the reactions
the peer's code and Linux's TCP give, captures of the silent cases, and a loss of
service seen when the peer stops listening."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.campaign_lab import cli
from scapy.layers.inet import TCP
from scapy.utils import rdpcap

from mpa_emu.live.netns import Namespace

pytestmark = pytest.mark.live

PORT = 31000
PEER, US = "192.0.2.1", "192.0.2.2"


@pytest.fixture
def namespace() -> Iterator[str]:
    if os.geteuid() != 0:
        pytest.skip("live tests need root for network namespaces and /dev/net/tun "
                    "(CI runs them as root)")
    ns = Namespace(f"mpafz{os.getpid()}")
    try:
        yield ns.name
    finally:
        ns.close()


def _peer(ns: str, *extra: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-m", "mpa_emu", "peer", "--listen", str(PORT),
                             "--netns", ns, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == f"listening on port {PORT}"
    return proc


def _fuzz(ns: str, tmp_path: Path, *extra: str) -> tuple[int, str, list[dict[str, object]]]:
    report = tmp_path / "live.json"
    rc, out, err = cli("fuzz", "--live", f"{PEER}:{PORT}", "--tap", f"fz{os.getpid()}",
                       "--netns", ns, "--address", US, "--host-address", f"{PEER}/24",
                       "--bound", "0.2", "--out", str(tmp_path / "kept"), "--json",
                       str(report), *extra)
    assert not err, err
    return rc, out, json.loads(report.read_text())


@pytest.mark.slow(21)
def test_live_fuzz_against_the_peer_prints_the_reaction_table(namespace: str,
                                                              tmp_path: Path) -> None:
    peer = _peer(namespace, "--count", "0")
    try:
        rc, out, cases = _fuzz(namespace, tmp_path, "--cases", "90", "--time-budget", "120")
    finally:
        peer.terminate()
        peer.wait(10)
    assert rc == 0, out
    assert len(cases) == 90 and all(c["answers_after"] for c in cases)
    by_name = {c["name"]: c["reaction"] for c in cases}
    # mpa_emu.live.peer answers a well-formed request and then waits for the RTR FPDU
    assert by_name["mpa request"] == "reply"
    # it reads PD_Length (40) bytes of private data that never come: nothing happens
    assert by_name["mpa pd_length beyond the bytes"] == "silence"
    # a reply key where a request belongs: it gives up with the rest of the frame
    # unread, and Linux resets a socket closed with unread data (RFC 2525 2.17)
    assert by_name["mpa reply key on a request"] == "RST"
    # EOF while waiting for the request: it closes, Linux sends its FIN
    assert by_name["FIN at established"] == "FIN"
    lines = out.splitlines()
    header = lines.index("reaction   cases  examples")
    rows = {m.group(1): int(m.group(2)) for m in (
        re.match(r"(\S.*?)\s+(\d+)  \d+ ", line) for line in lines[header + 1:-1]) if m}
    assert sum(rows.values()) == 90 and rows["silence"] >= 1
    silent = sorted(c["case"] for c in cases if c["reaction"] == "silence")
    kept = sorted(int(p.stem.split("-")[1]) for p in (tmp_path / "kept").glob("*.pcapng"))
    assert kept == silent
    assert lines[-1].startswith("90 cases in ") and "capture(s) of silence" in lines[-1]
    # the kept capture of the PD_Length lie holds the lying request as sent
    index = next(c["case"] for c in cases if c["name"] == "mpa pd_length beyond the bytes")
    payloads = [bytes(p[TCP].payload) for p in rdpcap(str(tmp_path / "kept" /
                                                           f"live-{index}.pcapng"))
                if TCP in p and bytes(p[TCP].payload).startswith(b"MPA ID Req Frame")]
    assert payloads and int.from_bytes(payloads[0][18:20], "big") == 40
    assert len(payloads[0]) < 20 + 40


def test_a_peer_that_stops_listening_is_a_loss_of_service(namespace: str,
                                                          tmp_path: Path) -> None:
    # five connections, then the listener closes: case 2's liveness check is refused
    peer = _peer(namespace, "--count", "5")
    try:
        rc, out, cases = _fuzz(namespace, tmp_path, "--cases", "20")
    finally:
        peer.terminate()
        peer.wait(10)
    assert rc == 1
    assert [c["group"] for c in cases][-1] == "loss of service"
    assert len(cases) == 3
    assert "the peer no longer accepts connections; stopping" in out
    assert (tmp_path / "kept" / "live-2.pcapng").exists()
