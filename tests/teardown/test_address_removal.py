"""Address removal on an emulated host (irdma_if_notify(ifup=false) ->
irdma_cm_teardown_connections), end to end on the real CM core and the virtual wire.

alice (the initiator) and bob (the listener, several addresses) run the irdma CM; bob
loses an address; what goes on the wire and what each application is told must follow
irdma_cm_teardown_connections, irdma_if_notify, irdma_cm_disconn_true and irdma_schedule_cm_timer.
"""

from __future__ import annotations

from dataclasses import replace
from errno import ECONNRESET

import pytest
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.irdma.config import CmConfig, Quirks
from mpa_emu.stacks.irdma.states import CmState

from mpa_emu.net import Accept, Host, Manual, Network, Reject
from mpa_emu.stacks.irdma import teardown
from mpa_emu.wire.addr import ip_bytes
from mpa_emu.wire.segment import ACK, RST, SYN, Segment

MS = 1_000_000
PORT = 31010
A4, B4, C4, D4 = "192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"
A6, B6, C6 = "2001:db8::1", "2001:db8::2", "2001:db8::3"


def upcalls(host: Host, since_ns: int) -> list[tuple[str, int, int]]:
    return [(IwEvent(u.event).name, u.conn, u.status) for u in host.upcalls
            if u.time_ns >= since_ns]


def rst_sources(net: Network, since_ns: int) -> list[tuple[str, str]]:
    out = []
    for frame in net.frames:
        seg = frame.segment
        if frame.time_ns >= since_ns and seg is not None and seg.flags & RST:
            out.append((frame.sender, ".".join(str(b) for b in seg.src_ip)
                        if len(seg.src_ip) == 4 else seg.src_ip.hex()))
    return out


def bob_conn_for(bob: Host, alice_conn_port: int) -> int:
    for conn in bob.conns():
        view = bob.node(conn)
        if view is not None and view.rem_port == alice_conn_port:
            return conn
    raise AssertionError("no node on bob for that port")


def established_pair(bob_ips: list[str], alice_ips: list[str], *,
                     config: CmConfig | None = None) -> tuple[Network, Host, Host]:
    net = Network(3)
    alice = net.add_host("alice", alice_ips)
    bob = net.add_host("bob", bob_ips, config=config)
    return net, alice, bob


def test_ipv4_removal_resets_only_that_address_and_closes_both_sides() -> None:
    net, alice, bob = established_pair([B4, C4], [A4])
    bob.listen(PORT, None, policy=Accept())
    on_b = [alice.connect(B4, PORT) for _ in range(2)]
    on_c = [alice.connect(C4, PORT) for _ in range(2)]
    net.run(until_ns=50 * MS)
    assert all(alice.node(c).state == CmState.OFFLOADED for c in on_b + on_c)
    t0 = net.now_ns
    bob.remove_address(B4)
    net.run(until_ns=t0 + 2000 * MS)
    assert rst_sources(net, t0) == [("bob", B4), ("bob", B4)]
    assert sorted(upcalls(alice, t0)) == sorted(
        [("DISCONNECT", c, -ECONNRESET) for c in on_b] + [("CLOSE", c, 0) for c in on_b])
    bob_calls = upcalls(bob, t0)
    assert [e for e, _, _ in bob_calls] == ["CLOSE", "CLOSE"]
    assert all(status == 0 for _, _, status in bob_calls)
    # the connections on the other address are untouched on both sides
    assert sorted(alice.conns()) == sorted(on_c)
    assert all(bob.node(c).state == CmState.OFFLOADED for c in bob.conns())
    assert len(bob.conns()) == 2


def test_close_upcall_follows_the_close_timer_on_the_shared_core_timer() -> None:
    net, alice, bob = established_pair([B4], [A4])
    bob.listen(PORT, B4, policy=Accept())
    alice.connect(B4, PORT)
    net.run(until_ns=5 * MS)
    t0 = net.now_ns
    bob.remove_address(B4)
    net.run(until_ns=t0 + 3000 * MS)
    [(event, _, _)] = upcalls(bob, t0)
    close_at = next(u.time_ns for u in bob.upcalls if u.time_ns >= t0)
    # HZ/10 after the teardown at the earliest; irdma_schedule_cm_timer: it may slip to an expiry
    # the
    # shared timer already had pending (here the SYN-ACK's first resend at ~1 s).
    assert event == "CLOSE" and close_at - t0 >= 100 * MS
    assert close_at <= 1000 * MS + 20 * MS


