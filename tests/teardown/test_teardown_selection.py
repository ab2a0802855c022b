"""irdma_cm_teardown_connections' selection (its compare length follows nfo->ipv4) and
irdma_if_notify / irdma_qhash_ctrl (utils.c), on a table of plain nodes.

The host here is a table and an index by (local address key, VLAN) with the QP
behaviour of ``mpa_emu.stacks.irdma.disconnect`` behind it, so the selection rules are checked
apart from the CM state machine.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.irdma.config import CmConfig, Quirks
from mpa_emu.stacks.irdma.offload import OffloadedQp, QpInit
from mpa_emu.stacks.irdma.states import CmState
from mpa_emu.stacks.irdma.teardown import NO_VLAN

from mpa_emu.stacks.irdma import teardown
from mpa_emu.wire.segment import RST

V4_A = bytes([192, 168, 10, 2])
V4_B = bytes([192, 168, 20, 2])
V6_A = bytes.fromhex("fd000000000000000000000000000002")
V6_SHADOW = bytes([192, 168, 10, 2]) + bytes.fromhex("000000000000000000000077")
"""An IPv6 address whose first 32-bit word equals V4_A (irdma_cm_teardown_connections)."""
V6_OF_V4 = V4_A + bytes(12)
"""The IPv6 address c0a8:a02:: that an IPv4 node's loc_addr[4] equals word for word."""


@dataclass
class Node:
    conn: int
    state: CmState
    client: bool
    loc_addr: bytes
    vlan_id: int


@dataclass
class Child:
    loc_addr: bytes
    vlan_id: int
    qhash_set: bool = True


@dataclass
class ListenerRec:
    loc_addr: bytes
    loc_port: int
    ipv4: bool
    vlan_id: int
    wildcard: bool
    qhash_set: bool = True
    children: list[Child] = field(default_factory=list)


class Table:
    """Nodes, listeners and a qhash log; QPs for the offloaded nodes."""

    def __init__(self, quirks: Quirks | None = None) -> None:
        self.config = CmConfig(quirks=quirks or Quirks())
        self.nodes: dict[int, Node] = {}
        self.qps: dict[int, OffloadedQp] = {}
        self.listeners: list[ListenerRec] = []
        self.qhash_ops: list[tuple[bytes, int, int, bool]] = []
        self.upcalls: list[tuple[int, IwEvent, int]] = []
        self.records: list[tuple[str, dict[str, Any]]] = []
        self.resets: list[int] = []
        self.wire: list[Any] = []
        self.close_entries: set[int] = set()
        self.qhash_fails = False

    def add(self, conn: int, state: CmState, addr: bytes, vlan: int = NO_VLAN,
            client: bool = False) -> None:
        self.nodes[conn] = Node(conn, state, client, addr, vlan)
        if state == CmState.OFFLOADED:
            self.qps[conn] = OffloadedQp(QpInit(
                conn=conn, active=client, gen=2, local_mac=b"\x02" * 6,
                remote_mac=b"\x04" * 6, local_ip=addr, remote_ip=addr, local_port=1000 + conn,
                remote_port=2000, vlan=None if vlan == NO_VLAN else vlan, pcp=0, tos=0,
                ttl=64, snd_nxt=100, rcv_nxt=200, snd_wnd=65535, snd_wscale=0,
                rcv_wscale=2, mss=1460, rtr_op="read", ird=1, ord=1, mpa_rev=2, crc=True,
                snd_markers=False, rcv_markers=False))

    # TeardownHost
    def _index(self) -> dict[tuple[bytes, int], list[Node]]:
        index: dict[tuple[bytes, int], list[Node]] = defaultdict(list)
        for node in self.nodes.values():
            index[(node.loc_addr, node.vlan_id)].append(node)
        return index

    def _local_keys(self) -> Iterable[tuple[bytes, int]]:
        return list(self._index())

    def _nodes_on(self, ip: bytes, vlan_id: int) -> Collection[Node]:
        return self._index().get((ip, vlan_id), [])

    def conns(self) -> Iterable[int]:
        return sorted(self.nodes)

    def _cm_node(self, conn: int) -> Node | None:
        return self.nodes.get(conn)

    def _has_driver_qp(self, conn: int) -> bool:
        node = self.nodes[conn]
        return conn in self.qps or node.client

    def _reset_node(self, conn: int, now_ns: int) -> None:
        self.resets.append(conn)
        del self.nodes[conn]

    def _listen_list(self) -> Iterable[ListenerRec]:
        return list(self.listeners)

    def _manage_syn_qhash(self, addr: bytes, port: int, vlan: int, ipv4: bool, add: bool,
                         now_ns: int) -> bool:
        self.qhash_ops.append((addr, port, vlan, add))
        return not self.qhash_fails

    def _new_child_listener(self, parent: Any, addr: bytes, vlan: int) -> Child:
        return Child(addr, vlan, qhash_set=False)

    # DisconnectHost
    def qp(self, conn: int) -> OffloadedQp | None:
        return self.qps.get(conn)

    def has_node(self, conn: int) -> bool:
        return conn in self.nodes

    def link_up(self) -> bool:
        return True

    def _send_cm_event(self, conn: int, event: IwEvent, status: int, now_ns: int) -> None:
        self.upcalls.append((conn, event, status))

    def _cm_close(self, conn: int, now_ns: int) -> None:
        self.nodes.pop(conn, None)

    def _schedule_close_entry(self, conn: int, now_ns: int) -> bool:
        self.close_entries.add(conn)
        return True

    def _collect_qp_frames(self, conn: int) -> None:
        self.wire.extend(self.qps[conn].frames_to_send())

    def _rts_ae_received(self, conn: int, now_ns: int) -> None:
        pass

    def _record(self, kind: str, fn: str, now_ns: int, **fields: Any) -> None:
        self.records.append((kind, fields))


