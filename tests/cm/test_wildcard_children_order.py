"""irdma_add_mqh_4/6 build a wildcard listener's children by walking for_each_netdev: the
lower device first, then the VLAN devices in registration order, each device's addresses
in its list order (IPv4 ifa_list appended; IPv6 addr_list newest first among global
addresses, ipv6_link_dev_addr), each child list_add-ed at the head. The parent keeps the
VLAN of the last device walked (the emulator's existing quirk, now in walk order)."""

from __future__ import annotations

from mpa_emu.stacks.irdma.config import CmConfig
from mpa_emu.stacks.irdma.core import CmCore

MAC = bytes.fromhex("020000000002")
V10_A, V20, V10_B, LOWER = (bytes([10, 0, 10, 1]), bytes([10, 0, 20, 1]),
                            bytes([10, 0, 10, 2]), bytes([10, 0, 0, 1]))
G6_OLD = bytes.fromhex("20010db8000000000000000000000001")
G6_NEW = bytes.fromhex("20010db8000000000000000000000002")


def test_children_follow_device_registration_not_address_order() -> None:
    core = CmCore("P", MAC, CmConfig())
    core.add_address(V10_A, vlan=10)   # registers VLAN 10's device
    core.add_address(V20, vlan=20)     # registers VLAN 20's device
    core.add_address(V10_B, vlan=10)   # joins VLAN 10's device
    core.add_address(LOWER)            # the lower device, registered before any VLAN
    lid = core.create_listen(None, 4791)
    view = core.listener(lid)
    assert view is not None
    # walk: LOWER (lower dev), V10_A, V10_B (VLAN 10), V20 (VLAN 20); head inserts
    assert [(a, v) for a, v, _ in view.children] == [
        (V20, 20), (V10_B, 10), (V10_A, 10), (LOWER, 0xFFFF)]
    assert view.vlan_id == 20  # the last device walked, not the last address added
    assert core.netdevs.vlans() == [0xFFFF, 10, 20]


def test_ipv6_children_walk_the_newest_global_address_first() -> None:
    core = CmCore("P", MAC, CmConfig())
    core.add_address(G6_OLD)
    core.add_address(G6_NEW)
    lid = core.create_listen(None, 4791, ipv6=True)
    view = core.listener(lid)
    assert view is not None
    # addr_list: NEW, OLD; list_add at the head of the children reverses it
    assert [a for a, _, _ in view.children] == [G6_OLD, G6_NEW]


def test_a_vlan_device_outlives_its_last_address() -> None:
    core = CmCore("P", MAC, CmConfig())
    core.add_address(V10_A, vlan=10)
    core.add_address(V20, vlan=20)
    core.remove_address(V10_A, now_ns=0)
    core.add_address(V10_B, vlan=10)  # the same device, still ahead of VLAN 20's
    assert core.netdevs.vlans() == [0xFFFF, 10, 20]


def test_devices_that_are_down_give_no_children() -> None:
    # irdma_add_mqh_4 skips a netdev without IFF_UP; a NETDEV_DOWN of the lower device
    # takes its VLAN devices down with it, and IPv4 addresses stay configured
    core = CmCore("P", MAC, CmConfig())
    core.add_address(LOWER)
    core.add_address(V20, vlan=20)
    core.link_down(now_ns=0)
    assert set(core.addresses()) == {LOWER, V20}
    lid = core.create_listen(None, 4791)
    view = core.listener(lid)
    assert view is not None and view.children == ()