def test_ipv6_removal_resets_only_ipv6_connections() -> None:
    net, alice, bob = established_pair([B4, B6], [A4, A6])
    bob.listen(PORT, None, policy=Accept())
    bob.listen(PORT, None, policy=Accept(), ipv6=True)
    v4 = alice.connect(B4, PORT)
    v6 = alice.connect(B6, PORT, local_ip=A6)
    net.run(until_ns=50 * MS)
    t0 = net.now_ns
    bob.remove_address(B6)
    net.run(until_ns=t0 + 2000 * MS)
    assert [s for s, _ in rst_sources(net, t0)] == ["bob"]
    assert ("DISCONNECT", v6, -ECONNRESET) in upcalls(alice, t0)
    assert alice.node(v4).state == CmState.OFFLOADED and alice.node(v6) is None


def test_ipv4_removal_also_tears_down_an_ipv6_connection_sharing_the_first_word() -> None:
    # irdma_cm_teardown_connections: memcmp over 4 bytes because the removed address is IPv4
    shadow6 = "c000:202::77"  # first 32-bit word 192.0.2.2
    net, alice, bob = established_pair([B4, shadow6], [A4, A6])
    bob.listen(PORT, None, policy=Accept(), ipv6=True)
    v6 = alice.connect(shadow6, PORT, local_ip=A6)
    net.run(until_ns=50 * MS)
    t0 = net.now_ns
    bob.remove_address(B4)
    net.run(until_ns=t0 + 2000 * MS)
    assert upcalls(alice, t0)[:1] == [("DISCONNECT", v6, -ECONNRESET)]
    assert [s for s, _ in rst_sources(net, t0)] == ["bob"]


@pytest.mark.parametrize("lower_dev, torn_down", [(True, False), (False, True)])
def test_vlan_connections_depend_on_the_lower_device_quirk(lower_dev: bool,
                                                           torn_down: bool) -> None:
    config = CmConfig(quirks=Quirks(if_notify_lower_dev=lower_dev))
    net = Network(3)
    alice = net.add_host("alice", A4, vlan=10)
    bob = net.add_host("bob", [B4], vlan=10, config=config)
    bob.listen(PORT, B4, policy=Accept())
    conn = alice.connect(B4, PORT)
    net.run(until_ns=50 * MS)
    assert alice.node(conn).state == CmState.OFFLOADED
    t0 = net.now_ns
    bob.remove_address(B4)
    net.run(until_ns=t0 + 2000 * MS)
    assert bool(rst_sources(net, t0)) is torn_down
    assert (alice.node(conn) is None) is torn_down
    if torn_down:
        rst = next(f.segment for f in net.frames if f.time_ns >= t0 and f.segment
                   and f.segment.flags & RST)
        assert rst.vlan == 10


def test_untagged_removal_leaves_a_vlan_connection_on_the_same_address() -> None:
    config = CmConfig(quirks=Quirks(if_notify_lower_dev=False))
    net = Network(3)
    alice = net.add_host("alice", A4)
    alice.add_address("198.51.100.1", vlan=20)
    bob = net.add_host("bob", [B4], config=config)
    bob.add_address("198.51.100.2", vlan=20)
    bob.listen(PORT, None, policy=Accept())
    plain = alice.connect(B4, PORT)
    tagged = alice.connect("198.51.100.2", PORT, local_ip="198.51.100.1")
    net.run(until_ns=50 * MS)
    t0 = net.now_ns
    bob.remove_address(B4)
    net.run(until_ns=t0 + 2000 * MS)
    assert alice.node(plain) is None and alice.node(tagged).state == CmState.OFFLOADED


def test_wildcard_listener_over_three_addresses_with_one_removed() -> None:
    net, alice, bob = established_pair([B4, C4, D4], [A4])
    listener = bob.listen(PORT, None, policy=Accept())
    first = {ip: alice.connect(ip, PORT) for ip in (B4, C4, D4)}
    net.run(until_ns=50 * MS)
    t0 = net.now_ns
    bob.remove_address(C4)
    net.run(until_ns=t0 + 2000 * MS)
    assert alice.node(first[C4]) is None
    assert alice.node(first[B4]).state == alice.node(first[D4]).state == CmState.OFFLOADED
    # the child of 192.0.2.3 lost its SYN qhash: a SYN for it is not steered to the CM
    core = bob.core
    lst = next(x for x in core._listen_list() if x.ident == listener)
    assert {c.loc_addr: c.qhash_set for c in lst.children} == {
        ip_bytes(B4): True, ip_bytes(C4): False, ip_bytes(D4): True}
    before = set(core.conns())
    syn = Segment(src_mac=alice.mac, dst_mac=bob.mac, src_ip=ip_bytes(A4),
                  dst_ip=ip_bytes(C4), sport=45000, dport=PORT, seq=1000, ack=0, flags=SYN)
    core.receive(syn, net.now_ns)
    assert set(core.conns()) == before
    assert [f for f in core.frames_to_send() if f.segment.flags & SYN] == []
    # the other addresses still accept new connections
    again = {ip: alice.connect(ip, PORT) for ip in (B4, D4)}
    net.run(until_ns=net.now_ns + 50 * MS)
    assert all(alice.node(c).state == CmState.OFFLOADED for c in again.values())