def test_ipv4_removal_selects_only_local_address_and_vlan_matches() -> None:
    t = Table()
    t.add(1, CmState.OFFLOADED, V4_A)
    t.add(2, CmState.OFFLOADED, V4_B)
    t.add(3, CmState.OFFLOADED, V4_A, vlan=10)
    t.add(4, CmState.OFFLOADED, V6_A)
    assert teardown.select_nodes(t, V4_A, NO_VLAN, True, False) == [1]
    assert teardown.select_nodes(t, V4_A, 10, True, False) == [3]


def test_ipv4_removal_also_selects_an_ipv6_node_with_the_same_first_word() -> None:
    t = Table()
    t.add(1, CmState.OFFLOADED, V4_A)
    t.add(2, CmState.OFFLOADED, V6_SHADOW)
    t.add(3, CmState.OFFLOADED, V6_A)
    assert teardown.select_nodes(t, V4_A, NO_VLAN, True, False) == [1, 2]


def test_ipv6_removal_compares_16_bytes() -> None:
    t = Table()
    t.add(1, CmState.OFFLOADED, V4_A)
    t.add(2, CmState.OFFLOADED, V6_SHADOW)
    t.add(3, CmState.OFFLOADED, V6_A)
    assert teardown.select_nodes(t, V6_A, NO_VLAN, False, False) == [3]
    assert teardown.select_nodes(t, V6_SHADOW, NO_VLAN, False, False) == [2]
    # an IPv4 node's loc_addr[4] is {addr, 0, 0, 0}: the IPv6 address c0a8:a02:: hits it
    assert teardown.select_nodes(t, V6_OF_V4, NO_VLAN, False, False) == [1]


def test_disconnect_all_selects_every_node() -> None:
    t = Table()
    t.add(1, CmState.OFFLOADED, V4_A)
    t.add(2, CmState.SYN_RCVD, V4_B, vlan=7)
    t.add(3, CmState.MPAREQ_SENT, V6_A, client=True)
    assert teardown.select_nodes(t, V4_A, NO_VLAN, True, True) == [1, 2, 3]


def test_teardown_resets_offloaded_connections_and_arms_their_close_timer() -> None:
    t = Table()
    t.add(1, CmState.OFFLOADED, V4_A)
    t.add(2, CmState.OFFLOADED, V4_B)
    assert teardown.teardown_connections(t, V4_A, NO_VLAN, False, 0) == [1]
    assert [tx.segment.flags & RST for tx in t.wire] == [RST]
    assert t.close_entries == {1} and t.upcalls == []
    assert t.qps[2].frames_to_send() == []


