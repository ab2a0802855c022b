"""The (local address, VLAN) index of the node table, which ``irdma_teardown_list_prep``
selection reads: nodes in the order they were filed (``list_add`` to ``cm_hash_tbl``
walked from its head by the teardown), without the nodes removed since, whichever way
the index drops them (lazily, or at once when a node moves to another VLAN)."""

from __future__ import annotations

from mpa_emu.stacks.irdma.config import CmConfig
from mpa_emu.stacks.irdma.node import CmNode
from mpa_emu.stacks.irdma.nodes import NodeTable, make_cm_node

A = bytes([192, 0, 2, 1])
B = bytes([192, 0, 2, 9])
UNTAGGED = 0xFFFF


def filed(table: NodeTable, port: int, local: bytes = A) -> CmNode:
    node = make_cm_node(table.new_conn(), (local, port, bytes([198, 51, 100, 7]), 4791,
                                           UNTAGGED), b"\x02" * 6, False, 0, CmConfig(), 0)
    table.add(node)
    return node


def ports(nodes: list[CmNode]) -> list[int]:
    return [n.loc_port for n in nodes]


def test_removed_nodes_leave_the_selection_and_the_order_stays() -> None:
    table = NodeTable()
    nodes = [filed(table, 1000 + i) for i in range(10)]
    filed(table, 2000, local=B)
    for i in (0, 3, 4, 9):
        table.remove(nodes[i])
    assert ports(table.local_nodes(A, UNTAGGED)) == [1001, 1002, 1005, 1006, 1007, 1008]
    # Past half of the list removed: still exactly the live nodes, in order.
    for i in (1, 5, 7):
        table.remove(nodes[i])
    assert ports(table.local_nodes(A, UNTAGGED)) == [1002, 1006, 1008]
    later = filed(table, 1010)
    assert ports(table.local_nodes(A, UNTAGGED)) == [1002, 1006, 1008, 1010]
    assert sorted(table.by_local) == [(A, UNTAGGED), (B, UNTAGGED)]
    for i in (2, 6, 8):
        table.remove(nodes[i])
    table.remove(later)
    # The last node of an address gone: the address is no longer a key of the index.
    assert table.local_nodes(A, UNTAGGED) == []
    assert list(table.by_local) == [(B, UNTAGGED)]


def test_a_node_moved_to_another_vlan_is_listed_there_only_once() -> None:
    table = NodeTable()
    first, second, third = (filed(table, p) for p in (1000, 1001, 1002))
    table.remove(first)
    table.rekey_vlan(second, 7)
    table.rekey_vlan(second, UNTAGGED)
    assert ports(table.local_nodes(A, UNTAGGED)) == [1002, 1001]
    assert table.local_nodes(A, 7) == []
    table.remove(third)
    table.rekey_vlan(second, 7)
    # Only removed nodes were left under the old VLAN: the key goes with them.
    assert list(table.by_local) == [(A, 7)]
    assert ports(table.local_nodes(A, 7)) == [1001]
