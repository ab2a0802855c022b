"""A verb must raise CmError or act, never trip an internal assertion (design principle
6); a refused verb changes nothing. accept and reject reach a passive node only through
its CONNECT_REQUEST (event.provider_data)."""

from __future__ import annotations

from errno import ECONNRESET

import pytest
from helpers.audit_peer import (
    MS,
    Passive,
    Peer,
    listen,
    listener_destroyed_gen1,
    make_host,
    v2_request,
)
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.irdma.config import CmConfig
from mpa_emu.stacks.irdma.states import CmState

from mpa_emu.wire.segment import ACK, RST, SYN


def test_second_close_of_a_node_kept_alive_by_its_synack_entry_is_refused() -> None:
    # GEN_1 with an AH/qhash latency: close() in SYN_RCVD sends the RST that consumes
    # the base reference (irdma_cm_close); the pending qhash completion keeps the node and
    # then sends the SYN-ACK whose send entry holds the only reference. A second close()
    # runs irdma_cleanup_retrans_entry on that last reference: in the core an
    # AssertionError escapes; the kernel never gets there (irdma_cm_close is reached only
    # through irdma_qp_disconnect, and this passive node has no QP).
    p = make_host(CmConfig(gen=1, ah_latency_ns=3 * MS))
    listen(p)
    Passive(p, 1).syn()
    [conn] = p.core.conns()
    p.core.close(conn, now_ns=p.now)
    assert [s.flags for s in p.drain()] == [0x14]  # RST|ACK
    p.at(3 * MS)
    view = p.core.node(conn)
    assert view is not None and view.state == CmState.SYN_RCVD and view.retransmitting
    with pytest.raises(CmError):
        p.core.close(conn, now_ns=p.now)
    assert p.core.node(conn) == view and p.drain() == []


def test_reject_on_a_listener_destroyed_node_the_application_never_saw_is_refused(
        ) -> None:
    # GEN_1 stray SYN-ACK (see test_audit_errata): LISTENER_DESTROYED, the send entry holds
    # the only reference. reject() trips the same assertion in irdma_cleanup_retrans_entry.
    p, conn = listener_destroyed_gen1(3 * MS)
    p.at(3 * MS)
    view = p.core.node(conn)
    assert view is not None and view.state == CmState.LISTENER_DESTROYED
    with pytest.raises(CmError):
        p.core.reject(conn, now_ns=p.now)
    assert p.core.node(conn) == view and p.drain() == []


def test_accept_on_a_node_stuck_in_the_option_loop_is_refused() -> None:
    # irdma_process_options: the zero-length option leaves the node LISTENING with the lookup
    # reference never released; destroy_listen makes it LISTENER_DESTROYED; accept()
    # then drops one reference, the node survives, and the row's check
    # ("table allows CLOSED") raises AssertionError out of the verb.
    p = make_host(CmConfig(gen=1))  # GEN_1: the listener's RST needs no AH
    listen(p)
    pas = Passive(p, 1)
    pas.syn(bytes.fromhex("03000000"))
    pas.syn(bytes.fromhex("03000000"))  # its retransmission loops as well
    [conn] = p.core.conns()
    p.core.destroy_listen(1, now_ns=p.now)
    view = p.core.node(conn)
    assert view is not None and view.state == CmState.LISTENER_DESTROYED
    with pytest.raises(CmError):
        p.core.accept(conn, now_ns=p.now)
    assert p.core.node(conn) == view


def test_accept_and_reject_before_the_connect_request_are_refused() -> None:
    # ESTABLISHED, no MPA request yet: nothing was indicated, whatever the state
    p = make_host()
    listen(p)
    pas = Passive(p, 1)
    pas.syn()
    pas.ack()
    [conn] = p.core.conns()
    view = p.core.node(conn)
    assert view is not None and view.state == CmState.ESTABLISHED
    for verb in (p.core.accept, p.core.reject):
        with pytest.raises(CmError, match="no CONNECT_REQUEST"):
            verb(conn, now_ns=p.now)
    assert p.core.node(conn) == view and p.drain() == [] and p.ups == []


def early_request(p: Peer) -> tuple[Passive, int]:
    """A peer that ACKs the ISN sends its MPA request before the delayed SYN-ACK: the node
    is indicated while the pending qhash completion still holds a reference."""
    listen(p)
    pas = Passive(p, 1)
    assert pas.syn() == []
    [conn] = p.core.conns()
    view = p.core.node(conn)
    assert view is not None
    pas.isn_h = view.loc_seq_num - 1  # irdma_check_seq wants ack == loc_seq_num
    pas.ack(v2_request())
    assert [(u.event, u.conn) for u in p.ups] == [(IwEvent.CONNECT_REQUEST, conn)]
    return pas, conn


def test_failed_accept_leaves_the_node_to_its_qhash_reference_and_gives_it_back() -> None:
    # irdma_accept after a peer RST: -ECONNRESET and irdma_rem_ref_cm_node; the pending
    # qhash completion still holds the node, which stays in MPAREQ_RCVD until the
    # completion's SYN-ACK (sent whatever the state, irdma_send_syn_cqp_callback) runs out of
    # retransmissions
    p = make_host(CmConfig(gen=1, ah_latency_ns=3 * MS))
    pas, conn = early_request(p)
    pas.ack(extra=RST)
    with pytest.raises(CmError) as err:
        p.core.accept(conn, now_ns=p.now)
    assert err.value.errno == ECONNRESET
    assert p.drain() == [] and p.ups[-1].event == IwEvent.CONNECT_REQUEST
    view = p.core.node(conn)
    assert view is not None and view.state == CmState.MPAREQ_RCVD
    for verb in (p.core.accept, p.core.reject):
        with pytest.raises(CmError, match="no handle"):
            verb(conn, now_ns=p.now)
    assert p.core.node(conn) == view
    out = p.run_out()
    assert out[0][1].flags == SYN | ACK and out[-1][1].flags == RST | ACK
    assert p.core.node(conn) is None


def test_reject_in_listener_destroyed_leaves_the_node_to_its_qhash_reference() -> None:
    # irdma_cm_reject in LISTENER_DESTROYED: no packet, one put; the qhash completion's
    # reference keeps the node until its stray SYN-ACK runs out
    p = make_host(CmConfig(gen=1, ah_latency_ns=3 * MS))
    _, conn = early_request(p)
    p.core.destroy_listen(1, now_ns=p.now)
    assert [s.flags for s in p.drain()] == [RST | ACK]  # irdma_dec_refcnt_listen
    p.core.reject(conn, now_ns=p.now)
    assert p.drain() == []
    view = p.core.node(conn)
    assert view is not None and view.state == CmState.LISTENER_DESTROYED
    with pytest.raises(CmError, match="no handle"):
        p.core.reject(conn, now_ns=p.now)
    out = p.run_out()
    assert out[0][1].flags == SYN | ACK and out[-1][1].flags == RST | ACK
    assert p.core.node(conn) is None
