"""The ULP destroys its cm_id while the connect is still waiting for the MPA reply:
iw_cm's destroy_cm_id waits for the CONNECT_REPLY (IWCM_F_CONNECT_WAIT, set by
iw_cm_connect and cleared by cm_conn_rep_handler), then goes on from the state the reply
left: ESTABLISHED is an abortive close (iwcm_modify_qp_err), a failed connect has nothing
left to do. Found by ``mpa-emu fuzz --mixed --seed 34`` (case 1315 and 63 more: the
endpoint stayed in FPDU_MODE with its QP in RTS and no CONNECT_REPLY ever went up)."""

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
    flags_of,
    make_net,
    mpa_frame,
    raw_reset,
    raw_send,
    v2_words,
)

from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.wire import mpa

MS = 1_000_000
C_S = mpa.FLAG_CRC | mpa.FLAG_ENHANCED


def _connecting():
    net = make_net()
    a = cxgb4(net, "a", IP_A)
    raw = net.add_host("raw", IP_B)
    raw.listen(PORT)
    conn = a.connect(IP_B, PORT, ird=4, ord=4)
    net.run_for(MS)
    core = raw.core
    assert isinstance(core, RawPeer)
    assert a.node(conn).state == "MPA_REQ_SENT"
    return net, a, raw, core.socks("accepted")[0], conn


def test_destroy_before_the_reply_waits_for_it_then_aborts() -> None:
    net, a, raw, sock, conn = _connecting()
    a.close(conn)  # waits: nothing happens yet
    assert a.node(conn).state == "MPA_REQ_SENT" and "R" not in "".join(flags_of(net, "a"))
    raw_send(net, raw, sock, mpa_frame(KEY_REP, C_S, 2, v2_words(4, 4)))
    net.run_for(S)
    assert a.upcalls[0].event == IwEvent.CONNECT_REPLY and a.upcalls[0].status == 0
    assert any("R" in f for f in flags_of(net, "a"))  # iwcm_modify_qp_err: send_abort
    assert a.conns() == []


def test_destroy_before_a_failed_connect_leaves_nothing_behind() -> None:
    net, a, raw, sock, conn = _connecting()
    a.close(conn)
    raw_reset(net, raw, sock)  # mpa_rev 2: the v1 retry first, its RST the end
    net.run_for(S)
    core = raw.core
    assert isinstance(core, RawPeer)
    raw_reset(net, raw, core.socks("accepted")[-1])
    net.run_for(S)
    assert [(u.event, u.status) for u in a.upcalls] == \
        [(IwEvent.CONNECT_REPLY, -errno.ECONNRESET)]
    assert a.conns() == []