def test_unaccepted_passive_node_is_a_kernel_oops_by_default() -> None:
    t = Table()
    t.add(1, CmState.MPAREQ_RCVD, V4_A)
    teardown.teardown_connections(t, V4_A, NO_VLAN, False, 0)
    bugs = [fields for kind, fields in t.records if kind == "kernel_bug"]
    assert len(bugs) == 1 and "oops" in bugs[0]["message"] and "NULL iwqp" in bugs[0]["message"]
    assert 1 in t.nodes and t.resets == []


def test_unaccepted_passive_node_is_reset_with_the_null_check() -> None:
    t = Table(Quirks(teardown_null_qp_oops=False))
    t.add(1, CmState.ESTABLISHED, V4_A)
    teardown.teardown_connections(t, V4_A, NO_VLAN, False, 0)
    assert t.resets == [1] and not [k for k, _ in t.records if k == "kernel_bug"]


def test_active_node_before_offload_is_left_to_the_cm() -> None:
    t = Table()
    t.add(1, CmState.SYN_SENT, V4_A, client=True)
    teardown.teardown_connections(t, V4_A, NO_VLAN, False, 0)
    assert 1 in t.nodes and t.wire == [] and t.resets == []
    notes = [f for k, f in t.records if k == "teardown_node"]
    assert notes and "nothing sent" in notes[0]["action"]


def test_if_notify_down_disables_child_qhash_and_tears_down() -> None:
    t = Table()
    wildcard = ListenerRec(bytes(4), 5000, True, NO_VLAN, True,
                           children=[Child(V4_A, NO_VLAN), Child(V4_B, NO_VLAN)])
    t.listeners.append(wildcard)
    t.add(1, CmState.OFFLOADED, V4_A)
    t.add(2, CmState.OFFLOADED, V4_B)
    assert teardown.if_notify(t, V4_A, True, False, NO_VLAN, 0) == [1]
    assert t.qhash_ops == [(V4_A, 5000, NO_VLAN, False)]
    assert [c.qhash_set for c in wildcard.children] == [False, True]


def test_if_notify_up_creates_a_child_for_a_new_address() -> None:
    t = Table()
    wildcard = ListenerRec(bytes(4), 5000, True, NO_VLAN, True,
                           children=[Child(V4_A, NO_VLAN)])
    t.listeners.append(wildcard)
    assert teardown.if_notify(t, V4_B, True, True, NO_VLAN, 0) == []
    assert [c.loc_addr for c in wildcard.children] == [V4_B, V4_A]
    assert wildcard.children[0].qhash_set and t.qhash_ops == [(V4_B, 5000, NO_VLAN, True)]


def test_if_notify_up_with_a_failing_qhash_adds_no_child() -> None:
    t = Table()
    t.qhash_fails = True
    wildcard = ListenerRec(bytes(4), 5000, True, NO_VLAN, True,
                           children=[Child(V4_A, NO_VLAN)])
    t.listeners.append(wildcard)
    teardown.if_notify(t, V4_B, True, True, NO_VLAN, 0)
    assert [c.loc_addr for c in wildcard.children] == [V4_A]


def test_if_notify_switches_a_specific_listener_and_skips_other_vlans() -> None:
    t = Table()
    specific = ListenerRec(V4_A, 6000, True, NO_VLAN, False)
    other = ListenerRec(V4_B, 6001, True, NO_VLAN, False)
    tagged = ListenerRec(V4_A, 6002, True, 10, False)
    t.listeners.extend([specific, other, tagged])
    teardown.if_notify(t, V4_A, True, False, NO_VLAN, 0)
    assert t.qhash_ops == [(V4_A, 6000, NO_VLAN, False)]
    assert (specific.qhash_set, other.qhash_set, tagged.qhash_set) == (False, True, True)


def test_lower_device_quirk_hides_vlan_nodes_from_the_teardown() -> None:
    t = Table()
    t.add(1, CmState.OFFLOADED, V4_A, vlan=10)
    vlan = teardown.notify_vlan(10, lower_dev=True)
    assert teardown.if_notify(t, V4_A, True, False, vlan, 0) == []
    vlan = teardown.notify_vlan(10, lower_dev=False)
    assert teardown.if_notify(t, V4_A, True, False, vlan, 0) == [1]
