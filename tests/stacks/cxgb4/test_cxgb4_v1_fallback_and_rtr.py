"""The v2 -> v1 retry of peer_abort/c4iw_reconnect, and the RTR: what build_rtr_msg sends
for each p2p_type, the RTR mismatch Terminate of process_mpa_reply, and the RST the
responder answers a Terminate with (terminate -> c4iw_ep_disconnect(abrupt))."""

from __future__ import annotations

import errno

from helpers.cxgb4_lab import (
    IP_A,
    IP_B,
    KEY_REQ,
    PORT,
    RawPeer,
    S,
    cxgb4,
    flags_of,
    kernel_log,
    make_net,
    mpa_frame,
    payloads,
    raw_reset,
    v2_words,
)
from mpa_emu.stacks.contract.events import IwEvent

from mpa_emu.wire import ddp, mpa
from mpa_emu.wire.segment import SYN

MS = 1_000_000


def _fpdu(data: bytes) -> ddp.DdpSegment:
    fpdu = mpa.unframe_fpdu(data)
    assert fpdu.crc_ok
    return ddp.parse_segment(fpdu.ulpdu)


def test_v2_refused_with_a_rst_is_retried_as_v1_without_telling_the_ulp() -> None:
    net = make_net()
    a = cxgb4(net, "a", IP_A)
    b = cxgb4(net, "b", IP_B, {"mpa_rev": 1})
    b.listen(PORT)
    a.connect(IP_B, PORT, private_data=b"hello", ird=4, ord=8)
    net.run_for(10 * MS)
    # the mpa_rev 1 responder refuses revision 2: pr_err and abort
    assert ("err", "process_mpa_request",
            "process_mpa_request MPA version mismatch. Local = 1, Received = 2") \
        in kernel_log(net, "b")
    assert ("info", "peer_abort", "peer_abort: mpa_rev=2. Retrying with mpav1") \
        in kernel_log(net, "a")
    syns = [f.segment for f in net.frames if f.sender == "a" and f.segment
            and f.segment.flags & SYN]
    assert len(syns) == 2 and syns[0].sport == syns[1].sport  # c4iw_reconnect: same port
    requests = [p for p in payloads(net, "a") if p.startswith(KEY_REQ)]
    assert requests == [mpa_frame(KEY_REQ, mpa.FLAG_CRC | mpa.FLAG_ENHANCED, 2,
                                  v2_words(4, 8) + b"hello"),
                        mpa_frame(KEY_REQ, mpa.FLAG_CRC, 1, b"hello")]
    (req,) = b.events(IwEvent.CONNECT_REQUEST)
    assert (req.private_data, req.ird, req.ord) == (b"hello", 32, 32)  # v1: cur_max
    (rep,) = a.upcalls  # one CONNECT_REPLY: the first attempt was never reported
    assert (rep.event, rep.status, rep.ird, rep.ord) == (IwEvent.CONNECT_REPLY, 0, 32, 32)
    # v1 with peer2peer: the local p2p_type (read) decides the RTR
    assert _fpdu(payloads(net, "a")[-1]).opcode == ddp.Opcode.READ_REQUEST


def _refusing_peer(params: dict[str, object]):
    net = make_net()
    a = cxgb4(net, "a", IP_A, params)
    raw = net.add_host("raw", IP_B)
    raw.listen(PORT)
    a.connect(IP_B, PORT, ird=4, ord=4)
    net.run_for(MS)
    core = raw.core
    assert isinstance(core, RawPeer)
    return net, a, raw, core


def test_mpa_rev_1_initiator_reports_the_rst() -> None:
    net, a, raw, core = _refusing_peer({"mpa_rev": 1})
    raw_reset(net, raw, core.socks("accepted")[0])
    net.run_for(MS)
    assert [(u.event, u.status) for u in a.upcalls] == \
        [(IwEvent.CONNECT_REPLY, -errno.ECONNRESET)]


