"""The virtual clock, the run loop and its bounds, scheduled calls, upcalls and policies,
the neighbour table and loopback, driven through stand-in cores."""

from __future__ import annotations

import errno
from typing import Any

from mpa_emu.stacks.contract.events import IwEvent, Upcall

from mpa_emu.net import Accept, Host, Manual, Reject, derive_seed
from mpa_emu.wire.addr import ip_bytes

US = 1_000
SECOND = 1_000_000_000


def test_the_clock_jumps_straight_to_the_next_timer(fake_net: Any) -> None:
    net = fake_net()
    alice = net.add_host("alice", "192.0.2.1")
    net.add_host("bob", "192.0.2.2")  # no listener: the SYN is never answered
    alice.connect("192.0.2.2", 31000)
    result = net.run(until_ns=10 * SECOND)
    syn_times = [f.time_ns for f in net.frames]
    assert syn_times == [i * SECOND for i in range(11)]  # a deadline at until_ns still runs
    assert result.reason == "until" and result.now_ns == 10 * SECOND
    assert result.events == 10 + 10  # 10 deliveries to bob and 10 timer firings, no ticks


def test_run_until_stops_before_later_deadlines_and_resumes(fake_net: Any) -> None:
    net = fake_net()
    alice = net.add_host("alice", "192.0.2.1")
    net.add_host("bob", "192.0.2.2")
    alice.connect("192.0.2.2", 31000)
    first = net.run(until_ns=SECOND // 2)
    assert (first.reason, net.now_ns, len(net.frames)) == ("until", SECOND // 2, 1)
    net.run(until_ns=SECOND)
    assert [f.time_ns for f in net.frames] == [0, SECOND]


def test_the_event_bound_stops_a_runaway_core_and_says_so(fake_net: Any) -> None:
    net = fake_net()
    alice = net.add_host("alice", "192.0.2.1")
    alice.core.get_timer = lambda: 5  # a core whose timer never moves on
    result = net.run(max_events=50)
    assert result.bounded and result.events == 50 and result.reason == "max_events"
    bound = next(net.trace.of_kind("run_bound"))
    assert bound.fields == {"max_events": 50, "next_ns": 5}


def test_an_idle_network_returns_at_once(fake_net: Any) -> None:
    net = fake_net()
    net.add_host("alice", "192.0.2.1")
    result = net.run()
    assert (result.reason, result.events, result.now_ns) == ("idle", 0, 0)


def test_scheduled_calls_run_at_their_virtual_time(fake_net: Any) -> None:
    net = fake_net()
    alice = net.add_host("alice", "192.0.2.1")
    bob = net.add_host("bob", "192.0.2.2")
    bob.listen(31000)
    call = net.at(5 * SECOND, alice.connect, "192.0.2.2", 31000)
    net.run()
    assert call.done and call.error is None and isinstance(call.result, int)
    assert net.frames[0].time_ns == 5 * SECOND
    assert [(u.event, u.time_ns) for u in alice.upcalls] == [
        (IwEvent.CONNECT_REPLY, 5 * SECOND + 20 * US)]


def test_a_refused_scheduled_verb_is_recorded_not_raised(fake_net: Any) -> None:
    net = fake_net()
    alice = net.add_host("alice", "192.0.2.1")
    call = net.at(SECOND, alice.connect, "198.51.100.9", 31000)  # nobody resolves it
    net.run()
    assert call.done and call.error is not None and call.error.errno == errno.ENOMEM
    failure = next(net.trace.of_kind("verb_failed"))
    assert failure.time_ns == SECOND and failure.fields["errno"] == errno.ENOMEM
    assert failure.fields["error"] == "neighbour not resolved (-ENOMEM)"


def test_a_bad_scheduled_call_stops_the_run_with_its_error(fake_net: Any) -> None:
    net = fake_net()
    alice = net.add_host("alice", "192.0.2.1")
    net.at(SECOND, alice.connect, "not an address", 31000)
    try:
        net.run()
    except ValueError as exc:
        assert "not an IPv4 or IPv6 address: 'not an address'" in str(exc)
    else:
        raise AssertionError("a bad address in a scheduled call went unnoticed")


def test_scheduling_in_the_past_is_refused(fake_net: Any) -> None:
    net = fake_net()
    net.add_host("alice", "192.0.2.1")
    net.run(until_ns=SECOND)
    try:
        net.at(0, print)
    except ValueError as exc:
        assert "clock is at 1000000000 ns" in str(exc)
    else:
        raise AssertionError("scheduling in the past was accepted")


def test_listener_policy_answers_connect_requests(fake_net: Any) -> None:
    net = fake_net()
    alice = net.add_host("alice", "192.0.2.1")
    bob = net.add_host("bob", "192.0.2.2")
    verbs: list[tuple[str, int, bytes, int]] = []
    bob.core.accept = lambda conn, *, private_data=b"", now_ns: verbs.append(
        ("accept", conn, private_data, now_ns))
    bob.core.reject = lambda conn, *, private_data=b"", now_ns: verbs.append(
        ("reject", conn, private_data, now_ns))
    bob.listen(31001, policy=Accept(b"welcome", delay_ns=7 * US))
    bob.listen(31002, policy=Reject(b"busy"))
    bob.listen(31003, policy=Manual())
    for port in (31001, 31002, 31003):
        alice.connect("192.0.2.2", port)
    net.run()
    assert verbs == [("reject", 2, b"busy", 10 * US), ("accept", 1, b"welcome", 17 * US)]
    assert [u.listener for u in bob.events(IwEvent.CONNECT_REQUEST)] == [1, 2, 3]


def test_callbacks_see_every_upcall_with_its_time(fake_net: Any) -> None:
    net = fake_net()
    alice = net.add_host("alice", "192.0.2.1")
    bob = net.add_host("bob", "192.0.2.2")
    seen: list[tuple[str, IwEvent, int]] = []

    def record(host: Host, upcall: Upcall) -> None:
        seen.append((host.name, upcall.event, upcall.time_ns))

    alice.on(record)
    bob.on(record, IwEvent.CONNECT_REQUEST)
    bob.listen(31000, policy=Manual())
    alice.connect("192.0.2.2", 31000)
    net.run()
    assert seen == [("bob", IwEvent.CONNECT_REQUEST, 10 * US),
                    ("alice", IwEvent.CONNECT_REPLY, 20 * US)]


def test_neighbours_are_filled_for_hosts_sharing_a_vlan(fake_net: Any) -> None:
    net = fake_net()
    alice = net.add_host("alice", "192.0.2.1")
    bob = net.add_host("bob", "192.0.2.2")
    carol = net.add_host("carol", "198.51.100.3", vlan=20)
    dave = net.add_host("dave", "192.0.2.4", auto_neighbours=False)
    assert alice.core.neighbours == {ip_bytes("192.0.2.2"): bob.mac,
                                     ip_bytes("192.0.2.4"): dave.mac}
    assert carol.core.neighbours == {}
    assert dave.core.neighbours == {}
    carol.add_address("192.0.2.3")
    assert alice.core.neighbours[ip_bytes("192.0.2.3")] == carol.mac
    assert carol.core.neighbours[ip_bytes("192.0.2.1")] == alice.mac


def test_a_neighbour_set_by_hand_is_not_overwritten(fake_net: Any) -> None:
    net = fake_net()
    alice = net.add_host("alice", "192.0.2.1")
    alice.set_neighbour("192.0.2.2", None)
    net.add_host("bob", "192.0.2.2")
    assert alice.core.neighbours[ip_bytes("192.0.2.2")] is None


def test_loopback_frames_stay_inside_the_host(fake_net: Any) -> None:
    net = fake_net()
    alice = net.add_host("alice", ["192.0.2.1", "192.0.2.11"])
    bob = net.add_host("bob", "192.0.2.2")
    alice.listen(31000)
    alice.connect("192.0.2.11", 31000, local_ip="192.0.2.1")
    net.run()
    assert {f.interface for f in net.frames} == {"alice/lo"}
    assert all(f.loopback and "never on the wire" in f.comment for f in net.frames)
    assert bob.core.received == []
    assert [t for t, _ in alice.core.received] == [0, 0, 0]  # SYN, SYN-ACK, ACK
    assert net.interfaces() == ["alice", "bob", "alice/lo"]


def test_loopback_capture_can_be_turned_off(fake_net: Any) -> None:
    net = fake_net(capture_loopback=False)
    alice = net.add_host("alice", ["192.0.2.1", "192.0.2.11"])
    alice.listen(31000)
    alice.connect("192.0.2.11", 31000, local_ip="192.0.2.1")
    net.run()
    assert net.frames == [] and net.frames_sent == 3
    assert len(alice.events()) == 2


def test_each_core_gets_its_own_seed_derived_from_the_network_seed(fake_net: Any) -> None:
    net = fake_net(seed=42)
    alice = net.add_host("alice", "192.0.2.1")
    bob = net.add_host("bob", "192.0.2.2")
    assert alice.core.seed == derive_seed(42, "core:alice")
    assert bob.core.seed == derive_seed(42, "core:bob") != alice.core.seed
    assert derive_seed(42, "core:alice") != derive_seed(43, "core:alice")


def test_host_names_and_macs_must_be_unique(fake_net: Any) -> None:
    net = fake_net()
    net.add_host("alice", "192.0.2.1", mac="02:aa:00:00:00:01")
    for kwargs in ({"name": "alice"}, {"name": "bob", "mac": "02:aa:00:00:00:01"},
                   {"name": "bob", "mac": "03:00:00:00:00:01"}, {"name": ""}):
        try:
            net.add_host(**kwargs)
        except ValueError:
            continue
        raise AssertionError(f"add_host accepted {kwargs}")


def test_a_host_whose_link_is_down_receives_nothing(fake_net: Any) -> None:
    net = fake_net()
    alice = net.add_host("alice", "192.0.2.1")
    bob = net.add_host("bob", "192.0.2.2")
    bob.listen(31000)
    bob.link_down()
    alice.connect("192.0.2.2", 31000)
    net.run(until_ns=SECOND // 2)
    assert bob.core.received == [] and bob.core.addresses == {}
    drop = next(net.trace.of_kind("segment_dropped"))
    assert (drop.host, drop.fn, drop.fields["reason"]) == ("bob", "nic", "link is down")


def test_a_bad_address_leaves_the_network_unchanged(fake_net: Any) -> None:
    net = fake_net()
    for bad in ({"ip": "192.0.2.300"}, {"ip": ["192.0.2.1", "not an address"]},
                {"ip": "192.0.2.1", "vlan": 4095}):
        try:
            net.add_host("alice", **bad)
        except ValueError:
            continue
        raise AssertionError(f"add_host accepted {bad}")
    assert net.hosts == {}
    alice = net.add_host("alice", "192.0.2.1")
    assert alice.mac == bytes.fromhex("020000000001")


def test_default_macs_skip_one_taken_by_hand(fake_net: Any) -> None:
    net = fake_net()
    net.add_host("alice", "192.0.2.1", mac="02:00:00:00:00:02")
    bob = net.add_host("bob", "192.0.2.2")
    assert bob.mac == bytes.fromhex("020000000003")


def test_a_listener_made_on_the_core_directly_leaves_requests_pending(fake_net: Any) -> None:
    net = fake_net()
    alice = net.add_host("alice", "192.0.2.1")
    bob = net.add_host("bob", "192.0.2.2")
    verbs: list[int] = []
    bob.core.accept = lambda conn, *, private_data=b"", now_ns: verbs.append(conn)
    bob.core.create_listen(None, 31000)
    alice.connect("192.0.2.2", 31000)
    net.run()
    assert len(bob.events(IwEvent.CONNECT_REQUEST)) == 1 and verbs == []


def test_running_the_network_from_a_callback_is_refused(fake_net: Any) -> None:
    net = fake_net()
    net.add_host("alice", "192.0.2.1")
    call = net.at(SECOND, net.run)
    try:
        net.run()
    except RuntimeError as exc:
        assert "not re-entrant" in str(exc)
    else:
        raise AssertionError(f"nested run was accepted: {call}")
    assert net.run().reason == "idle"  # and the network still runs afterwards
