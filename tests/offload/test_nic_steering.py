"""The NIC's flow steering (mpa_emu.stacks.irdma.offload.nic.Nic) when it reads the node table.

Kernel rules: after ``irdma_cm_init_tsa_conn`` the hardware QP owns the flow of the
connection, matched by the TCP context ``irdma_init_tcp_ctx`` gave it (addresses, ports,
VLAN tag); ``irdma_receive_ilq`` only sees flows no QP owns. A QP outlives its CM node
while its TCP can still send or answer; a device reset loses every QP.

The first tests drive :class:`Nic` alone with a plain dict as the node table and a QP
double; the last ones go through the CM core and the emulator's own QP.
"""

from __future__ import annotations

from dataclasses import dataclass

from helpers.cm_harness import IP_A, IP_P, MAC_A, MAC_P, PORT, syn_rcvd, to_host
from helpers.offload_peer import qp_init
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.irdma.config import CmConfig
from mpa_emu.stacks.irdma.core import CmCore
from mpa_emu.stacks.irdma.offload.nic import Nic, NicQp, StoredKey
from mpa_emu.stacks.irdma.offload.qp import QpInit

from mpa_emu.wire import mpa
from mpa_emu.wire.flow import FlowKey
from mpa_emu.wire.segment import ACK, FIN, SYN

K1 = StoredKey(b"\x0a\x00\x00\x02", PORT, b"\x0a\x00\x00\x01", 5000, 0xFFFF)
K2 = StoredKey(b"\x0a\x00\x00\x02", PORT, b"\x0a\x00\x00\x01", 5001, 0xFFFF)
K1_VLAN7 = StoredKey(*K1[:4], 7)


class DoubleQp:
    """The part of a QP the NIC reads: its next deadline and whether its TCP lives."""

    def __init__(self, init: QpInit) -> None:
        self.init = init
        self.timer: int | None = None
        self.tcp_alive = True

    def get_timer(self) -> int | None:
        return self.timer


@dataclass
class Node:
    """A node-table entry: the QP its flow was handed to."""

    qp: NicQp | None = None


def nic_and_table() -> tuple[Nic, dict[FlowKey, Node], list[DoubleQp]]:
    made: list[DoubleQp] = []

    def factory(init: QpInit) -> NicQp:
        qp = DoubleQp(init)
        made.append(qp)
        return qp  # type: ignore[return-value]

    table: dict[FlowKey, Node] = {}
    return Nic(factory, table), table, made


def offload(nic: Nic, table: dict[FlowKey, Node], key: StoredKey) -> tuple[Node, NicQp]:
    node = table.setdefault(key, Node())
    node.qp = nic.offload(key, qp_init(False), filed=True)
    return node, node.qp


def destroy(nic: Nic, table: dict[FlowKey, Node], key: StoredKey) -> None:
    """refs.destroy_connection's order: the NIC hears first, the table unfiles the node,
    the node drops its QP, then node_freed."""
    node = table[key]
    nic.unfiling(node, key)
    del table[key]
    qp, node.qp = node.qp, None
    assert qp is not None
    nic.node_freed(key, qp)


def test_the_factory_builds_the_qp_and_the_node_table_steers_its_flow() -> None:
    nic, table, made = nic_and_table()
    node, qp = offload(nic, table, K1)
    assert made == [qp] and nic.qp(K1) is qp and nic.qp(K2) is None
    assert nic.flow_qp(K1, node.qp) is qp and nic.flow_qp(K2, None) is None
    # no entry of its own: the answer comes from the table alone
    del table[K1]
    assert nic.qp(K1) is None


def test_a_qp_whose_node_is_destroyed_keeps_its_flow_while_its_tcp_runs() -> None:
    nic, table, _ = nic_and_table()
    _, qp = offload(nic, table, K1)
    double: DoubleQp = qp  # type: ignore[assignment]
    double.timer = 500
    nic.track(K1, qp, node_alive=True)
    destroy(nic, table, K1)
    assert nic.qp(K1) is qp and nic.flow_qp(K1, None) is qp
    assert nic.deadline() == 500 and nic.pop_due() == K1
    # its TCP runs out (CLOSED): nothing due, nothing to answer, no node: released
    double.timer, double.tcp_alive = None, False
    nic.track(K1, qp, node_alive=False)
    assert nic.qp(K1) is None and nic.deadline() is None


