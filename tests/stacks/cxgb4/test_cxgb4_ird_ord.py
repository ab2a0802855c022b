"""MPA v2 IRD/ORD negotiation: c4iw_accept_cr on the responder and process_mpa_reply on
the initiator, relaxed (RELAXED_IRD_NEGOTIATION 1, the kernel's build) and strict."""

from __future__ import annotations

import errno

import pytest
from helpers.cxgb4_lab import (
    IP_A,
    IP_B,
    KEY_REP,
    PORT,
    RawPeer,
    S,
    cxgb4,
    flags_of,
    kernel_log,
    make_net,
    mpa_frame,
    payloads,
    raw_send,
    v2_words,
)
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.events import IwEvent

from mpa_emu.net.host import Host
from mpa_emu.net.network import Network
from mpa_emu.net.policy import Manual
from mpa_emu.wire import ddp, mpa

STRICT = {"relaxed_ird_negotiation": 0}
C_S = mpa.FLAG_CRC | mpa.FLAG_ENHANCED


def _requested(params: dict[str, object] | None = None):
    net = make_net()
    a = cxgb4(net, "a", IP_A, params)
    b = cxgb4(net, "b", IP_B, params)
    b.listen(PORT, policy=Manual())
    a.connect(IP_B, PORT, ird=4, ord=8)
    net.run_for(S // 1000)
    return net, a, b, b.upcalls[0].conn


def _accept(net: Network, host: Host, conn: int, ird: int, ord: int) -> None:
    try:
        host.core.accept(conn, now_ns=net.now_ns, ird=ird, ord=ord)
    finally:
        host.timer_stale = True
        net.pump()
        net.run_for(S // 1000)


def test_relaxed_accept_lowers_an_ord_above_the_initiator_ird() -> None:
    net, a, b, conn = _requested()
    _accept(net, b, conn, ird=8, ord=16)
    # conn_param->ord 16 > ep->ird 4: lowered to 4
    assert payloads(net, "b")[0] == mpa_frame(KEY_REP, C_S, 2, v2_words(8, 4))
    assert a.upcalls[0].status == 0


def test_strict_accept_with_too_high_an_ord_sends_a_reject_and_fails() -> None:
    net, a, b, conn = _requested(STRICT)
    with pytest.raises(CmError) as exc:
        _accept(net, b, conn, ird=8, ord=16)
    assert exc.value.errno == errno.ENOMEM
    # send_mpa_reject with the ULP's ird/ord, then c4iw_ep_disconnect(abrupt)
    assert payloads(net, "b")[0] == mpa_frame(KEY_REP, mpa.FLAG_REJECT | mpa.FLAG_ENHANCED,
                                              2, v2_words(8, 16))
    assert "RA" in flags_of(net, "b")
    assert (a.upcalls[0].event, a.upcalls[0].status) == \
        (IwEvent.CONNECT_REPLY, -errno.ECONNREFUSED)


def test_relaxed_accept_raises_an_ird_below_the_initiator_ord() -> None:
    net, _a, b, conn = _requested()
    _accept(net, b, conn, ird=2, ord=4)
    # conn_param->ird 2 < ep->ord 8 <= max_ordird_qp: raised to 8
    assert payloads(net, "b")[0] == mpa_frame(KEY_REP, C_S, 2, v2_words(8, 4))


def test_strict_accept_with_too_low_an_ird_aborts_and_the_initiator_retries_v1() -> None:
    net, a, b, conn = _requested(STRICT)
    with pytest.raises(CmError) as exc:
        _accept(net, b, conn, ird=2, ord=4)
    assert exc.value.errno == errno.ENOMEM
    assert payloads(net, "b") == [] and "RA" in flags_of(net, "b")
    # the RST reaches the initiator in MPA_REQ_SENT: it retries with MPA v1, and the
    # listener sees a second, v1 request (IRD = ORD = cur_max_read_depth)
    second = b.upcalls[1]
    assert second.event == IwEvent.CONNECT_REQUEST and (second.ird, second.ord) == (32, 32)
    assert payloads(net, "a")[-1][17] == 1
    assert a.upcalls == []


def test_accept_over_cur_max_read_depth_is_einval_and_aborts() -> None:
    net, _a, b, conn = _requested()
    with pytest.raises(CmError) as exc:
        _accept(net, b, conn, ird=33, ord=4)
    assert exc.value.errno == errno.EINVAL
    assert "RA" in flags_of(net, "b")


def _reply(ird: int, ord: int, params: dict[str, object] | None = None):
    net = make_net()
    a = cxgb4(net, "a", IP_A, params)
    raw = net.add_host("raw", IP_B)
    raw.listen(PORT)
    conn = a.connect(IP_B, PORT, ird=4, ord=8)
    net.run_for(S // 1000)
    core = raw.core
    assert isinstance(core, RawPeer)
    (sock,) = core.socks("accepted")
    raw_send(net, raw, sock, mpa_frame(KEY_REP, C_S, 2, v2_words(ird, ord)))
    net.run_for(S // 1000)
    return net, a, conn


def _fpdu(net: Network, index: int) -> ddp.DdpSegment:
    fpdu = mpa.unframe_fpdu(payloads(net, "a")[index])
    assert fpdu.crc_ok
    return ddp.parse_segment(fpdu.ulpdu)


def test_relaxed_initiator_follows_the_responder() -> None:
    _net, a, _conn = _reply(ird=2, ord=16)
    (up,) = a.upcalls
    # ep->ord 8 > resp_ird 2 -> 2; ep->ird 4 < resp_ord 16 <= max_ordird_qp -> 16;
    # connect_reply_upcall reports ird = ep->ord, ord = ep->ird
    assert (up.status, up.ird, up.ord) == (0, 2, 16)


@pytest.mark.parametrize(("ird", "ord", "params"), [
    (2, 8, STRICT),                         # ep->ord 8 > resp_ird 2, strict
    (8, 16, {"max_ordird_qp": 8}),          # resp_ord 16 above max_ordird_qp
])
def test_insufficient_ird_sends_a_terminate_and_a_fin(ird: int, ord: int,
                                                      params: dict[str, object]) -> None:
    net, a, conn = _reply(ird, ord, params)
    (up,) = a.upcalls
    assert (up.event, up.status) == (IwEvent.CONNECT_REPLY, -errno.ENOMEM)
    # only an RTR mismatch disables the RTR: the QP goes to RTS with the negotiated
    # read RTR (rdma_init) before post_terminate
    assert _fpdu(net, 1).opcode == ddp.Opcode.READ_REQUEST
    seg = _fpdu(net, 2)
    assert seg.opcode == ddp.Opcode.TERMINATE
    head = seg.header
    assert isinstance(head, ddp.UntaggedHeader) and (head.qn, head.msn, head.mo) == (2, 1, 0)
    term = seg.terminate
    assert term is not None
    # LAYER_MPA | DDP_LLP = 0x23, MPA_INSUFF_IRD = 0x06
    assert (term.layer, term.etype, term.error_code) == (2, 3, 0x06)
    assert "FA" in flags_of(net, "a")  # process_mpa_reply returns 1: graceful close
    assert ("err", "process_mpa_reply", "process_mpa_reply: Insufficient IRD, sending TERM") \
        in kernel_log(net, "a")
    assert a.qp_state(conn).iwarp_state == "TERMINATE"
