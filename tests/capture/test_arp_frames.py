"""ARP frames (RFC 826) in a capture are named in the ladder and the HTML frame panel as
tcpdump names them (who-has / is-at), not "not decoded". The frames are built by scapy."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from scapy.layers.l2 import ARP, Dot1Q, Ether
from scapy.utils import rdpcap, wrpcap

from mpa_emu.capture.arp import parse_arp
from mpa_emu.cli import main

ROOT = Path(__file__).resolve().parents[2]
A, B = "192.168.10.1", "192.168.10.2"  # pcaps/README.md's hosts
MAC_A, MAC_B = "02:00:00:0a:00:01", "02:00:00:0a:00:02"


@pytest.fixture()
def capture(tmp_path: Path) -> Path:
    frames = list(rdpcap(str(ROOT / "pcaps" / "v2_accept.pcap")))
    who = Ether(src=MAC_A, dst="ff:ff:ff:ff:ff:ff") / ARP(op=1, hwsrc=MAC_A, psrc=A, pdst=B)
    at = Ether(src=MAC_B, dst=MAC_A) / ARP(op=2, hwsrc=MAC_B, psrc=B, hwdst=MAC_A, pdst=A)
    for f in (who, at):
        f.time = frames[0].time
    path = tmp_path / "arp.pcap"
    wrpcap(str(path), [who, at, *frames])
    return path


def test_parse_arp_reads_request_reply_and_vlan() -> None:
    who = parse_arp(bytes(Ether() / ARP(op=1, psrc=A, pdst=B)))
    assert who is not None and who.text() == f"ARP who-has {B} tell {A}"
    tagged = parse_arp(bytes(Ether() / Dot1Q(vlan=7) / ARP(op=2, hwsrc=MAC_B, psrc=B,
                                                          pdst=A)))
    assert tagged is not None and tagged.text() == f"ARP {B} is-at {MAC_B}"
    assert parse_arp(bytes(Ether(type=0x0800) / (b"\0" * 40))) is None


def test_ladder_names_arp_frames(capture: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagram", str(capture)]) == 0
    out = capsys.readouterr().out
    assert "not decoded" not in out
    assert f"#1 ARP who-has {B} tell {A}" in out
    assert f"#2 ARP {B} is-at {MAC_B}" in out


def test_html_panel_decodes_arp(capture: Path, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    html = tmp_path / "i.html"
    assert main(["inspect", str(capture), "--html", str(html)]) == 0
    found = re.search(r'<script type="application/json" id="report-data">(.*?)</script>',
                      html.read_text(), re.S)
    assert found is not None
    frames = json.loads(found.group(1))["frames"]
    assert dict(frames["1"])["ARP"] == f"ARP who-has {B} tell {A}"
    assert dict(frames["2"])["sender"] == f"{B} ({MAC_B})"
    assert "not decoded" not in dict(frames["2"])
