"""siw's CLOSE upcalls against iw_cm's states (drivers/infiniband/core/iwcm.c).

A siw responder whose reply picked an RTR gives ESTABLISHED only when the peer's first
FPDU arrives (siw_accept: wait_for_peer_rts, siw_rtr_data_ready); until then iw_cm
holds the id in CONN_RECV, where cm_close_handler BUG()s on a CLOSE.

- The application's rdma_disconnect (iw_cm_disconnect) and rdma_destroy_id
  (destroy_cm_id) in that window wait on IWCM_F_CONNECT_WAIT, set by iw_cm_accept and
  cleared only by cm_conn_est_handler: the QP is not touched before ESTABLISHED, so no
  CLOSE may reach iw_cm in CONN_RECV (the model's own path, fixed).
- The peer closing in that window is the kernel's own: SIW_CM_WORK_PEER_CLOSE checks
  only cep->cm_id and upcalls DISCONNECT then CLOSE; the model keeps it and records a
  kernel_bug saying so.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest
from helpers.siw_pair import KEY_REQ, PEER_IP, SIW_IP, Pair, frame

from mpa_emu.net.host import Host
from mpa_emu.net.network import Network
from mpa_emu.stacks.contract.events import IwEvent, Upcall
from mpa_emu.ulp.iwcm import IwCmState
from mpa_emu.ulp.rdma_cm import RdmaCm, RdmaCmEventType

S_NS = 1_000_000_000
MS = 1_000_000
PORT = 31000


def _accept_then(verb: str) -> Callable[[Host, Upcall], None]:
    def policy(host: Host, up: Upcall) -> None:
        host.accept(up.conn)
        if verb == "close":
            host.close(up.conn)
        else:
            host.disconnect(up.conn, graceful=verb == "disconnect")
    return policy


@pytest.mark.parametrize("verb", ["disconnect", "abort", "close"])
def test_application_close_before_the_rtr_waits_for_established(verb: str) -> None:
    net = Network(seed=4, tracing=True)
    a = net.add_host("a", "192.0.2.1", stack="siw", params={"peer_to_peer": True})
    b = net.add_host("b", "192.0.2.2", stack="siw")
    b.listen(PORT, policy=_accept_then(verb))
    a.connect(b, PORT)
    net.run_for(S_NS)
    assert not any(step.iwcm.bug for step in b.ulp_steps), [
        step.iwcm.note for step in b.ulp_steps]
    # cm_conn_est_handler, then the waiting disconnect: CLOSE from ESTABLISHED/CLOSING
    assert [e.event for e in b.cm_events] == [RdmaCmEventType.CONNECT_REQUEST,
                                             RdmaCmEventType.ESTABLISHED,
                                             RdmaCmEventType.DISCONNECTED]
    assert [e.event for e in a.cm_events] == [RdmaCmEventType.ESTABLISHED,
                                             RdmaCmEventType.DISCONNECTED]
    assert b.conns() == []
    assert net.trace is not None and not list(net.trace.of_kind("kernel_bug"))


def test_peer_close_before_the_rtr_is_the_kernels_own_bug() -> None:
    p = Pair({})
    p.siw.create_listen(SIW_IP, PORT)
    sock = p.peer.connect(PEER_IP, SIW_IP, PORT, None, 0)
    p.run(MS)
    # rev 2, S, the block with P2P offering the Write RTR (RFC 6581 section 5)
    p.peer.send(sock, frame(KEY_REQ, 0x10, 2, b"", struct.pack("!HH", 0x8000 | 8,
                                                                0x8000 | 8)), p.now)
    p.run(p.now + 10 * MS)
    (req,) = p.upcalls
    p.siw.accept(req.conn, now_ns=p.now)
    p.run(p.now + 10 * MS)
    assert [u.event for u in p.upcalls] == [IwEvent.CONNECT_REQUEST]  # waits for the RTR
    p.peer.shutdown(sock, p.now)
    p.run(p.now + 10 * MS)
    assert [u.event for u in p.upcalls] == [IwEvent.CONNECT_REQUEST, IwEvent.DISCONNECT,
                                            IwEvent.CLOSE]
    (bug,) = p.trace.of_kind("kernel_bug")
    assert bug.fn == "siw_cm_work_handler" and bug.fields["conn"] == req.conn
    cm = RdmaCm()
    steps = [cm.upcall(u) for u in p.upcalls]
    assert steps[-1].iwcm.bug and steps[-1].iwcm.old == IwCmState.CONN_RECV


def test_modify_qp_err_before_the_rtr_goes_straight_to_the_qp() -> None:
    # ib_modify_qp(IB_QPS_ERR) is not an iw_cm call: nothing waits for ESTABLISHED;
    # siw_qp_modify -> siw_qp_cm_drop upcalls CLOSE on the CONN_RECV id at once, the
    # kernel's own BUG(), recorded as such.
    net = Network(seed=4, tracing=True)
    a = net.add_host("a", "192.0.2.1", stack="siw", params={"peer_to_peer": True})
    b = net.add_host("b", "192.0.2.2", stack="siw")

    def policy(host: Host, up: Upcall) -> None:
        host.accept(up.conn)
        host.modify_qp_err(up.conn)

    b.listen(PORT, policy=policy)
    a.connect(b, PORT)
    net.run_for(S_NS)
    assert [u.event for u in b.upcalls] == [IwEvent.CONNECT_REQUEST, IwEvent.CLOSE]
    assert net.trace is not None
    (bug,) = net.trace.of_kind("kernel_bug")
    assert bug.fn == "siw_qp_cm_drop"
    assert any(step.iwcm.bug for step in b.ulp_steps)


@pytest.mark.parametrize("verb", ["accept", "reject"])
def test_a_second_verb_before_the_rtr_is_the_kernels_own_bug(verb: str) -> None:
    # rdma_cm keeps the id in RDMA_CM_CONNECT until ESTABLISHED, so a second
    # rdma_accept or an rdma_reject reaches iw_cm: iw_cm_accept's error path (siw_accept
    # refuses an endpoint not in RECVD_MPAREQ with -ECONNRESET) or iw_cm_reject takes
    # the id out of CONN_RECV, and siw's ESTABLISHED on the RTR then meets
    # cm_conn_est_handler's BUG_ON: the kernel's own, recorded as such (mixed-stack
    # campaign seed 34, case 3911)
    net = Network(seed=4, tracing=True)
    a = net.add_host("a", "192.0.2.1", stack="siw", params={"peer_to_peer": True})
    b = net.add_host("b", "192.0.2.2", stack="siw")

    def policy(host: Host, up: Upcall) -> None:
        host.accept(up.conn)
        host.guarded(verb, getattr(host, verb), up.conn)

    b.listen(PORT, policy=policy)
    a.connect(b, PORT)
    net.run_for(S_NS)
    assert [(f.verb, f.errno) for f in b.failures] == [(verb, 104)]  # -ECONNRESET
    assert net.trace is not None
    (bug,) = net.trace.of_kind("kernel_bug")
    assert bug.fn == f"siw_{verb}" and "RTR" in bug.fields["what"]
    assert [s.iwcm.old for s in b.ulp_steps if s.iwcm.bug] == [IwCmState.IDLE]
