"""qedr under iw_cm when the application's calls and the adapter's events cross: what
iwcm.c does with qedr's upcalls (cm_conn_est_handler, cm_close_handler), the calls
iw_cm makes wait (IWCM_F_CONNECT_WAIT in iw_cm_disconnect and destroy_cm_id), and the
accept or reject that reaches qedr while an accepted handshake is still going on
(iw_cm_accept / iw_cm_reject in CONN_RECV: qedr_iw_accept, qedr_iw_reject)."""

from __future__ import annotations

import errno

import pytest
from helpers.cxgb4_lab import (
    IP_B,
    IP_RAW,
    KEY_REQ,
    PORT,
    make_net,
    mpa_frame,
    raw_close,
    raw_reset,
    raw_send,
)

from mpa_emu.net.host import Host
from mpa_emu.net.network import Network
from mpa_emu.net.policy import Accept, Manual
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.qedr import frames
from mpa_emu.ulp.iwcm import IwCmState
from mpa_emu.ulp.rdma_cm import RdmaCmEventType as Ev
from mpa_emu.wire import mpa
from mpa_emu.wire.segment import FIN, RST

MS = 1_000_000
S = 1_000_000_000
C_S = mpa.FLAG_CRC | mpa.FLAG_ENHANCED
E = IwEvent
REQUEST = mpa_frame(KEY_REQ, C_S, 2, bytes.fromhex("8004c004"))
"""An RFC 6581 request offering the Write and Read RTRs, IRD and ORD 4."""


def _ups(host: Host) -> list[tuple[IwEvent, int]]:
    return [(u.event, u.status) for u in host.upcalls]


def _events(host: Host) -> list[tuple[Ev, int]]:
    return [(e.event, e.status) for e in host.cm_events]


def _bugs(net: Network, host: str) -> list[str]:
    assert net.trace is not None
    return [r.fn for r in net.trace.records if r.kind == "kernel_bug" and r.host == host]


def _requested(policy: Accept | Manual) -> tuple[Network, Host, Host, int, int]:
    """A raw initiator's request held by (or accepted by) qedr, which then waits for the
    RTR (fw_passive_waits_rtr)."""
    net = make_net()
    b = net.add_host("b", IP_B, stack="qedr")
    raw = net.add_host("raw", IP_RAW)
    b.listen(PORT, policy=policy)
    sock = raw.connect(IP_B, PORT)
    net.run_for(MS)
    raw_send(net, raw, sock, REQUEST)
    net.run_for(MS)
    (req,) = b.events(E.CONNECT_REQUEST)
    return net, b, raw, sock, req.conn


def _two_qedr() -> tuple[Network, Host, Host]:
    net = Network(seed=3)
    a = net.add_host("a", "10.0.0.1", stack="qedr")
    b = net.add_host("b", "10.0.0.2", stack="qedr")
    b.listen(PORT, policy=Accept(b"ok"))
    return net, a, b


# ---- cm_conn_est_handler: an ESTABLISHED with an error is an event --------------------

def test_a_failed_handshake_after_accept_is_established_then_disconnected() -> None:
    # qed_iwarp_mpa_complete MPA_RST with a QP: qedr_iw_passive_complete issues
    # ESTABLISHED with -ECONNRESET, then CLOSE. iw_cm takes the first in CONN_RECV
    # (cm_conn_est_handler never looks at the status), the second from ESTABLISHED:
    # no BUG(), and rdma_cm hands the application ESTABLISHED then DISCONNECTED
    net, b, raw, sock, _conn = _requested(Accept())
    raw_reset(net, raw, sock)
    net.run_for(MS)
    assert _ups(b)[1:] == [(E.ESTABLISHED, -errno.ECONNRESET), (E.CLOSE, -errno.ECONNRESET)]
    assert not any(step.iwcm.bug for step in b.ulp_steps)
    assert _events(b) == [(Ev.CONNECT_REQUEST, 0), (Ev.ESTABLISHED, -errno.ECONNRESET),
                          (Ev.DISCONNECTED, -errno.ECONNRESET)]
    assert b.conns() == []