def test_address_added_back_gets_its_child_qhash_again() -> None:
    net, alice, bob = established_pair([B4, C4], [A4])
    listener = bob.listen(PORT, None, policy=Accept())
    bob.remove_address(C4)
    bob.add_address(C4)
    lst = next(x for x in bob.core._listen_list() if x.ident == listener)
    assert {c.loc_addr: c.qhash_set for c in lst.children}[ip_bytes(C4)] is True
    conn = alice.connect(C4, PORT)
    net.run(until_ns=50 * MS)
    assert alice.node(conn).state == CmState.OFFLOADED


def test_new_address_gets_a_child_under_the_wildcard_listener() -> None:
    net, alice, bob = established_pair([B4], [A4])
    listener = bob.listen(PORT, None, policy=Accept())
    bob.add_address(D4)
    lst = next(x for x in bob.core._listen_list() if x.ident == listener)
    assert ip_bytes(D4) in {c.loc_addr for c in lst.children}
    conn = alice.connect(D4, PORT)
    net.run(until_ns=50 * MS)
    assert alice.node(conn).state == CmState.OFFLOADED


def test_specific_listener_on_the_removed_address_stops_taking_syns() -> None:
    net, alice, bob = established_pair([B4, C4], [A4])
    bob.listen(PORT, B4, policy=Accept())
    bob.remove_address(B4)
    syn = Segment(src_mac=alice.mac, dst_mac=bob.mac, src_ip=ip_bytes(A4),
                  dst_ip=ip_bytes(B4), sport=45001, dport=PORT, seq=1, ack=0, flags=SYN)
    bob.core.receive(syn, net.now_ns)
    assert bob.core.conns() == []


def _every_state(config: CmConfig) -> tuple[Network, Host, Host, dict[str, int]]:
    """bob holds nodes in many states on 192.0.2.2; returns conn ids on bob by label."""
    net = Network(5)
    alice = net.add_host("alice", A4)
    bob = net.add_host("bob", [B4, C4], config=config)
    carol = net.add_host("carol", D4)
    bob.listen(PORT, None, policy=Accept())
    bob.listen(PORT + 1, None, policy=Manual())
    bob.listen(PORT + 2, None, policy=Reject(b"no"))
    carol.listen(PORT, None, policy=Accept())
    carol.listen(PORT + 3, None, policy=Manual())
    labels: dict[str, int] = {}
    passive_off = alice.connect(B4, PORT)
    pending = alice.connect(B4, PORT + 1)  # MPAREQ_RCVD on bob
    rejected = alice.connect(B4, PORT + 2)  # bob: FIN_WAIT*/TIME_WAIT after the reject
    rejected_port = alice.node(rejected).loc_port
    active_off = bob.connect(D4, PORT, local_ip=B4)
    active_waiting = bob.connect(D4, PORT + 3, local_ip=B4)  # bob MPAREQ_SENT
    active_syn = bob.connect(D4, PORT + 9, local_ip=B4)  # no listener: SYN_SENT
    net.run(until_ns=20 * MS)
    labels["passive offloaded"] = bob_conn_for(bob, alice.node(passive_off).loc_port)
    labels["passive MPAREQ_RCVD"] = bob_conn_for(bob, alice.node(pending).loc_port)
    labels["passive after reject"] = bob_conn_for(bob, rejected_port)
    labels["active offloaded"] = active_off
    labels["active MPAREQ_SENT"] = active_waiting
    labels["active SYN_SENT"] = active_syn
    # hand-made half-open connections from alice's address: SYN only, and SYN + ACK
    for sport, label in ((46001, "passive SYN_RCVD"), (46002, "passive ESTABLISHED")):
        syn = Segment(src_mac=alice.mac, dst_mac=bob.mac, src_ip=ip_bytes(A4),
                      dst_ip=ip_bytes(B4), sport=sport, dport=PORT, seq=7000, ack=0,
                      flags=SYN, options=bytes.fromhex("020405b4"))
        bob.core.receive(syn, net.now_ns)
        net.pump()
        labels[label] = bob_conn_for(bob, sport)
    established = bob.node(labels["passive ESTABLISHED"])
    ack = Segment(src_mac=alice.mac, dst_mac=bob.mac, src_ip=ip_bytes(A4),
                  dst_ip=ip_bytes(B4), sport=46002, dport=PORT, seq=7001,
                  ack=established.loc_seq_num, flags=ACK)
    bob.core.receive(ack, net.now_ns)
    net.pump()
    return net, alice, bob, labels


