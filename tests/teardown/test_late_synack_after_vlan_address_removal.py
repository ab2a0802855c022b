"""irdma_if_notify removes only the listeners' SYN qhash entries (irdma_qhash_ctrl /
irdma_manage_qhash(TCP_SYN, DELETE)); the per-connection TCP_ESTABLISHED entry that
irdma_connect added stays, and the VLAN device stays registered. So a SYN-ACK still in
flight when the VLAN loses its last address reaches the active node's CM, which goes on
with the handshake (irdma_handle_synack_pkt: ACK and the MPA request). The teardown that
the removal runs does not pick the node: irdma_if_notify is passed the lower device,
whose VLAN 0xFFFF differs from the node's (if_notify_lower_dev)."""

from __future__ import annotations

from mpa_emu.stacks.irdma.states import CmState

from mpa_emu.net import Accept, Network

MS = 1_000_000


def test_late_synack_reaches_the_cm_after_the_vlan_lost_its_address() -> None:
    net = Network(5, latency_ns=2 * MS)
    alice = net.add_host("alice", "192.0.2.1", vlan=10)
    bob = net.add_host("bob", "192.0.2.2", vlan=10)
    bob.listen(4791, policy=Accept())
    conn = alice.connect(bob, 4791)
    net.run(until_ns=3 * MS)  # the SYN has arrived; the SYN-ACK is on the wire
    alice.remove_address("192.0.2.1")
    assert 10 in alice.vlans  # the VLAN device outlives its address
    t0 = net.now_ns
    net.run(until_ns=t0 + 3 * MS)
    synacks = [f for f in net.frames if f.sender == "bob" and f.kind == "SYN-ACK"]
    assert synacks and all("dropped" not in f.comment for f in synacks)
    after = [f.kind for f in net.frames if f.sender == "alice" and f.time_ns >= t0]
    assert after[:2] == ["ACK", "MPA request"]
    node = alice.node(conn)
    assert node is not None and node.state == CmState.MPAREQ_SENT


def test_a_syn_to_a_removed_address_gets_no_host_stack_reset() -> None:
    # The VLAN device stays, so the frame reaches the host; no listener's SYN qhash
    # steers it to the CM and the Linux stack has no such local address: dropped, even
    # with a host stack that answers unknown ports with a RST.
    from mpa_emu.stacks.irdma.config import CmConfig

    net = Network(5, latency_ns=1 * MS)
    alice = net.add_host("alice", "192.0.2.1", vlan=10)
    bob = net.add_host("bob", ["192.0.2.2", "192.0.2.3"], vlan=10,
                       config=CmConfig(host_stack_rst=True))
    bob.remove_address("192.0.2.2")
    alice.set_neighbour("192.0.2.2", bob.mac)
    t0 = net.now_ns
    alice.connect("192.0.2.2", 4791)
    net.run(until_ns=t0 + 5 * MS)
    assert [f.kind for f in net.frames if f.sender == "bob" and f.time_ns >= t0] == []
    alice.connect("192.0.2.3", 4791)  # a port nobody listens on, on a live address
    net.run(until_ns=t0 + 10 * MS)
    assert "RST" in [f.kind for f in net.frames if f.sender == "bob" and f.time_ns >= t0]