def test_a_qp_that_can_still_answer_outlives_its_node_without_a_deadline() -> None:
    nic, table, _ = nic_and_table()
    _, qp = offload(nic, table, K1)
    destroy(nic, table, K1)  # FIN_WAIT_2-like: no timer, TCP alive
    assert nic.qp(K1) is qp and nic.deadline() is None


def test_a_finished_qp_goes_with_its_node() -> None:
    nic, table, _ = nic_and_table()
    _, qp = offload(nic, table, K1)
    double: DoubleQp = qp  # type: ignore[assignment]
    double.tcp_alive = False
    destroy(nic, table, K1)
    assert nic.qp(K1) is None


def test_release_stops_steering_even_with_a_node_filed_under_the_key() -> None:
    nic, table, _ = nic_and_table()
    node, old = offload(nic, table, K1)
    nic.release(K1)
    assert node.qp is old and nic.qp(K1) is None and nic.flow_qp(K1, old) is None
    # the node goes: the NIC still answers nothing for the key
    destroy(nic, table, K1)
    assert nic.qp(K1) is None
    # a new connection on the tuple is offloaded and steered
    _, new = offload(nic, table, K1)
    assert nic.qp(K1) is new


def test_a_new_connection_on_a_lingering_qps_tuple_replaces_it() -> None:
    nic, table, _ = nic_and_table()
    _, old = offload(nic, table, K1)
    destroy(nic, table, K1)
    assert nic.qp(K1) is old
    nic.release(K1)  # irdma_receive_ilq: a SYN on the tuple, no node
    table[K1] = Node()  # the CM files the new node
    assert nic.qp(K1) is None
    _, new = offload(nic, table, K1)
    assert new is not old and nic.qp(K1) is new


def test_a_rekeyed_node_leaves_its_qp_on_the_key_it_was_offloaded_with() -> None:
    # irdma_init_tcp_ctx copied the VLAN into the QP's TCP context: a later change of
    # cm_node->vlan_id does not move the hardware flow
    nic, table, _ = nic_and_table()
    node, qp = offload(nic, table, K1)
    nic.rekeying(node, K1, K1_VLAN7)
    del table[K1]
    table[K1_VLAN7] = node
    assert nic.qp(K1) is qp and nic.qp(K1_VLAN7) is None
    assert nic.flow_qp(K1_VLAN7, node.qp) is None
    # the node goes later: the QP still owns the old key only
    destroy(nic, table, K1_VLAN7)
    assert nic.qp(K1) is qp and nic.qp(K1_VLAN7) is None


def test_a_rekey_onto_a_key_another_node_holds_leaves_that_nodes_flow_alone() -> None:
    nic, table, _ = nic_and_table()
    mover, moving_qp = offload(nic, table, K1)
    _, staying_qp = offload(nic, table, K1_VLAN7)
    nic.rekeying(mover, K1, K1_VLAN7)
    del table[K1]  # the new key is taken: the mover is not filed again
    assert nic.qp(K1) is moving_qp and nic.qp(K1_VLAN7) is staying_qp


def test_a_device_reset_leaves_no_qp_answering() -> None:
    nic, table, _ = nic_and_table()
    node, qp = offload(nic, table, K1)
    _, lingering = offload(nic, table, K2)
    double: DoubleQp = qp  # type: ignore[assignment]
    double.timer = 700
    nic.track(K1, qp, node_alive=True)
    destroy(nic, table, K2)
    assert nic.qp(K2) is lingering
    nic.release_all()
    assert node.qp is qp  # the CM node keeps its pointer; the hardware QP is gone
    assert nic.qp(K1) is None and nic.qp(K2) is None and nic.deadline() is None
    destroy(nic, table, K1)
    assert nic.qp(K1) is None
    # the device works again: a connection offloaded after the reset is steered
    _, new = offload(nic, table, K2)
    assert nic.qp(K2) is new


