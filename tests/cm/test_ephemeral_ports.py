"""Ephemeral local ports of ``irdma_connect`` without a local port: handed out in turn
from the dynamic range of RFC 6335 section 6 (49152..65535, 16,384 ports), skipping a
port whose 5-tuple is taken or that a listener holds; once all 16,384 are taken for a
destination the connect is refused with EADDRINUSE before anything changes."""

from __future__ import annotations

import errno

import pytest
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.irdma.config import CmConfig
from mpa_emu.stacks.irdma.core import CmCore
from mpa_emu.stacks.irdma.node import Listener
from mpa_emu.stacks.irdma.nodes import NodeTable, make_cm_node

MAC_A = bytes.fromhex("020000000001")
MAC_P = bytes.fromhex("020000000002")
IP_A = bytes([10, 0, 0, 1])
IP_P = bytes([10, 0, 0, 2])
FIRST, LAST = 49152, 65535


def core() -> CmCore:
    cm = CmCore("a", MAC_A, CmConfig(), seed=1)
    cm.add_address(IP_A)
    cm.set_neighbour(IP_P, MAC_P)
    return cm


def local_port(cm: CmCore, conn: int) -> int:
    view = cm.node(conn)
    assert view is not None
    return view.loc_port


def test_every_dynamic_port_once_then_eaddrinuse() -> None:
    cm = core()
    ports = [local_port(cm, cm.connect(IP_A, IP_P, 5000, now_ns=0))
             for _ in range(LAST - FIRST + 1)]
    assert ports == list(range(FIRST, LAST + 1))
    nodes_before = len(cm.nodes.by_key)
    with pytest.raises(CmError) as refused:
        cm.connect(IP_A, IP_P, 5000, now_ns=0)
    assert refused.value.errno == errno.EADDRINUSE
    assert len(cm.nodes.by_key) == nodes_before
    # Another destination port has all 16,384 ports to itself; the counter has wrapped.
    assert local_port(cm, cm.connect(IP_A, IP_P, 5001, now_ns=0)) == FIRST


def test_listening_ports_are_skipped() -> None:
    cm = core()
    cm.create_listen(IP_A, FIRST)
    cm.create_listen(None, FIRST + 1)
    assert local_port(cm, cm.connect(IP_A, IP_P, 5000, now_ns=0)) == FIRST + 2


def node_on(table: NodeTable, port: int, remote_port: int = 5000) -> None:
    key = (IP_A, port, IP_P, remote_port, 0xFFFF)
    table.add(make_cm_node(table.new_conn(), key, MAC_P, False, 0, CmConfig(), 0))


def test_a_freed_port_is_found_again_and_counts_follow_the_table() -> None:
    table = NodeTable()
    for port in range(FIRST, LAST + 1):
        node_on(table, port)
    with pytest.raises(CmError):
        table.free_port(IP_A, IP_P, 5000, 0xFFFF)
    freed = table.by_key[(IP_A, FIRST + 100, IP_P, 5000, 0xFFFF)]
    table.remove(freed)
    assert table.free_port(IP_A, IP_P, 5000, 0xFFFF) == (FIRST + 100, FIRST + 101)
    # A port below the dynamic range never counts against it.
    node_on(table, 4000)
    assert table.free_port(IP_A, IP_P, 5000, 0xFFFF)[0] == FIRST + 100


def test_a_listener_on_every_free_port_leaves_none() -> None:
    table = NodeTable()
    for port in range(FIRST, LAST):
        node_on(table, port)
    table.add_listener(Listener(1, IP_A, LAST, True, 0xFFFF, 16, False))
    with pytest.raises(CmError) as refused:
        table.free_port(IP_A, IP_P, 5000, 0xFFFF)
    assert refused.value.errno == errno.EADDRINUSE
    table.remove_listener(table.listeners[0])
    assert table.free_port(IP_A, IP_P, 5000, 0xFFFF)[0] == LAST
