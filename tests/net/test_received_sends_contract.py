"""Host.received_sends reads one contract method of every core that posts Sends:
PostsSends.completions (mpa_emu/stacks/contract/api.py), the receive completions of
the Sends the peer posted (siw_rqe_complete, cxgb4's firmware CQEs, irdma's NIC model
joining the Send FPDUs it took by MSN, RFC 5041 section 4.4)."""

from __future__ import annotations

import pytest

from mpa_emu.net.network import Network
from mpa_emu.net.policy import Accept
from mpa_emu.stacks.contract.api import PostsSends

PORT = 4791
MS = 1_000_000


@pytest.mark.parametrize("stack", ["irdma", "siw", "cxgb4"])
def test_a_send_posted_by_one_side_is_a_success_completion_of_the_other(stack: str) -> None:
    net = Network(seed=5)
    a = net.add_host("a", "192.0.2.1", stack=stack)
    b = net.add_host("b", "192.0.2.2", stack=stack)
    b.listen(PORT, policy=Accept())
    conn = a.connect(b, PORT)
    net.run_for(MS)
    (peer,) = b.conns()
    b.post_recv(peer, 1 << 16)  # one receive buffer per Send (siw, cxgb4)
    b.post_recv(peer, 1 << 16)
    assert isinstance(a.core, PostsSends) and isinstance(b.core, PostsSends)
    a.post_send(conn, b"first")
    a.post_send(conn, b"second message")
    net.run_for(MS)
    done = b.core.completions(peer)
    assert [(c.status, bytes(c.data)) for c in done] == [
        ("SUCCESS", b"first"), ("SUCCESS", b"second message")]
    assert b.received_sends(peer) == [b"first", b"second message"]
    assert a.received_sends(conn) == []