def test_a_rst_after_the_v1_attempt_is_reported() -> None:
    net, a, raw, core = _refusing_peer({})
    raw_reset(net, raw, core.socks("accepted")[0])
    net.run_for(MS)
    assert a.upcalls == []  # retrying
    raw_reset(net, raw, core.socks("accepted")[1])
    net.run_for(MS)
    assert [(u.event, u.status) for u in a.upcalls] == \
        [(IwEvent.CONNECT_REPLY, -errno.ECONNRESET)]
    assert payloads(net, "a")[1][17] == 1  # the second request was v1


def test_write_rtr_is_a_zero_length_rdma_write_to_stag_1() -> None:
    net = make_net()
    a = cxgb4(net, "a", IP_A, {"p2p_type": 0})
    b = cxgb4(net, "b", IP_B, {"p2p_type": 0})
    b.listen(PORT)
    a.connect(IP_B, PORT, ird=4, ord=4)
    net.run_for(MS)
    assert payloads(net, "a")[0][20:24] == v2_words(4, 4, c=True, d=False)
    seg = _fpdu(payloads(net, "a")[1])
    assert seg.tagged and seg.opcode == ddp.Opcode.WRITE
    head = seg.header
    assert isinstance(head, ddp.TaggedHeader)
    assert (head.stag, head.to, seg.payload) == (1, 1, b"")  # build_rtr_msg
    assert a.upcalls[0].status == 0 and b.upcalls[-1].event == IwEvent.ESTABLISHED


def test_without_peer2peer_no_rtr_is_offered_or_sent() -> None:
    net = make_net()
    a = cxgb4(net, "a", IP_A, {"peer2peer": 0})
    b = cxgb4(net, "b", IP_B, {"peer2peer": 0})
    b.listen(PORT)
    a.connect(IP_B, PORT, ird=4, ord=4)
    net.run_for(MS)
    request, *rest = payloads(net, "a")
    assert request[20:24] == v2_words(4, 4, a=False, d=False)
    assert rest == []  # FW_RI_INIT_P2PTYPE_DISABLED: no RTR
    assert payloads(net, "b")[0][20:24] == v2_words(4, 4, a=False, d=False)
    assert a.upcalls[0].status == 0


def test_rtr_mismatch_terminates_and_the_responder_resets() -> None:
    net = make_net()
    a = cxgb4(net, "a", IP_A, {"p2p_type": 0})  # asks for a write RTR
    b = cxgb4(net, "b", IP_B)  # replies with its own type: read
    b.listen(PORT)
    a.connect(IP_B, PORT, ird=4, ord=4)
    net.run_for(MS)
    # the initiator's request: C; the reply carries the responder's *local* type (D)
    assert payloads(net, "a")[0][20:24] == v2_words(4, 4, c=True, d=False)
    assert payloads(net, "b")[0][20:24] == v2_words(4, 4, d=True)
    (rep,) = a.upcalls
    assert (rep.event, rep.status) == (IwEvent.CONNECT_REPLY, -errno.ENOMEM)
    # no RTR (p2p_type DISABLED), a Terminate LAYER_MPA|DDP_LLP / MPA_NOMATCH_RTR, a FIN
    term = _fpdu(payloads(net, "a")[1])
    assert term.opcode == ddp.Opcode.TERMINATE and term.terminate is not None
    assert (term.terminate.layer, term.terminate.etype, term.terminate.error_code) == \
        (2, 3, 0x07)
    assert "FA" in flags_of(net, "a")
    assert ("err", "process_mpa_reply", "process_mpa_reply: RTR mismatch, sending TERM") \
        in kernel_log(net, "a")
    # the responder: TERM received -> QP TERMINATE, c4iw_ep_disconnect(abrupt): RST,
    # abort_rpl -> CLOSE -ECONNRESET
    assert any(level == "warn" and fn == "terminate" for level, fn, _ in kernel_log(net, "b"))
    assert "RA" in flags_of(net, "b")
    assert [(u.event, u.status) for u in b.upcalls] == [
        (IwEvent.CONNECT_REQUEST, 0), (IwEvent.ESTABLISHED, 0),
        (IwEvent.CLOSE, -errno.ECONNRESET)]
    net.run_for(S)
    assert b.conns() == []
