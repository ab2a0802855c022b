"""The one connection key: a TCP flow as one end sees it.

:data:`FlowKey` is (local address, local port, remote address, remote port, VLAN id),
the key of ``irdma_find_node`` in the CM's node table, of the NIC's connection hash and
of replay's recorded flows alike. An untagged flow has the VLAN id :data:`NO_VLAN`
(0xFFFF, what ``rdma_vlan_dev_vlan_id`` gives for a device without a VLAN), as in the
kernel; :func:`flow_key` and :func:`flow_vlan` convert from and to the ``None`` of an
untagged frame (``Segment.vlan``).
"""

from __future__ import annotations

from typing import Final

NO_VLAN: Final = 0xFFFF
"""The kernel's "no VLAN" value for ``vlan_id`` (``rdma_vlan_dev_vlan_id`` of a plain
netdev); VLAN ids proper are below 4096."""

FlowKey = tuple[bytes, int, bytes, int, int]
"""(local address, local port, remote address, remote port, VLAN id)."""


def flow_key(local_ip: bytes, local_port: int, remote_ip: bytes, remote_port: int,
             vlan: int | None) -> FlowKey:
    """The key of a flow whose frames carry the 802.1Q VLAN id ``vlan`` (None: untagged)."""
    return (local_ip, local_port, remote_ip, remote_port, NO_VLAN if vlan is None else vlan)


def flow_vlan(key: FlowKey) -> int | None:
    """The VLAN id a flow's frames carry, None when they are untagged."""
    vlan = key[4]
    return None if vlan == NO_VLAN else vlan