def test_teardown_in_every_node_state_with_the_kernel_oops() -> None:
    net, _alice, bob, labels = _every_state(CmConfig())
    states = {k: bob.node(c).state for k, c in labels.items() if bob.node(c) is not None}
    assert states["passive offloaded"] == CmState.OFFLOADED
    assert states["passive MPAREQ_RCVD"] == CmState.MPAREQ_RCVD
    assert states["active MPAREQ_SENT"] == CmState.MPAREQ_SENT
    assert states["active SYN_SENT"] == CmState.SYN_SENT
    assert states["passive SYN_RCVD"] == CmState.SYN_RCVD
    assert states["passive ESTABLISHED"] == CmState.ESTABLISHED
    assert states["passive after reject"] in (CmState.FIN_WAIT2, CmState.TIME_WAIT)
    t0 = net.now_ns
    bob.remove_address(B4)
    net.run(until_ns=t0 + 2000 * MS)
    bugs = [r for r in net.trace.records if r.kind == "kernel_bug" and r.time_ns >= t0
            and r.fn == "irdma_cm_teardown_connections"]
    oopsed = {r.fields["conn"] for r in bugs}
    assert {labels["passive MPAREQ_RCVD"], labels["passive SYN_RCVD"],
            labels["passive ESTABLISHED"], labels["passive after reject"]} == oopsed
    assert all("oops" in r.fields["message"] for r in bugs)
    # offloaded nodes, passive and active, are reset and released
    assert bob.node(labels["passive offloaded"]) is None
    assert bob.node(labels["active offloaded"]) is None
    # the pre-accept node survives the oops; the active ones before offload go on
    assert bob.node(labels["passive MPAREQ_RCVD"]).state == CmState.MPAREQ_RCVD
    assert bob.node(labels["active MPAREQ_SENT"]) is not None
    assert sorted(s for s, _ in rst_sources(net, t0)) == ["bob", "bob"]


def test_teardown_in_every_node_state_with_the_null_check() -> None:
    config = CmConfig(quirks=Quirks(teardown_null_qp_oops=False))
    net, _alice, bob, labels = _every_state(config)
    t0 = net.now_ns
    pending = labels["passive MPAREQ_RCVD"]
    pending_port = bob.node(pending).rem_port
    bob.remove_address(B4)
    net.run(until_ns=t0 + 2000 * MS)
    assert not [r for r in net.trace.records if r.kind == "kernel_bug" and r.time_ns >= t0
                and r.fn == "irdma_cm_teardown_connections"]
    assert bob.node(pending) is None
    assert bob.node(labels["passive SYN_RCVD"]) is None
    assert bob.node(labels["passive ESTABLISHED"]) is None
    # the pending node got the CM's RST (irdma_send_reset), not a NIC one
    cm_rsts = [f for f in net.frames if f.time_ns >= t0 and f.sender == "bob"
               and f.segment is not None and f.segment.flags & RST
               and f.segment.dport == pending_port]
    assert len(cm_rsts) == 1 and "irdma_send_reset" in cm_rsts[0].comment
    assert cm_rsts[0].segment.src_ip == ip_bytes(B4)


def test_disconnect_all_tears_down_every_offloaded_connection() -> None:
    net, alice, bob = established_pair([B4, C4], [A4])
    bob.listen(PORT, None, policy=Accept())
    conns = [alice.connect(ip, PORT) for ip in (B4, C4, B4)]
    net.run(until_ns=50 * MS)
    t0 = net.now_ns
    selected = teardown.teardown_connections(bob.core, bytes(4), teardown.NO_VLAN, True,
                                             net.now_ns)
    net.pump()
    net.run(until_ns=t0 + 2000 * MS)
    assert len(selected) == 3
    assert [s for s, _ in rst_sources(net, t0)] == ["bob"] * 3
    assert all(alice.node(c) is None for c in conns) and bob.conns() == []


