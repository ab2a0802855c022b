"""Teardown by address: ``irdma_cm_teardown_connections``, ``irdma_if_notify`` and
``irdma_qhash_ctrl``.

Addresses are compared the way the kernel compares its ``u32 loc_addr[4]``: an IPv4
address sits in the first word and the other three are zero. :func:`addr_key` gives that
16-byte form; the compare length follows the *notified* address's family (4 bytes for
IPv4, 16 for IPv6), never the node's, so an IPv4 removal also selects an IPv6 node whose
first 32-bit word equals it (``irdma_teardown_list_prep`` compares
``nfo->ipv4 ? 4 : 16`` bytes).

The selection walks the core's index of nodes by (local address, VLAN): only the index
keys (one per local address in use) are compared, and only the nodes under matching keys
are touched, so the cost follows the matches, not the size of the node table. Selected
nodes are processed in conn id order (the kernel's order follows its hash buckets).

A passive node that was never accepted has no QP, and the kernel dereferences NULL on it.
By default (``Quirks.teardown_null_qp_oops``) the emulator records a ``kernel_bug`` and
goes on with the next node (the kernel's notifier would die there instead). With the
quirk off it models the obvious fix: such a node gets the CM's RST and is freed, as
``irdma_cm_close`` does for the early states.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any, Protocol

from mpa_emu.stacks.irdma import disconnect
from mpa_emu.stacks.irdma.states import CmState
from mpa_emu.wire.flow import NO_VLAN


def addr_key(ip: bytes) -> bytes:
    """The 16-byte ``loc_addr[4]`` form of a packed 4- or 16-byte address."""
    if len(ip) == 4:
        return ip + bytes(12)
    if len(ip) == 16:
        return ip
    raise ValueError(f"address must be 4 or 16 bytes, got {len(ip)}")


def addr_matches(node_addr: bytes, ipaddr: bytes, ipv4: bool) -> bool:
    """``!memcmp(node->loc_addr, ipaddr, ipv4 ? 4 : 16)`` on the kernel's word arrays."""
    length = 4 if ipv4 else 16
    return addr_key(node_addr)[:length] == addr_key(ipaddr)[:length]


class NodeLike(Protocol):
    """The node fields teardown reads (``mpa_emu.stacks.irdma.node.CmNode`` has them)."""

    conn: int
    state: CmState
    client: bool
    accelerated: bool

    @property
    def loc_addr(self) -> bytes:
        """Local address."""

    @property
    def vlan_id(self) -> int:
        """VLAN id (0xFFFF untagged)."""


class ChildLike(Protocol):
    """A wildcard listener's per-address child (``ChildListener``)."""

    loc_addr: bytes
    vlan_id: int
    qhash_set: bool


class ListenerLike(Protocol):
    """A parent listener (``Listener``)."""

    loc_addr: bytes
    loc_port: int
    ipv4: bool
    vlan_id: int
    wildcard: bool
    qhash_set: bool
    children: Any


class TeardownHost(disconnect.DisconnectHost, Protocol):
    """What teardown and if_notify need from the CM core on top of the disconnect path."""

    rf_reset: bool
    """``rf->reset``: a device reset is in progress."""

    def _local_keys(self) -> Iterable[tuple[bytes, int]]:
        """The (local address, VLAN id) keys of the node index, one per address in use."""

    def _nodes_on(self, ip: bytes, vlan_id: int) -> Collection[NodeLike]:
        """The nodes under one key of the index."""

    def conns(self) -> Iterable[int]:
        """Every node of the table (``cm_hash_tbl``), in table order."""

    def _cm_node(self, conn: int) -> NodeLike | None:
        """The node of ``conn`` if it is in the table."""

    def _has_driver_qp(self, conn: int) -> bool:
        """``cm_node->iwqp != NULL``: active nodes from ``irdma_connect`` on, passive
        ones from ``irdma_accept`` on."""

    def _reset_node(self, conn: int, now_ns: int) -> None:
        """Send the CM's RST for the node and free it (the NULL-checked teardown)."""

    def _listen_list(self) -> Iterable[ListenerLike]:
        """``cm_core->listen_list``, newest first."""

    def _manage_syn_qhash(self, addr: bytes, port: int, vlan: int, ipv4: bool, add: bool,
                         now_ns: int) -> bool:
        """``irdma_manage_qhash(TCP_SYN, ADD|DELETE, wait=false)``; ``True`` on success."""

    def _new_child_listener(self, parent: ListenerLike, addr: bytes, vlan: int) -> ChildLike:
        """``kmemdup`` of the parent as a child for ``addr`` (not yet linked)."""


