"""A graceful close the peer never answers with its FIN: the endpoint timer closes the
cm_id (process_timeout in MORIBUND: CLOSE -ETIMEDOUT, then c4iw_ep_disconnect ignores
MORIBUND), and the adapter's FIN_WAIT2 timer ends the connection with CPL_ABORT_REQ_RSS
(CPL_ERR_FINWAIT2_TIMEDOUT), which peer_abort takes from MORIBUND to DEAD and
release_ep_resources frees. Found by ``mpa-emu fuzz --mixed --seed 34`` (case 21: an
irdma initiator that closed without a FIN left the cxgb4 endpoint in MORIBUND)."""

from __future__ import annotations

import errno

from helpers.cxgb4_lab import (
    IP_A,
    IP_B,
    KEY_REP,
    PORT,
    RawPeer,
    S,
    cxgb4,
    make_net,
    mpa_frame,
    raw_send,
    v2_words,
)

from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.wire import mpa

MS = 1_000_000
C_S = mpa.FLAG_CRC | mpa.FLAG_ENHANCED


def _established():
    net = make_net()
    a = cxgb4(net, "a", IP_A)
    raw = net.add_host("raw", IP_B)
    raw.listen(PORT)
    conn = a.connect(IP_B, PORT, ird=4, ord=4)
    net.run_for(MS)
    core = raw.core
    assert isinstance(core, RawPeer)
    sock = core.socks("accepted")[0]
    raw_send(net, raw, sock, mpa_frame(KEY_REP, C_S, 2, v2_words(4, 4)))
    net.run_for(MS)
    assert a.node(conn).state == "FPDU_MODE"
    return net, a, conn


def test_fin_never_answered_ends_in_dead_after_the_finwait2_timer() -> None:
    net, a, conn = _established()
    a.disconnect(conn, graceful=True)  # RTS -> CLOSING: FIN; the raw peer only ACKs it
    net.run_for(S)
    assert a.node(conn).state == "MORIBUND"  # close_con_rpl: our FIN acknowledged
    net.run_for(300 * S)
    # process_timeout (MORIBUND): close_complete_upcall(-ETIMEDOUT) drops the cm_id, so
    # the later peer_abort has no one to tell
    assert [(u.event, u.status) for u in a.upcalls] == \
        [(IwEvent.CONNECT_REPLY, 0), (IwEvent.CLOSE, -errno.ETIMEDOUT)]
    assert a.node(conn) is None and a.conns() == []


def test_the_app_closing_its_id_first_still_frees_the_endpoint() -> None:
    net, a, conn = _established()
    a.disconnect(conn, graceful=True)
    net.run_for(S)
    a.close(conn)  # iw_destroy_cm_id in iw_cm CLOSING: the provider's ep carries on
    net.run_for(300 * S)
    assert a.conns() == []
