"""Bad input to the network API gets a clear ValueError naming the problem, and changes
nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from mpa_emu.net import DropRule, FaultConfig, Network, Wire


def refused(action: Callable[[], object], *words: str) -> None:
    with pytest.raises(ValueError) as info:
        action()
    for word in words:
        assert word in str(info.value)


def test_bad_fault_settings_are_refused() -> None:
    refused(lambda: FaultConfig(loss=1.5), "loss=1.5", "0..1")
    refused(lambda: FaultConfig(corrupt=-0.1), "corrupt")
    refused(lambda: FaultConfig(reorder_delay_ns=-1), "reorder_delay_ns")
    refused(lambda: Wire(latency_ns=-5), "latency_ns")


def test_bad_drop_rules_are_refused(fake_net: Any) -> None:
    net = fake_net()
    refused(lambda: net.drop("SYNACK"), "unknown frame kind 'SYNACK'", "SYN-ACK")
    refused(lambda: net.drop("SYN", 0), "1-based")
    refused(lambda: DropRule(lambda seg: True, "all", count=0), "count")
    assert net.wire.rules == []


def test_unknown_hosts_frames_and_addresses_are_refused(fake_net: Any) -> None:
    net: Network = fake_net()
    alice = net.add_host("alice", "192.0.2.1")
    refused(lambda: net.host("mallory"), "no host named 'mallory'")
    refused(lambda: net.inject(b"\x00" * 60, via="mallory"), "mallory")
    refused(lambda: net.packet(3), "no captured frame 3")
    refused(lambda: net.packet(0), "numbered 1 to 0, like Wireshark's")
    refused(lambda: alice.add_address("192.0.2.1", vlan=5000), "VLAN id")
    refused(lambda: alice.remove_address("192.0.2.9"), "alice has no address 192.0.2.9")
    refused(lambda: alice.address(ipv6=True), "no IPv6 address")
    refused(lambda: alice.connect(b"\x01\x02\x03", 31000), "4 or 16 bytes")
    refused(lambda: net.after(-1, print), "delay")
    assert list(alice.addresses) == [b"\xc0\x00\x02\x01"] and net.frames == []
