"""``Network.packet(n)`` is frame n as tshark numbers it (from 1), and ``inject`` finds
the sending interface by itself when the frame or the wire tells which it is."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether

from mpa_emu.net import Accept, Network

pytestmark = pytest.mark.tshark


def _accepted() -> Network:
    net = Network(3)
    net.add_host("alice", "192.0.2.1")
    bob = net.add_host("bob", "192.0.2.2")
    bob.listen(31000, policy=Accept(b"hi"))
    net.host("alice").connect("192.0.2.2", 31000, private_data=b"hello")
    net.run()
    return net


def test_packet_n_is_tsharks_frame_n(tmp_path: Path) -> None:
    net = _accepted()
    path = tmp_path / "x.pcapng"
    net.write_pcapng(path)
    out = subprocess.run(["tshark", "-n", "-r", str(path), "-T", "fields", "-e", "frame.number",
                          "-e", "tcp.seq_raw", "-e", "tcp.flags"],
                         capture_output=True, text=True, check=True).stdout
    rows = [line.split("\t") for line in out.splitlines()]
    assert len(rows) == len(net.frames) > 5
    for number, seq, flags in rows:
        pkt = net.packet(int(number))
        assert pkt[TCP].seq == int(seq) and int(pkt[TCP].flags) == int(flags, 16)
    with pytest.raises(ValueError, match=f"numbered 1 to {len(rows)}"):
        net.packet(0)


def _syn(src_mac: str, dst_mac: str) -> Ether:
    return (Ether(src=src_mac, dst=dst_mac) / IP(src="192.0.2.9", dst="192.0.2.2")
            / TCP(sport=40000, dport=31000, flags="S", seq=7))


def test_inject_without_via_uses_the_source_mac_or_the_only_other_host() -> None:
    net = Network(1)
    alice = net.add_host("alice", "192.0.2.1")
    bob = net.add_host("bob", "192.0.2.2")
    bob.listen(31000)
    net.inject(_syn(alice.mac.hex(":"), bob.mac.hex(":")))
    net.inject(_syn("02:99:00:00:00:09", bob.mac.hex(":")), at_ns=1000)
    net.run(until_ns=5000)
    injected = [f for f in net.frames if f.origin == "injected"]
    assert [(f.sender, f.receivers) for f in injected] == [("alice", ("bob",)),
                                                          ("alice", ("bob",))]


def test_inject_without_via_on_three_hosts_names_them() -> None:
    net = Network(1)
    for i, name in enumerate(("alice", "bob", "carol"), start=1):
        net.add_host(name, f"192.0.2.{i}")
    with pytest.raises(ValueError, match=r"via=.*02:99:00:00:00:09.*alice, bob, carol"):
        net.inject(_syn("02:99:00:00:00:09", net.host("bob").mac.hex(":")))