# ---- irdma_cm_teardown_connections ---------------------------------------------------

def select_nodes(core: TeardownHost, ipaddr: bytes, vlan: int, ipv4: bool,
                 disconnect_all: bool) -> list[int]:
    """``irdma_teardown_list_prep``: every node whose local address matches over the
    notified family's length and whose VLAN equals ``vlan``; all nodes for
    ``disconnect_all``. Offloaded nodes are included; listeners are not in the table."""
    if disconnect_all:
        return list(core.conns())
    selected: list[int] = []
    for key, node_vlan in core._local_keys():
        if node_vlan == vlan and addr_matches(key, ipaddr, ipv4):
            selected.extend(node.conn for node in core._nodes_on(key, node_vlan))
    selected.sort()
    return selected


def teardown_connections(core: TeardownHost, ipaddr: bytes, vlan: int,
                         disconnect_all: bool, now_ns: int, *, ipv4: bool | None = None
                         ) -> list[int]:
    """``irdma_cm_teardown_connections(iwdev, ipaddr, nfo, disconnect_all)``.

    ``vlan`` is ``nfo->vlan_id`` and ``ipv4`` is ``nfo->ipv4`` (by default the family of
    ``ipaddr``). Each selected node's QP is moved to error (``irdma_modify_qp(ERR)``):
    the NIC sends a RST where the TCP connection is alive and the 100 ms close timer
    leads to the CLOSE upcall. Returns the selected conn ids, in processing order.
    """
    if ipv4 is None:
        ipv4 = len(ipaddr) == 4
    selected = select_nodes(core, ipaddr, vlan, ipv4, disconnect_all)
    core._record("teardown", "irdma_cm_teardown_connections", now_ns,
                ipaddr=ipaddr, vlan=vlan, ipv4=ipv4, disconnect_all=disconnect_all,
                selected=selected)
    for conn in selected:
        _teardown_one(core, conn, now_ns)
    return selected


def device_reset(core: TeardownHost, now_ns: int) -> list[int]:
    """A device reset: ``rf->reset`` set, then ``irdma_cm_teardown_connections`` with
    ``disconnect_all``, whose reset branch calls ``irdma_cm_disconn`` for every QP (the
    CLOSE decision of ``irdma_cm_disconn_true`` holds under ``rf->reset``). Mainline
    irdma has no caller passing ``disconnect_all``; its predecessor's close on a reset
    (``i40iw_close``) did exactly this. Returns the conn ids torn down."""
    core.rf_reset = True
    try:
        return teardown_connections(core, bytes(4), NO_VLAN, True, now_ns)
    finally:
        core.rf_reset = False


def _teardown_one(core: TeardownHost, conn: int, now_ns: int) -> None:
    node = core._cm_node(conn)
    if node is None:
        return  # freed by an earlier node's teardown (refcount_inc_not_zero failed)
    if core.qp(conn) is not None:
        disconnect.modify_qp(core, conn, "err", now_ns)
        if getattr(core, "rf_reset", False):
            disconnect.cm_disconn(core, conn, now_ns)  # if (iwdev->rf->reset)
        return
    if core._has_driver_qp(conn):
        # An active node before offload: its QP has no TCP state yet (hw_tcp_state 0),
        # so irdma_modify_qp(ERR) neither resets nor disconnects; the CM node goes on.
        core._record("teardown_node", "irdma_cm_teardown_connections", now_ns, conn=conn,
                    state=node.state.name,
                    action="QP to ERROR before offload: nothing sent, node kept")
        mark = getattr(core, "qp_error", None)
        if mark is not None:
            mark(conn)  # irdma_modify_qp(RTS) will fail when the MPA reply comes
        return
    quirks = getattr(getattr(core, "config", None), "quirks", None)
    if quirks is None or quirks.teardown_null_qp_oops:
        # irdma_cm_teardown_connections: irdma_modify_qp(&cm_node->iwqp->ibqp, ...)
        # with iwqp == NULL for a passive node that was never accepted.
        core._record("kernel_bug", "irdma_cm_teardown_connections", now_ns, conn=conn,
                    state=node.state.name,
                    message="the kernel would oops here: irdma_cm_teardown_connections "
                            "dereferences a NULL iwqp")
        return
    core._record("teardown_node", "irdma_cm_teardown_connections", now_ns, conn=conn,
                state=node.state.name, action="no QP: RST and free (NULL check)")
    core._reset_node(conn, now_ns)


