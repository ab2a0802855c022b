"""A second accept or a reject while irdma_accept still waits for the RTS AE
(wait_event_interruptible_timeout, IRDMA_MAX_TIMEOUT). ucma holds the id's handler lock
around rdma_accept and rdma_reject, so in the kernel the call runs only after that
accept returned, when iw_cm's id has left CONN_RECV: iw_cm_accept and iw_cm_reject
return -EINVAL and change nothing. The refusal must not move iw_cm's state, or the
accept's own outcome (its late ESTABLISHED) would meet cm_conn_est_handler's BUG_ON
(found by ``mpa-emu fuzz --mixed --seed 34``, cases 310 and 937)."""

from __future__ import annotations

from errno import ECONNRESET, EINVAL

import pytest

from mpa_emu.net import Accept, Network
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.ulp.iwcm import IwCmState

MS = 1_000_000


@pytest.mark.parametrize("verb", ["accept", "reject"])
def test_a_verb_during_the_rts_wait_leaves_iw_cm_in_conn_recv(verb: str) -> None:
    net = Network(4, latency_ns=1 * MS)
    alice = net.add_host("alice", "192.0.2.1")
    bob = net.add_host("bob", "192.0.2.2")
    bob.listen(4791, policy=Accept())
    conn = alice.connect(bob, 4791)
    alice.modify_qp_err(conn)  # no RTR will come: bob's accept waits the whole 12 s
    net.run(until_ns=net.now_ns + 1_000 * MS)
    [req] = bob.events(IwEvent.CONNECT_REQUEST)
    assert bob.rdma_cm.state(req.conn) == IwCmState.CONN_RECV
    with pytest.raises(CmError) as exc:
        getattr(bob, verb)(req.conn)
    assert exc.value.errno == EINVAL and exc.value.before_iw_cm
    assert bob.rdma_cm.state(req.conn) == IwCmState.CONN_RECV
    net.run(until_ns=net.now_ns + 20_000 * MS)
    [est] = bob.events(IwEvent.ESTABLISHED)
    assert est.status == -ECONNRESET  # the accept's own return, not an event
    assert not [s for s in bob.ulp_steps if s.iwcm.bug]
    assert bob.rdma_cm.state(req.conn) == IwCmState.IDLE  # iw_cm_accept's error path
