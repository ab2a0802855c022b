"""The virtual wire: latency and each fault, deterministic under the network seed."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether

from mpa_emu.net import FaultConfig, Network
from mpa_emu.wire import codec
from mpa_emu.wire.addr import ip_bytes
from mpa_emu.wire.segment import ACK, SYN

US = 1_000
SECOND = 1_000_000_000


def two_hosts(fake_net: Any, **kwargs: Any) -> tuple[Network, Any, Any]:
    net = fake_net(**kwargs)
    alice = net.add_host("alice", "192.0.2.1")
    bob = net.add_host("bob", "192.0.2.2")
    return net, alice, bob


def syn_from_alice(dport: int = 31000, sport: int = 40001) -> Any:
    return (Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
            / IP(src="192.0.2.1", dst="192.0.2.2", id=0, flags="DF")
            / TCP(sport=sport, dport=dport, flags="S", seq=1000, window=65535))


def test_frames_arrive_after_the_one_way_latency(fake_net: Any) -> None:
    net, alice, bob = two_hosts(fake_net, latency_ns=25 * US)
    bob.listen(31000)
    alice.connect("192.0.2.2", 31000)
    net.run()
    assert [t for t, _ in bob.core.received] == [25 * US, 75 * US]  # SYN, then the ACK
    assert [t for t, _ in alice.core.received] == [50 * US]  # SYN-ACK


def test_total_loss_delivers_nothing_and_traces_each_drop(fake_net: Any) -> None:
    net, alice, bob = two_hosts(fake_net, faults=FaultConfig(loss=1.0))
    bob.listen(31000)
    alice.connect("192.0.2.2", 31000)
    net.run(until_ns=SECOND // 2)
    assert bob.core.received == []
    assert net.frames[0].notes == ["wire: lost"]
    drops = [r for r in net.trace.of_kind("segment_dropped")]
    assert [(r.host, r.fields["reason"]) for r in drops] == [("alice", "random loss")]


def test_duplication_delivers_every_frame_twice(fake_net: Any) -> None:
    net, _alice, bob = two_hosts(fake_net, faults=FaultConfig(duplicate=1.0))
    net.inject(syn_from_alice(dport=9), via="alice")  # no listener on 9: bob only records it
    net.run()
    assert len(bob.core.received) == 2
    assert bob.core.received[0][1] == bob.core.received[1][1]
    assert "wire: duplicated" in net.frames[0].notes


def test_a_reordered_frame_is_overtaken_by_a_later_one(fake_net: Any) -> None:
    held = FaultConfig(reorder=1.0, reorder_delay_ns=40 * US)
    net, _alice, bob = two_hosts(fake_net, faults=held)
    net.inject(syn_from_alice(dport=9, sport=1), via="alice", at_ns=0)
    net.at(1 * US, setattr, net.wire, "faults", FaultConfig())
    net.inject(syn_from_alice(dport=9, sport=2), via="alice", at_ns=2 * US)
    net.run()
    arrivals = [(t, seg.sport) for t, seg in bob.core.received]
    assert arrivals == [(12 * US, 2), (50 * US, 1)]
    assert net.frames[0].notes == ["wire: held back 40000 ns (reordered)"]


def test_a_corrupted_frame_fails_the_checksum_and_the_receiving_nic_drops_it(
        fake_net: Any) -> None:
    net, alice, bob = two_hosts(fake_net, faults=FaultConfig(corrupt=1.0))
    bob.listen(31000)
    alice.connect("192.0.2.2", 31000)
    net.run(until_ns=SECOND // 2)
    assert bob.core.received == []
    sent = net.frames[0]
    assert any(n.startswith("wire: corrupted") for n in sent.notes)
    assert any(n.startswith("dropped by bob's NIC: bad frame") for n in sent.notes)
    drop = next(net.trace.of_kind("segment_dropped"))
    assert drop.host == "bob" and drop.fn == "nic" and "checksum" in drop.fields["reason"]


def test_corruption_flips_exactly_one_bit_inside_the_tcp_segment(fake_net: Any) -> None:
    net, _alice, _bob = two_hosts(fake_net, faults=FaultConfig(corrupt=1.0), seed=7)
    flipped: list[bytes] = []
    original = bytes(syn_from_alice(dport=9))
    net.delivery_tap = lambda _host, data: flipped.append(data)
    net.inject(original, via="alice")
    net.run()
    diff = [i for i, (a, b) in enumerate(zip(original, flipped[0], strict=True)) if a != b]
    assert len(diff) == 1
    assert bin(original[diff[0]] ^ flipped[0][diff[0]]).count("1") == 1
    assert 34 <= diff[0] < 54  # Ethernet 14 + IPv4 20, TCP header 20 bytes


def fates(fake_net: Any, seed: int) -> list[str]:
    net = fake_net(seed, faults=FaultConfig(loss=0.3, duplicate=0.2, reorder=0.2, corrupt=0.2))
    net.add_host("alice", "192.0.2.1")
    net.add_host("bob", "192.0.2.2")
    for i in range(40):
        net.inject(syn_from_alice(dport=9, sport=1000 + i), via="alice", at_ns=i * US)
    net.run()
    return [f.comment for f in net.frames]


def test_random_faults_repeat_exactly_under_the_same_seed(fake_net: Any) -> None:
    first, again, other = fates(fake_net, 11), fates(fake_net, 11), fates(fake_net, 12)
    assert first == again
    assert first != other
    assert any("lost" in c for c in first) and any("duplicated" in c for c in first)


def test_named_rule_drops_only_the_first_syn_ack_and_the_retransmitted_syn_gets_through(
        fake_net: Any) -> None:
    net, alice, bob = two_hosts(fake_net)
    rule = net.drop("SYN-ACK")
    bob.listen(31000)
    alice.connect("192.0.2.2", 31000)
    result = net.run()
    assert result.reason == "idle"
    kinds = [(f.time_ns, f.interface, f.kind) for f in net.frames]
    assert kinds == [(0, "alice", "SYN"), (10 * US, "bob", "SYN-ACK"),
                     (SECOND, "alice", "SYN"), (SECOND + 10 * US, "bob", "SYN-ACK"),
                     (SECOND + 20 * US, "alice", "ACK")]
    assert net.frames[1].notes == ["wire: dropped (the first SYN-ACK)"]
    assert (rule.seen, rule.dropped) == (2, 1)
    assert [u.time_ns for u in alice.upcalls] == [SECOND + 20 * US]


def test_nth_rule_counts_frames_of_its_kind_only(fake_net: Any) -> None:
    net, _alice, bob = two_hosts(fake_net)
    net.drop("SYN", 2)
    for i in range(3):
        net.inject(syn_from_alice(dport=9, sport=i + 1), via="alice", at_ns=i * US)
    net.run()
    assert [seg.sport for _, seg in bob.core.received] == [1, 3]


def test_vlan_frames_reach_only_hosts_with_that_vlan(fake_net: Any) -> None:
    net = fake_net()
    net.add_host("alice", "192.0.2.1", vlan=10)
    carol = net.add_host("carol", "192.0.2.3")  # untagged only
    seg = codec.decode(bytes(syn_from_alice(dport=9)))
    net.inject(codec.encode(replace(seg, dst_mac=carol.mac, vlan=10)), via="alice")
    net.run()
    assert carol.core.received == []
    drop = next(net.trace.of_kind("segment_dropped"))
    assert drop.fields["reason"] == "VLAN 10 is not configured on carol"


def test_frames_to_an_unknown_mac_are_traced_as_undeliverable(fake_net: Any) -> None:
    net, _alice, bob = two_hosts(fake_net)
    frame = syn_from_alice(dport=9)
    frame[Ether].dst = "02:99:99:99:99:99"
    net.inject(frame, via="alice")
    net.run()
    assert bob.core.received == []
    drop = next(net.trace.of_kind("segment_dropped"))
    assert drop.fields["reason"] == "no host owns destination MAC 02:99:99:99:99:99"


def test_injected_garbage_travels_and_the_receiver_nic_drops_it(fake_net: Any) -> None:
    net, _alice, bob = two_hosts(fake_net)
    net.inject(b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01" + b"\x08\x00" + b"xx",
               via="alice", comment="truncated IPv4")
    net.run()
    assert bob.core.received == []
    assert net.frames[0].kind == "undecodable"
    assert net.frames[0].origin == "injected: truncated IPv4"
    assert "dropped by bob's NIC: bad frame" in net.frames[0].comment


def test_scapy_injection_round_trip(fake_net: Any) -> None:
    net, _alice, bob = two_hosts(fake_net)
    pkt = syn_from_alice(dport=9) / b"payload!"
    pkt[TCP].flags = "A"
    net.inject(pkt, via="alice", at_ns=3 * US)
    net.run()
    (when, seg), = bob.core.received
    assert when == 13 * US
    assert seg == codec.from_scapy(Ether(bytes(pkt)))
    assert (seg.src_ip, seg.flags, seg.payload) == (ip_bytes("192.0.2.1"), ACK, b"payload!")
    back = net.packet(1)
    assert bytes(back) == bytes(net.frames[0].data)
    assert back[TCP].sport == pkt[TCP].sport and back[IP].dst == "192.0.2.2"
    assert int(back[TCP].flags) & ~SYN == ACK
