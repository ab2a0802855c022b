"""The node table and the listen list of one CM core (``cm_core->cm_hash_tbl`` and
``cm_core->listen_list``), with the indexes the emulator adds so lookups do not scan.

Nodes are found three ways: by the 5-tuple key ``irdma_find_node`` compares (addresses,
ports and VLAN), by connection id (the handle the application holds), and by (local
address, VLAN) for ``irdma_teardown_list_prep``. :class:`NodeTable` keeps the three in
step; it never calls the core and decides nothing about states or references.
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Iterable
from typing import Final

from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.irdma.config import CmConfig
from mpa_emu.stacks.irdma.conn_index import ConnIndex
from mpa_emu.stacks.irdma.mpa_policy import Rdma0Op
from mpa_emu.stacks.irdma.node import ChildListener, CmNode, Listener
from mpa_emu.stacks.irdma.offload.nic import StoredKey, stored_key
from mpa_emu.stacks.irdma.states import LISTENER_ACTIVE, ListenerState
from mpa_emu.stacks.irdma.tcp import MTU_TO_MSS_IPV4, MTU_TO_MSS_IPV6
from mpa_emu.wire.flow import FlowKey

IsnChooser = Callable[[bytes, int, bytes, int], "int | None"]
"""``(local ip, local port, remote ip, remote port) -> ISN`` of a new node, or None for
the seeded generator's (replay takes each connection's ISN from the recording)."""

PortDest = tuple[bytes, bytes, int, int]
"""(local address, remote address, remote port, VLAN id): the keys that compete for
the ephemeral ports of one destination."""

EPHEMERAL_FIRST: Final = 49152
EPHEMERAL_COUNT: Final = 0x4000

# ip_tos2prio (net/ipv4/route.c), indexed by IPTOS_TOS(tos) >> 1: rt_tos2priority.
_TOS2PRIO: Final = (0, 0, 0, 0, 2, 2, 2, 2, 6, 6, 6, 6, 4, 4, 4, 4)


def rt_tos2priority(tos: int) -> int:
    """Linux ``rt_tos2priority``: the 802.1p priority the kernel derives from a TOS."""
    return _TOS2PRIO[(tos & 0x1E) >> 1]


def is_loopback(local_ip: bytes, remote_ip: bytes) -> bool:
    """``irdma_ipv4_is_lpb`` / ``irdma_ipv6_is_lpb``: 127/8 or ::1, or both ends equal."""
    if local_ip == remote_ip:
        return True
    if len(remote_ip) == 4:
        return remote_ip[0] == 127
    return remote_ip == bytes(15) + b"\x01"


def make_cm_node(conn: int, key: FlowKey, rem_mac: bytes, lpb: bool, tos: int,
                 cfg: CmConfig, isn: int, listener: Listener | None = None) -> CmNode:
    """The fields ``irdma_make_cm_node`` gives a new node (the caller files it), with
    the ``listener`` of a passive node (``irdma_handle_syn_pkt``)."""
    node = CmNode(conn, key)
    node.do_lpb = lpb
    node.loc_seq_num = isn
    node.record_made(
        tos=tos, user_pri=rt_tos2priority(tos), rem_mac=rem_mac,
        mpa_frame_rev=cfg.mpa_rev, ird_size=cfg.max_ird, ord_size=cfg.max_ord,
        # tcp_cntxt.rcv_wnd is a u32; only the header field is cut to 16 bits (send.form)
        rcv_wscale=cfg.rcv_wscale, rcv_wnd=0x3FFFC >> cfg.rcv_wscale,
        mss=cfg.mtu - (MTU_TO_MSS_IPV4 if node.ipv4 else MTU_TO_MSS_IPV6),
        listener=listener)
    return node


def record_ird_ord(node: CmNode, ird: int, ord_: int, cfg: CmConfig) -> None:
    """``irdma_record_ird_ord``: the application's IRD/ORD within the device's
    limits; ORD 0 becomes 1 when the RTR is a zero-length read."""
    ird = min(ird, cfg.max_ird)
    if ord_ > cfg.max_ord:
        ord_ = cfg.max_ord
    elif ord_ == 0 and node.settings.send_rdma0_op is Rdma0Op.READ_ZERO:
        ord_ = 1
    node.record_ird_ord(ird, ord_)


class NodeTable:
    """Nodes by key, by connection id and by (local address, VLAN); listeners newest
    first; the counters for connection ids, listener ids and ephemeral ports."""

    __slots__ = ("by_conn", "by_key", "by_local", "eph_in_use", "listen_ports",
                 "listener_ids", "listeners", "local_dead", "next_conn", "next_listener",
                 "next_port")

    def __init__(self) -> None:
        self.by_key: dict[FlowKey, CmNode] = {}
        self.by_conn: ConnIndex[CmNode] = ConnIndex()
        self.by_local: dict[tuple[bytes, int], list[CmNode]] = {}
        """Nodes per (local address, VLAN) in filing order, the order
        ``irdma_teardown_list_prep`` walks them. A list rather than a dict (8 bytes a
        node, not about 50): a removed node stays until :meth:`local_nodes` skips it or
        the list is compacted once half of it is gone."""
        self.local_dead: dict[tuple[bytes, int], int] = {}
        """Removed nodes still in each ``by_local`` list."""
        self.listeners: list[Listener] = []
        """Parent listeners, newest first (``cm_core->listen_list``)."""
        self.listener_ids: dict[int, Listener] = {}
        self.next_conn = 1
        self.next_listener = 1
        self.next_port = EPHEMERAL_FIRST
        # Counts that let free_port refuse at once when every ephemeral port is taken:
        # keys on an ephemeral local port per destination, listeners per port.
        self.eph_in_use: dict[PortDest, int] = {}
        self.listen_ports: dict[int, int] = {}

    # ---- nodes ---------------------------------------------------------------------

    def new_conn(self) -> int:
        """The next connection id."""
        conn = self.next_conn
        self.next_conn += 1
        return conn

    def _file(self, key: StoredKey, node: CmNode) -> None:
        if key not in self.by_key and key[1] >= EPHEMERAL_FIRST:
            dest = (key[0], key[2], key[3], key[4])
            self.eph_in_use[dest] = self.eph_in_use.get(dest, 0) + 1
        self.by_key[key] = node

    def _unfile(self, key: FlowKey) -> None:
        del self.by_key[key]
        if key[1] >= EPHEMERAL_FIRST:
            dest = (key[0], key[2], key[3], key[4])
            left = self.eph_in_use[dest] - 1
            if left:
                self.eph_in_use[dest] = left
            else:
                del self.eph_in_use[dest]

    def add(self, node: CmNode) -> None:
        """File a new node under its key, its id and its (local address, VLAN)."""
        self._file(node.key, node)
        self.by_conn.add(node.conn, node)
        key = node.key
        self._index_local((key[0], key[4]), node)

    def remove(self, node: CmNode) -> None:
        """Take a destroyed node out of every index."""
        if self.by_key.get(node.key) is node:
            self._unfile(node.key)
        self.by_conn.pop(node.conn)
        self._unindex_local(node, node.key[4], lazy=True)

    def rekey_vlan(self, node: CmNode, vlan_id: int) -> None:
        """Give ``node`` a new VLAN and file it under its new key and index entry. A
        node already on the new key is found first (``irdma_find_node`` walks the
        bucket from its head)."""
        old = node.vlan_id
        key = stored_key((node.loc_addr, node.loc_port, node.rem_addr, node.rem_port, vlan_id))
        if self.by_key.get(node.key) is node:
            self._unfile(node.key)
        if key not in self.by_key:
            self._file(key, node)
        self._unindex_local(node, old, lazy=False)
        self._index_local((node.loc_addr, vlan_id), node)
        node.key = key

    def _index_local(self, local_key: tuple[bytes, int], node: CmNode) -> None:
        local = self.by_local.get(local_key)
        if local is None:
            self.by_local[local_key] = [node]
        else:
            local.append(node)

    def _unindex_local(self, node: CmNode, vlan_id: int, *, lazy: bool) -> None:
        """Take ``node`` out of its (local address, VLAN) list: at once when it stays
        filed (a new VLAN), else by counting it dead (it is no longer in ``by_conn``)
        and compacting the list once half of it is dead."""
        local_key = (node.key[0], vlan_id)
        local = self.by_local.get(local_key)
        if local is None:
            return
        if not lazy:
            for i, other in enumerate(local):
                if other is node:
                    del local[i]
                    break
            if len(local) <= self.local_dead.get(local_key, 0):  # none left alive
                del self.by_local[local_key]
                self.local_dead.pop(local_key, None)
            return
        dead = self.local_dead.get(local_key, 0) + 1
        if 2 * dead <= len(local):
            self.local_dead[local_key] = dead
            return
        by_conn = self.by_conn
        live = [n for n in local if by_conn.get(n.conn) is n]
        self.local_dead.pop(local_key, None)
        if live:
            self.by_local[local_key] = live
        else:
            del self.by_local[local_key]

    def local_nodes(self, ip: bytes, vlan_id: int) -> list[CmNode]:
        """The nodes filed under (``ip``, ``vlan_id``), in filing order."""
        local = self.by_local.get((ip, vlan_id))
        if local is None:
            return []
        if not self.local_dead.get((ip, vlan_id)):
            return list(local)
        by_conn = self.by_conn
        return [n for n in local if by_conn.get(n.conn) is n]

    def free_port(self, local_ip: bytes, remote_ip: bytes, remote_port: int,
                  vlan_id: int) -> tuple[int, int]:
        """An ephemeral port (49152..65535, in turn) free for this tuple and not a
        listening port, and the counter after it. When every port is taken the refusal
        is immediate: the counts say so without a scan."""
        taken = self.eph_in_use.get((local_ip, remote_ip, remote_port, vlan_id), 0)
        listening = self.listen_ports
        if taken >= EPHEMERAL_COUNT:
            raise CmError(errno.EADDRINUSE, "no free local port")
        by_key = self.by_key
        port = self.next_port
        for _ in range(EPHEMERAL_COUNT):
            nxt = port + 1 if port < EPHEMERAL_FIRST + EPHEMERAL_COUNT - 1 else EPHEMERAL_FIRST
            if (local_ip, port, remote_ip, remote_port, vlan_id) not in by_key \
                    and port not in listening:
                return port, nxt
            port = nxt
        raise CmError(errno.EADDRINUSE, "no free local port")

    # ---- listeners -----------------------------------------------------------------

    def add_listener(self, lst: Listener) -> None:
        """``list_add(&listener->list, &cm_core->listen_list)``: at the head."""
        self.listeners.insert(0, lst)
        self.listener_ids[lst.ident] = lst
        self.listen_ports[lst.loc_port] = self.listen_ports.get(lst.loc_port, 0) + 1

    def make_listen_node(self, found: Listener | None, addr: bytes, port: int, ipv4: bool,
                         vlan_id: int, backlog: int, wildcard: bool, tos: int,
                         addresses: Iterable[tuple[bytes, int]]) -> Listener:
        """``irdma_make_listen_node``: reuse ``found`` (a listener being destroyed,
        whose backlog count starts again at 0) or link a new one; a new wildcard
        listener gets a child per local address of its family (``irdma_add_mqh``),
        ``addresses`` given as ``(address, vlan_id)`` in ``for_each_netdev`` order
        (:meth:`mpa_emu.stacks.irdma.netdevs.NetdevList.walk`)."""
        if found is not None:
            lst = found
            lst.refcnt += 1  # the reference irdma_find_listener took is kept
            lst.reused_node = True
        else:
            lst = Listener(self.next_listener, addr, port, ipv4, vlan_id, backlog,
                           wildcard)
            self.next_listener += 1
            self.add_listener(lst)
        lst.ipv4 = ipv4
        lst.vlan_id = vlan_id
        lst.pend_accepts_cnt = 0
        lst.backlog = backlog
        lst.listener_state = LISTENER_ACTIVE
        lst.tos = tos
        if not lst.reused_node:
            if wildcard:
                for a, v in addresses:  # irdma_add_mqh_4/6: each child list_add-ed
                    lst.children.insert(0, ChildListener(a, v))
                    lst.vlan_id = v  # quirk: the parent keeps the last child's VLAN
            else:
                lst.qhash_set = True
        return lst

    def remove_listener(self, lst: Listener) -> None:
        """Unlink a listener whose last reference went."""
        if lst in self.listeners:
            self.listeners.remove(lst)
            left = self.listen_ports[lst.loc_port] - 1
            if left:
                self.listen_ports[lst.loc_port] = left
            else:
                del self.listen_ports[lst.loc_port]
        self.listener_ids.pop(lst.ident, None)

    def find_listener(self, addr: bytes, ipv4: bool, port: int, vlan_id: int,
                      mask: ListenerState) -> Listener | None:
        """``irdma_find_listener``: the newest listener on ``port`` whose state is in
        ``mask`` and that is a wildcard or matches address and VLAN."""
        for lst in self.listeners:
            if lst.ipv4 != ipv4 or lst.loc_port != port or not lst.listener_state & mask:
                continue
            if lst.wildcard or (lst.loc_addr == addr and lst.vlan_id == vlan_id):
                return lst
        return None

    def syn_steered(self, addr: bytes, ipv4: bool, port: int, vlan_id: int) -> bool:
        """A SYN qhash rule (a specific listener or a wildcard child) steers this SYN
        to the CM; otherwise it goes to the host stack."""
        for lst in self.listeners:
            if lst.ipv4 != ipv4 or lst.loc_port != port:
                continue
            if lst.wildcard:
                if any(c.qhash_set and c.loc_addr == addr and c.vlan_id == vlan_id
                       for c in lst.children):
                    return True
            elif lst.qhash_set and lst.loc_addr == addr and lst.vlan_id == vlan_id:
                return True
        return False
