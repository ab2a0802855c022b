"""The network driving the real CM core: timing of retransmissions under a named drop,
seeded ISNs, loopback, and scapy-built frames injected into a live exchange."""

from __future__ import annotations

from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.irdma.states import CmState
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether

from mpa_emu.net import Accept, Network

US = 1_000
SECOND = 1_000_000_000


def pair(seed: int = 0) -> tuple[Network, object, object]:
    net = Network(seed)
    alice = net.add_host("alice", "192.0.2.1")
    bob = net.add_host("bob", "192.0.2.2")
    return net, alice, bob


def test_dropping_the_first_syn_ack_brings_its_retransmission_one_second_later() -> None:
    net, alice, bob = pair()
    net.drop("SYN-ACK")
    bob.listen(31000, "192.0.2.2", policy=Accept())
    conn = alice.connect("192.0.2.2", 31000)
    net.run(until_ns=3 * SECOND)
    synacks = [f for f in net.frames if f.kind == "SYN-ACK"]
    assert len(synacks) == 2
    assert synacks[0].notes[0] == "wire: dropped (the first SYN-ACK)"
    # IRDMA_RETRY_TIMEOUT is HZ jiffies after the jiffy the SYN-ACK left in (HZ 1000).
    jiffy = SECOND // 1000
    assert synacks[1].time_ns == (synacks[0].time_ns // jiffy + 1000) * jiffy == SECOND
    assert synacks[1].data == synacks[0].data  # a retransmission re-sends the same buffer
    replies = alice.events(IwEvent.CONNECT_REPLY)
    assert [(u.conn, u.status) for u in replies] == [(conn, 0)]
    assert replies[0].time_ns > synacks[1].time_ns


def test_the_network_seed_sets_the_isns() -> None:
    def isns(seed: int) -> list[int]:
        net, alice, bob = pair(seed)
        bob.listen(31000, "192.0.2.2")
        alice.connect("192.0.2.2", 31000)
        net.run(until_ns=SECOND)
        return [f.segment.seq for f in net.frames if f.kind in ("SYN", "SYN-ACK")]

    assert isns(1) == isns(1)
    assert isns(1) != isns(2)


def test_a_loopback_connection_never_reaches_the_wire() -> None:
    net = Network(0)
    alice = net.add_host("alice", "192.0.2.1")
    net.add_host("bob", "192.0.2.2")
    alice.listen(31000, "192.0.2.1", policy=Accept())
    alice.connect("192.0.2.1", 31000)
    net.run(until_ns=SECOND)
    assert net.frames and all(f.interface == "alice/lo" and f.loopback for f in net.frames)
    # The core hands each loopback frame to its peer node once; the network adds nothing.
    received = [r for r in net.trace.of_kind("segment_received") if r.host == "alice"]
    assert len(received) == len(net.frames)
    events = {u.event for u in alice.upcalls}
    assert {IwEvent.CONNECT_REQUEST, IwEvent.CONNECT_REPLY} <= events


def test_an_injected_scapy_rst_makes_the_initiator_retry_with_mpa_v1() -> None:
    net, alice, bob = pair()
    conn = alice.connect("192.0.2.2", 31000)  # bob has no listener and stays silent
    net.run(until_ns=100 * US)
    syn = net.frames[0].segment
    assert syn is not None and alice.node(conn).mpa_frame_rev == 2
    rst = (Ether(src=bob.mac.hex(":"), dst=alice.mac.hex(":"))
           / IP(src="192.0.2.2", dst="192.0.2.1", flags="DF", id=0)
           / TCP(sport=31000, dport=syn.sport, flags="RA", seq=0, ack=syn.seq + 1, window=0))
    net.inject(rst, via="bob", at_ns=200 * US, comment="RST from bob's host stack")
    net.run(until_ns=300 * US)
    retry = [f for f in net.frames if f.kind == "SYN"][1]
    assert retry.time_ns == 200 * US + 10 * US  # irdma_handle_rst_pkt resends at once
    assert retry.segment.sport == syn.sport and retry.segment.seq == syn.seq + 1
    node = alice.node(conn)
    assert node.mpa_frame_rev == 1 and node.state == CmState.SYN_SENT
    assert net.frames[1].origin == "injected: RST from bob's host stack"
    back = net.packet(2)  # frame 2, numbered like Wireshark
    assert back[TCP].flags == "RA" and bytes(back) == bytes(rst)


def test_captured_mpa_frames_come_back_as_our_scapy_layers() -> None:
    from mpa_emu.frames import MPAReply, MPARequest

    net, alice, bob = pair()
    bob.listen(31000, "192.0.2.2", policy=Accept(b"welcome"))
    alice.connect("192.0.2.2", 31000, private_data=b"hello")
    net.run(until_ns=SECOND)
    kinds = [f.kind for f in net.frames]
    request = net.packet(kinds.index("MPA request") + 1)
    reply = net.packet(kinds.index("MPA reply") + 1)
    assert request.haslayer(MPARequest) and request[MPARequest].rev == 2
    assert reply.haslayer(MPAReply) and bytes(reply[MPAReply]).endswith(b"welcome")


def test_dropping_the_first_mpa_request_resends_it_on_the_retransmission_timer() -> None:
    net, alice, bob = pair()
    net.drop("MPA request")
    bob.listen(31000, "192.0.2.2", policy=Accept())
    conn = alice.connect("192.0.2.2", 31000)
    net.run(until_ns=3 * SECOND)
    requests = [f for f in net.frames if f.kind == "MPA request"]
    assert len(requests) == 2 and requests[1].data == requests[0].data
    jiffy = SECOND // 1000
    assert requests[1].time_ns == (requests[0].time_ns // jiffy + 1000) * jiffy
    assert [(u.conn, u.status) for u in alice.events(IwEvent.CONNECT_REPLY)] == [(conn, 0)]


def test_an_ipv6_connection_is_accepted_across_the_wire() -> None:
    net = Network(0)
    alice = net.add_host("alice", "2001:db8::1")
    bob = net.add_host("bob", "2001:db8::2")
    bob.listen(31000, "2001:db8::2", policy=Accept())
    alice.connect("2001:db8::2", 31000)
    net.run(until_ns=SECOND)
    assert all(f.segment is not None and not f.segment.ipv4 for f in net.frames)
    assert [u.status for u in alice.events(IwEvent.CONNECT_REPLY)] == [0]
    assert len(bob.events(IwEvent.ESTABLISHED)) == 1


def test_a_vlan_connection_is_tagged_and_unseen_by_an_untagged_host() -> None:
    net = Network(0)
    alice = net.add_host("alice", "192.0.2.1", vlan=10)
    bob = net.add_host("bob", "192.0.2.2", vlan=10)
    carol = net.add_host("carol", "192.0.2.3")
    bob.listen(31000, "192.0.2.2", policy=Accept())
    alice.connect("192.0.2.2", 31000)
    net.run(until_ns=SECOND)
    assert net.frames and all(f.segment.vlan == 10 for f in net.frames)
    assert [u.status for u in alice.events(IwEvent.CONNECT_REPLY)] == [0]
    assert carol.upcalls == []
    try:
        carol.connect("192.0.2.1", 31000)
    except ValueError as exc:  # CmError: no neighbour entry across VLANs
        assert getattr(exc, "errno", None)
    else:
        raise AssertionError("carol reached alice across VLANs")


def test_a_client_crafted_in_scapy_gets_a_connect_request_from_the_real_core() -> None:
    from mpa_emu.frames import MPARequest

    net, alice, bob = pair()
    bob.set_neighbour("192.0.2.9", alice.mac)  # a stranger reachable through alice's port
    bob.listen(31000, "192.0.2.2", policy=Accept(b"hi stranger"))
    head = Ether(src=alice.mac.hex(":"), dst=bob.mac.hex(":")) / IP(
        src="192.0.2.9", dst="192.0.2.2", flags="DF", id=0)
    isn = 5000
    syn = head / TCP(sport=40000, dport=31000, flags="S", seq=isn, window=65535,
                     options=[("MSS", 1460), ("WScale", 2), ("EOL", None)])
    net.inject(syn, via="alice", comment="stranger's SYN")
    net.run(until_ns=100 * US)
    synack = net.packet(2)
    assert synack[TCP].flags == "SA" and synack[TCP].ack == isn + 1
    request = MPARequest(flags=0x5, rev=2, p2p=1, ird=8, write0=1, read0=1, ord=8,
                         private_data=b"crafted by hand")
    ack = head / TCP(sport=40000, dport=31000, flags="A", seq=isn + 1,
                     ack=synack[TCP].seq + 1, window=65535)
    net.inject(ack / request, via="alice", at_ns=200 * US, comment="stranger's MPA request")
    net.run(until_ns=SECOND)
    (req,) = bob.events(IwEvent.CONNECT_REQUEST)
    assert req.private_data.startswith(b"crafted by hand") and req.remote_port == 40000
    replies = [f for f in net.frames if f.kind == "MPA reply"]
    assert replies[0].segment.payload.endswith(b"hi stranger")
    # Nobody ACKs the reply, so the offloaded QP resends the same bytes.
    assert len(replies) > 1 and {f.data for f in replies} == {replies[0].data}


def test_a_lossy_wire_is_ridden_out_by_retransmissions_identically_per_seed() -> None:
    from mpa_emu.net import FaultConfig

    def lossy(seed: int) -> tuple[list[tuple[int, str, str]], list[int]]:
        net = Network(seed, faults=FaultConfig(loss=0.25, duplicate=0.1))
        alice = net.add_host("alice", "192.0.2.1")
        bob = net.add_host("bob", "192.0.2.2")
        bob.listen(31000, "192.0.2.2", policy=Accept())
        for _ in range(3):
            alice.connect("192.0.2.2", 31000)
        net.run(until_ns=30 * SECOND)
        frames = [(f.time_ns, f.interface, f.comment) for f in net.frames]
        return frames, [u.status for u in alice.events(IwEvent.CONNECT_REPLY)]

    frames, statuses = lossy(21)
    assert (frames, statuses) == lossy(21)
    assert frames != lossy(22)[0]
    assert any(c.endswith("wire: lost") for _, _, c in frames)
    assert any(c.startswith("irdma_cm_timer_tick") for _, _, c in frames)
    assert statuses and set(statuses) <= {0, -104}  # connected, or -ECONNRESET after expiry
