"""The host's network devices in registration order, as ``for_each_netdev`` walks them.

``irdma_add_mqh_4``/``irdma_add_mqh_6`` build a wildcard listener's per-address children
by walking ``for_each_netdev``: the real (lower) device and every VLAN device on top of
it, in the order they were registered (a VLAN device is always registered after its
lower device), and within a device its address list. IPv4: ``in_dev->ifa_list``, new
addresses appended. IPv6: ``idev->addr_list``, where ``ipv6_link_dev_addr`` puts a new
address before the first one of the same or a narrower scope (all modelled addresses are
global), so the newest comes first. Each child is ``list_add``-ed at the head of the
parent's list, so the parent's list ends up in the reverse of the walk.

A VLAN device stays registered when its last address goes: only its addresses change.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from mpa_emu.wire.flow import NO_VLAN


class NetdevList:
    """VLAN ids of the registered devices, the lower device (``NO_VLAN``) first."""

    def __init__(self) -> None:
        self._order: list[int] = [NO_VLAN]
        self.up = True
        """``IFF_UP`` of the lower device; a NETDEV_DOWN of it closes its VLAN devices
        too (vlan_device_event), so one flag serves them all."""

    def register(self, vlan_id: int) -> bool:
        """Register the device of ``vlan_id`` if it is new (``register_netdevice`` of
        a VLAN device); True when it was."""
        if vlan_id in self._order:
            return False
        self._order.append(vlan_id)
        return True

    def vlans(self) -> list[int]:
        """The devices' VLAN ids in ``for_each_netdev`` order."""
        return list(self._order)

    def walk(self, addresses: Mapping[bytes, int], ipv4: bool) -> Iterator[tuple[bytes, int]]:
        """``(address, vlan_id)`` of one family in the order ``irdma_add_mqh_4``/``_6``
        visit them; ``addresses`` maps each address to its device's VLAN id in the order
        the addresses were added. A device that is down is skipped (``IFF_UP``)."""
        if not self.up:
            return
        for vlan_id in self._order:
            on_dev = [a for a, v in addresses.items() if v == vlan_id and (len(a) == 4) == ipv4]
            yield from ((a, vlan_id) for a in (on_dev if ipv4 else reversed(on_dev)))