def test_link_down_leaves_ipv4_connections_alone() -> None:
    # irdma_netdevice_event(NETDEV_DOWN) only sets iw_status = 0; IPv4 addresses survive
    # a link down, so no inetaddr notifier runs and irdma_if_notify tears nothing down
    net, alice, bob = established_pair([B4], [A4])
    bob.listen(PORT, None, policy=Accept())
    conn = alice.connect(B4, PORT)
    net.run(until_ns=50 * MS)
    t0 = net.now_ns
    [bconn] = bob.conns()
    bob.link_down()
    net.run(until_ns=t0 + 2000 * MS)
    assert rst_sources(net, t0) == [] and upcalls(bob, t0) == []
    assert bob.node(bconn).state == CmState.OFFLOADED
    assert alice.node(conn).state == CmState.OFFLOADED
    assert ip_bytes(B4) in bob.addresses and not bob.core.link_up()


@pytest.mark.parametrize(("keep", "closed"), [(False, True), (True, False)])
def test_link_down_removes_ipv6_addresses_unless_kept(keep: bool, closed: bool) -> None:
    # addrconf_ifdown deletes the IPv6 addresses (keep_addr_on_down = 0), firing
    # irdma_inet6addr_event -> irdma_if_notify(ifup = false) -> teardown; the QP goes to
    # ERR without iw_status, so no RST reaches the wire (irdma_modify_qp)
    net, alice, bob = established_pair([B6], [A6], config=CmConfig(keep_addr_on_down=keep))
    bob.listen(PORT, None, policy=Accept(), ipv6=True)
    alice.connect(B6, PORT)
    net.run(until_ns=50 * MS)
    t0 = net.now_ns
    bob.link_down()
    net.run(until_ns=t0 + 2000 * MS)
    assert rst_sources(net, t0) == []
    assert [e for e, _, _ in upcalls(bob, t0)] == (["CLOSE"] if closed else [])
    assert (ip_bytes(B6) in bob.addresses) is keep


def test_teardown_is_deterministic() -> None:
    def run() -> list[bytes]:
        net, alice, bob = established_pair([B4, C4], [A4])
        bob.listen(PORT, None, policy=Accept())
        for ip in (B4, C4, B4):
            alice.connect(ip, PORT)
        net.run(until_ns=50 * MS)
        bob.remove_address(B4)
        net.run(until_ns=net.now_ns + 2000 * MS)
        return [f.data for f in net.frames]

    assert run() == run()


def test_quirk_defaults_follow_the_kernel() -> None:
    quirks = Quirks()
    assert quirks.teardown_null_qp_oops and quirks.if_notify_lower_dev
    assert replace(quirks, teardown_null_qp_oops=False).if_notify_lower_dev


def test_bob_ack_segments_unaffected_by_removal_of_other_address() -> None:
    net, alice, bob = established_pair([B4, C4], [A4])
    bob.listen(PORT, None, policy=Accept())
    keep = alice.connect(C4, PORT)
    net.run(until_ns=50 * MS)
    bob.remove_address(B4)
    t0 = net.now_ns
    qp = alice.core.qp(keep)
    qp.post_send(b"still alive after the other address went away", t0)
    alice.core._collect_qp_frames(keep)
    net.pump()
    net.run(until_ns=t0 + 50 * MS)
    acks = [f.segment for f in net.frames if f.time_ns >= t0 and f.sender == "bob"
            and f.segment is not None and f.segment.flags == ACK]
    assert acks and acks[0].src_ip == ip_bytes(C4)


@pytest.mark.parametrize("lower_dev", [True, False])
def test_wildcard_listener_on_a_vlan_follows_the_notified_vlan(lower_dev: bool) -> None:
    # irdma_add_mqh leaves the parent with its last child's VLAN (10); with the lower
    # device the notifier's 0xFFFF matches neither the listener nor the node.
    config = CmConfig(quirks=Quirks(if_notify_lower_dev=lower_dev))
    net = Network(3)
    alice = net.add_host("alice", A4, vlan=10)
    bob = net.add_host("bob", [B4], vlan=10, config=config)
    listener = bob.listen(PORT, None, policy=Accept())
    conn = alice.connect(B4, PORT)
    net.run(until_ns=50 * MS)
    bob.remove_address(B4)
    net.run(until_ns=net.now_ns + 2000 * MS)
    lst = next(x for x in bob.core._listen_list() if x.ident == listener)
    child = next(c for c in lst.children if c.loc_addr == ip_bytes(B4))
    assert child.qhash_set is lower_dev
    assert (alice.node(conn) is not None) is lower_dev