def test_an_accept_whose_handshake_fails_at_once_frees_the_ep() -> None:
    # the peer reset the connection while the request was held: the accept's mpa
    # offload completes with MPA_RST in the same call (ESTABLISHED -ECONNRESET, CLOSE),
    # and qedr_iw_close_event's kref_put frees the ep
    net, b, raw, sock, conn = _requested(Manual())
    raw_reset(net, raw, sock)
    net.run_for(MS)
    b.accept(conn, b"")
    net.run_for(MS)
    assert _ups(b)[1:] == [(E.ESTABLISHED, -errno.ECONNRESET), (E.CLOSE, -errno.ECONNRESET)]
    assert b.conns() == []


# ---- IWCM_F_CONNECT_WAIT: iw_cm_disconnect and destroy_cm_id wait ----------------------

@pytest.mark.parametrize("graceful", [True, False])
def test_a_disconnect_before_the_connect_reply_waits_for_it(graceful: bool) -> None:
    # iw_cm_disconnect waits while iw_cm_connect's IWCM_F_CONNECT_WAIT is set, that is
    # until cm_conn_rep_handler: the QP is untouched until the CONNECT_REPLY went up, then
    # it goes to CLOSING (a FIN) or ERROR (a RST) from RTS and the connection closes
    net, a, b = _two_qedr()
    conn = a.connect(b, PORT, private_data=b"hi")
    a.disconnect(conn, graceful=graceful)
    assert a.qp_state(conn).iwarp_state == "IDLE"
    net.run()
    assert _ups(a)[0] == (E.CONNECT_REPLY, 0)
    assert _ups(a)[-1] == (E.CLOSE, 0 if graceful else -errno.ECONNRESET)
    assert _events(a)[0] == (Ev.ESTABLISHED, 0) and _events(a)[-1][0] == Ev.DISCONNECTED
    assert a.conns() == [] and b.conns() == []
    sent_rst = any(f.segment.flags & RST for f in net.frames if f.sender == "a")
    assert sent_rst is not graceful


def test_a_destroy_before_the_connect_reply_waits_for_it() -> None:
    # destroy_cm_id waits the same way: the CONNECT_REPLY goes up, then the established
    # id's QP is aborted (iwcm_modify_qp_err) and the cm_id goes; nothing is left
    net, a, b = _two_qedr()
    conn = a.connect(b, PORT, private_data=b"hi")
    a.close(conn)
    net.run()
    assert _ups(a) == [(E.CONNECT_REPLY, 0)]
    assert any(f.segment.flags & RST for f in net.frames if f.sender == "a")
    assert a.conns() == [] and b.conns() == []


def test_a_disconnect_after_a_failed_connect_does_nothing() -> None:
    # the wait ends with a CONNECT_REPLY that failed (IDLE): iw_cm_disconnect does nothing
    net = make_net()
    a = net.add_host("a", "10.0.0.1", stack="qedr")
    net.add_host("raw", IP_RAW)  # nothing listens: the RST to the SYN
    conn = a.connect(IP_RAW, PORT)
    a.disconnect(conn, graceful=True)
    net.run()
    assert _ups(a) == [(E.CONNECT_REPLY, -errno.ECONNRESET)]
    assert a.conns() == []


def test_a_disconnect_after_accept_waits_for_established() -> None:
    # iw_cm_accept's IWCM_F_CONNECT_WAIT holds iw_cm_disconnect until cm_conn_est_handler:
    # the RTR arrives, ESTABLISHED goes up, then the QP goes from RTS to CLOSING (a FIN)
    net, b, raw, sock, conn = _requested(Manual())
    b.accept(conn, b"")
    net.run_for(MS)
    b.disconnect(conn, graceful=True)
    net.run_for(MS)
    assert b.qp_state(conn).iwarp_state == "IDLE" and _ups(b) == [(E.CONNECT_REQUEST, 0)]
    since = len(net.frames)
    raw_send(net, raw, sock, frames.rtr("write", crc=True))
    net.run_for(MS)
    assert _ups(b)[1] == (E.ESTABLISHED, 0)
    assert b.qp_state(conn).iwarp_state == "CLOSING"
    assert any(f.segment.flags & FIN for f in net.frames[since:] if f.sender == "b")


