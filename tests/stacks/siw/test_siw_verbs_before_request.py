"""A verb on a passive siw endpoint that iw_cm has no id for.

iw_cm's passive id exists only from the CONNECT_REQUEST upcall (cm_conn_req_handler sets
``provider_data`` to the endpoint, siw_proc_mpareq sends it): before the request the
application cannot reach siw_accept or siw_reject, so nothing may change. In particular
the MPA timer siw_accept_newconn queued (MPAREP_TIMEOUT, HZ * 5, siw_cm.h) must still
free the endpoint: SIW_CM_WORK_MPATIMEOUT in AWAIT_MPAREQ releases it (release_cep), the
socket closed with a FIN, no upcall.
"""

from __future__ import annotations

import errno

import pytest
from helpers.siw_pair import PEER_IP, SIW_IP, Pair

from mpa_emu.errors import MpaEmuError
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.wire.segment import FIN

MS = 1_000_000
S_NS = 1_000_000_000
PORT = 31000


@pytest.mark.parametrize("verb", ["accept", "reject"])
def test_refused_verb_leaves_the_mpa_timer_to_free_the_endpoint(verb: str) -> None:
    p = Pair({})
    p.siw.create_listen(SIW_IP, PORT)
    p.peer.connect(PEER_IP, SIW_IP, PORT, None, 0)
    p.run(MS)
    (conn,) = p.siw.conns()
    node = p.siw.node(conn)
    assert node is not None and node.state.name == "AWAIT_MPAREQ"
    timer = node.mpa_timer_ns
    assert timer is not None
    with pytest.raises(CmError) as info:
        getattr(p.siw, verb)(conn, now_ns=p.now)
    assert info.value.errno == errno.EINVAL
    assert isinstance(info.value, MpaEmuError)
    after = p.siw.node(conn)
    assert after == node  # nothing changed, the timer included
    p.run(10 * S_NS)
    assert p.siw.conns() == [] and p.siw.node(conn) is None  # no leak
    assert p.upcalls == []
    fins = [t for t, who, seg, _ in p.wire if who == "siw" and seg.flags & FIN]
    assert fins == [timer]
