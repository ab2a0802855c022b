"""Read-only views of the node table for callers of the CM core: snapshots of a
connection and of a listener, the nodes on a local address, a connection's QP.

:class:`TableViews` is a base class of :class:`~mpa_emu.stacks.irdma.core.CmCore`; it reads only
the node table (:class:`~mpa_emu.stacks.irdma.nodes.NodeTable`) and never calls the core.
"""

from __future__ import annotations

from mpa_emu.stacks.irdma.contract import CoreOps
from mpa_emu.stacks.irdma.node import CmNode
from mpa_emu.stacks.irdma.offload.nic import HwQp
from mpa_emu.stacks.irdma.view import ListenerView, NodeView


class TableViews(CoreOps):
    """The table's read-only views (``nodes`` is the core's node table)."""

    def node(self, conn: int) -> NodeView | None:
        """A read-only snapshot of connection ``conn``, None once freed."""
        n = self.nodes.by_conn.get(conn)
        return None if n is None else NodeView.of(n)

    def conns(self) -> list[int]:
        """Ids of the nodes in the node table (``cm_hash_tbl``), in creation order."""
        return sorted(self.nodes.by_conn)

    def listener(self, ident: int) -> ListenerView | None:
        """A snapshot of a listener still in the listen list."""
        lst = self.nodes.listener_ids.get(ident)
        return None if lst is None else ListenerView.of(lst)

    def _nodes_on(self, ip: bytes, vlan_id: int) -> list[CmNode]:
        """Nodes whose local address is ``ip`` on ``vlan_id`` (0xFFFF untagged): the
        selection of ``irdma_teardown_list_prep`` without scanning the table."""
        return self.nodes.local_nodes(ip, vlan_id)

    def _local_keys(self) -> list[tuple[bytes, int]]:
        """The (local address, VLAN id) keys of the node index: one per local address in
        use, so a teardown can match addresses without touching every node."""
        return list(self.nodes.by_local)

    def qp(self, conn: int) -> HwQp | None:
        """The offloaded QP of a connection, None before offload or once freed."""
        n = self.nodes.by_conn.get(conn)
        return None if n is None else n.qp