# ---- iw_cm_accept / iw_cm_reject in CONN_RECV after the accept -------------------------

def test_a_reject_after_the_accept_clears_the_qp_and_the_rtr_meets_it() -> None:
    # iw_cm_reject: the id is still CONN_RECV (-> IDLE) and qedr_iw_reject sets ep->qp =
    # NULL (qed_iwarp_reject too); nothing goes on the wire for the second ramrod in the
    # model. The RTR then completes the accepted handshake: qed_iwarp_mpa_complete's
    # RDMA_RETURN_OK dereferences ep->qp, the kernel's own bug
    net, b, raw, sock, conn = _requested(Manual())
    b.accept(conn, b"")
    net.run_for(MS)
    sent = len([f for f in net.frames if f.sender == "b"])
    b.reject(conn, b"no")
    net.run_for(MS)
    assert b.rdma_cm.state(conn) == IwCmState.IDLE
    assert b.qp_state(conn) is None
    assert len([f for f in net.frames if f.sender == "b"]) == sent
    raw_send(net, raw, sock, frames.rtr("write", crc=True))
    net.run_for(MS)
    assert _bugs(net, "b") == ["qed_iwarp_mpa_complete"]
    assert _ups(b) == [(E.CONNECT_REQUEST, 0)]


def test_a_reject_after_the_accept_then_a_reset_is_a_null_qp_in_qedr() -> None:
    # the handshake fails with MPA_RST (-ECONNRESET, not -ECONNREFUSED) and no QP:
    # qedr_iw_passive_complete's complete(&ep->qp->iwarp_cm_comp) dereferences NULL
    net, b, raw, sock, conn = _requested(Manual())
    b.accept(conn, b"")
    net.run_for(MS)
    b.reject(conn, b"no")
    raw_reset(net, raw, sock)
    net.run_for(MS)
    assert _bugs(net, "b") == ["qedr_iw_passive_complete"]
    assert _ups(b) == [(E.CONNECT_REQUEST, 0)]


def test_a_reject_after_the_accept_then_a_fin_releases_the_ep_quietly() -> None:
    # MPA_FIN is -ECONNREFUSED: with ep->qp NULL qedr_iw_passive_complete takes it for a
    # reject ("PASSIVE connection refused releasing ep...") and qed returns the ep
    net, b, raw, sock, conn = _requested(Manual())
    b.accept(conn, b"")
    net.run_for(MS)
    b.reject(conn, b"no")
    raw_close(net, raw, sock)
    net.run_for(MS)
    assert _bugs(net, "b") == [] and _ups(b) == [(E.CONNECT_REQUEST, 0)]
    assert b.conns() == []


def test_a_second_accept_frees_the_ep_under_qed() -> None:
    # qedr_iw_accept: QEDR_IWARP_CM_WAIT_FOR_CONNECT is already set on the QP, -EINVAL,
    # and the error path's kref_put drops the ep's only reference: a use after free when
    # qed calls back. iw_cm_accept's error path leaves the id IDLE
    net, b, raw, sock, conn = _requested(Manual())
    b.accept(conn, b"")
    net.run_for(MS)
    with pytest.raises(CmError) as info:
        b.accept(conn, b"")
    assert info.value.errno == errno.EINVAL
    assert _bugs(net, "b") == ["qedr_iw_accept"]
    assert b.rdma_cm.state(conn) == IwCmState.IDLE
    raw_send(net, raw, sock, frames.rtr("write", crc=True))
    net.run_for(MS)
    assert _ups(b) == [(E.CONNECT_REQUEST, 0)]


def test_an_accept_once_established_is_refused_by_iw_cm() -> None:
    # iw_cm_accept on an id no longer in CONN_RECV: -EINVAL before qedr, nothing changes
    net, b, raw, sock, conn = _requested(Manual())
    b.accept(conn, b"")
    raw_send(net, raw, sock, frames.rtr("write", crc=True))
    net.run_for(MS)
    assert _ups(b)[-1] == (E.ESTABLISHED, 0)
    with pytest.raises(CmError) as info:
        b.core.accept(conn, now_ns=net.now_ns)  # type: ignore[call-arg]
    assert info.value.before_iw_cm and _bugs(net, "b") == []