def test_a_stale_deadline_of_a_released_qp_is_skipped() -> None:
    nic, table, _ = nic_and_table()
    _, first = offload(nic, table, K1)
    _, second = offload(nic, table, K2)
    a: DoubleQp = first  # type: ignore[assignment]
    b: DoubleQp = second  # type: ignore[assignment]
    a.timer, b.timer = 100, 200
    nic.track(K1, first, node_alive=True)
    nic.track(K2, second, node_alive=True)
    a.tcp_alive = False
    destroy(nic, table, K1)  # has a deadline: stays
    assert nic.deadline() == 100
    nic.release(K1)
    assert nic.deadline() == 200 and nic.pop_due() == K2


# ---- through the CM core -----------------------------------------------------------

REQ = mpa.MpaFrame(request=True, rev=2, flags=0x50,
                   rtr=mpa.RtrBlock(ird=8, ord=4, write0=True, read0=True),
                   private_data=b"").to_bytes()


def established(sport: int = 5000) -> tuple[CmCore, int, int, int]:
    """A GEN_1 passive core with one accepted connection from the hand-made peer at
    ``IP_A:5000`` (ISN 100): the core, its conn, the peer's next sequence number and
    the number the peer must acknowledge next."""
    core, synack = syn_rcvd(CmConfig(gen=1), seed=5)
    core.receive(to_host(MAC_P, IP_A, IP_P, sport, PORT, flags=ACK, seq=101,
                         ack=synack.seq + 1, payload=REQ, src_mac=MAC_A), 0)
    core.frames_to_send()
    req = core.next_event()
    assert req is not None and req.event is IwEvent.CONNECT_REQUEST
    core.accept(req.conn, now_ns=0)
    [reply] = core.frames_to_send()
    assert reply.segment.seq == synack.seq + 1
    up = core.next_event()
    assert up is not None and up.event is IwEvent.ESTABLISHED
    return core, req.conn, 101 + len(REQ), synack.seq + 1 + len(reply.segment.payload)


def test_the_qp_of_a_freed_node_answers_the_peers_fin_and_the_cm_never_sees_it() -> None:
    core, conn, peer_seq, our_next = established()
    core.close(conn, now_ns=0)  # OFFLOADED: the node goes, the QP's TCP stays up
    assert core.node(conn) is None and core.frames_to_send() == []
    core.receive(to_host(MAC_P, IP_A, IP_P, 5000, PORT, flags=FIN | ACK, seq=peer_seq,
                         ack=our_next, src_mac=MAC_A), 10)
    sent = [t.segment for t in core.frames_to_send()]
    # RFC 9293 3.10.7.4 (eighth, the FIN bit): ESTABLISHED acknowledges the FIN
    assert sent and sent[0].flags & ACK and sent[0].ack == peer_seq + 1
    assert (sent[0].sport, sent[0].dport, sent[0].seq) == (PORT, 5000, our_next)
    assert not any(r.kind == "segment_dropped" for r in core.trace.records)  # type: ignore[union-attr]


def test_a_syn_on_the_tuple_of_a_lingering_qp_starts_a_new_cm_connection() -> None:
    core, conn, _, _ = established()
    core.close(conn, now_ns=0)
    core.receive(to_host(MAC_P, IP_A, IP_P, 5000, PORT, flags=SYN, seq=7000,
                         src_mac=MAC_A), 10)
    [synack] = [t.segment for t in core.frames_to_send()]
    assert synack.flags == SYN | ACK and synack.ack == 7001  # irdma_receive_ilq: a new node
    # the rest of the handshake reaches the new node, not the old QP
    core.receive(to_host(MAC_P, IP_A, IP_P, 5000, PORT, flags=ACK, seq=7001,
                         ack=synack.seq + 1, payload=REQ, src_mac=MAC_A), 20)
    req = core.next_event()
    assert req is not None and req.event is IwEvent.CONNECT_REQUEST and req.conn != conn


def test_after_a_device_reset_no_qp_answers_the_peer() -> None:
    core, _, peer_seq, our_next = established()
    core.device_reset(now_ns=5)
    core.frames_to_send()
    core.receive(to_host(MAC_P, IP_A, IP_P, 5000, PORT, flags=FIN | ACK, seq=peer_seq,
                         ack=our_next, src_mac=MAC_A), 10)
    assert core.frames_to_send() == []