# ---- irdma_qhash_ctrl and irdma_if_notify --------------------------------------------

def qhash_ctrl(core: TeardownHost, parent: ListenerLike, ipaddr: bytes, ipv4: bool,
               ifup: bool, now_ns: int) -> int:
    """``irdma_qhash_ctrl``: enable or disable the SYN qhash of the wildcard child for
    ``ipaddr``; create the child when the address is new and going up.

    Returns the VLAN id the kernel leaves in ``nfo->vlan_id`` (the child's), which the
    teardown that follows then compares.
    """
    child = None
    for candidate in parent.children:
        if addr_matches(candidate.loc_addr, ipaddr, ipv4):
            child = candidate
            break
    allocated = False
    if child is None:
        if not ifup:
            return -1
        # kmemdup(parent): the child inherits the parent's VLAN.
        child = core._new_child_listener(parent, ipaddr, parent.vlan_id)
        allocated = True
    ok = core._manage_syn_qhash(child.loc_addr, parent.loc_port, child.vlan_id, ipv4, ifup,
                               now_ns)
    if ok:
        child.qhash_set = ifup
        if allocated:
            parent.children.insert(0, child)  # list_add: at the head
    core._record("qhash", "irdma_qhash_ctrl", now_ns, addr=child.loc_addr,
                port=parent.loc_port, vlan=child.vlan_id, add=ifup, ok=ok,
                new_child=allocated)
    return int(child.vlan_id)


def if_notify(core: TeardownHost, ip: bytes, ipv4: bool, ifup: bool, vlan: int,
              now_ns: int) -> list[int]:
    """``irdma_if_notify(iwdev, netdev, ip, ipv4, ifup)`` with ``vlan`` already derived
    from the device the notifier passed (the lower device under the
    ``if_notify_lower_dev`` quirk, so 0xFFFF for addresses on VLAN sub-interfaces).

    Listeners on that VLAN whose address is ``ip`` or the wildcard get their SYN qhash
    switched (through their children for a wildcard parent); on removal the address's
    connections are torn down. Returns the conn ids torn down.
    """
    nfo_vlan = vlan
    length = 4 if ipv4 else 16
    zero = bytes(16)
    for listener in list(core._listen_list()):
        if vlan != listener.vlan_id:
            continue
        key = addr_key(listener.loc_addr)
        if key[:length] != addr_key(ip)[:length] and key[:length] != zero[:length]:
            continue
        if listener.children:
            child_vlan = qhash_ctrl(core, listener, ip, ipv4, ifup, now_ns)
            if child_vlan >= 0:
                nfo_vlan = child_vlan  # irdma_qhash_ctrl overwrites nfo->vlan_id
        elif key[:length] != zero[:length]:
            ok = core._manage_syn_qhash(listener.loc_addr, listener.loc_port,
                                       listener.vlan_id, ipv4, ifup, now_ns)
            if ok:
                listener.qhash_set = ifup
            core._record("qhash", "irdma_if_notify", now_ns, addr=listener.loc_addr,
                        port=listener.loc_port, vlan=listener.vlan_id, add=ifup, ok=ok)
    if ifup:
        return []
    return teardown_connections(core, ip, nfo_vlan, False, now_ns, ipv4=ipv4)


def notify_vlan(address_vlan: int | None, *, lower_dev: bool) -> int:
    """The ``vlan_id`` ``irdma_if_notify`` computes with ``rdma_vlan_dev_vlan_id``: the
    address's VLAN, or 0xFFFF when the notifier passes the lower (real) device."""
    if lower_dev or address_vlan is None:
        return NO_VLAN
    return address_vlan
