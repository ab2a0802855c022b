"""A verb must raise CmError or act, never trip an internal assertion (design principle
6); a refused verb changes nothing. accept and reject reach a passive node only through
its CONNECT_REQUEST (event.provider_data)."""

from __future__ import annotations

import pytest
from audit_peer import MS, Passive, listen, make_host

from mpa_emu.cm.config import CmConfig
from mpa_emu.cm.errors import CmError
from mpa_emu.cm.states import CmState


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
    p = make_host(CmConfig(gen=1, ah_latency_ns=3 * MS))
    listen(p)
    Passive(p, 1).syn()
    [conn] = p.core.conns()
    p.core.destroy_listen(1, now_ns=p.now)
    p.at(3 * MS)
    view = p.core.node(conn)
    assert view is not None and view.state == CmState.LISTENER_DESTROYED
    with pytest.raises(CmError):
        p.core.reject(conn, now_ns=p.now)
    assert p.core.node(conn) == view and p.drain() == []


def test_accept_on_a_node_stuck_in_the_option_loop_is_refused() -> None:
    # errata 7: the zero-length option leaves the node LISTENING with the lookup
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
