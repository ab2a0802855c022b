"""A qedr connection's life: the upcalls and the statuses qedr_iw_cm.c hands iw_cm for
each firmware return code (qed_iwarp_mpa_complete, qed_iwarp_tcp_connect_unsuccessful,
qed_iwarp_qp_in_error, qed_iwarp_exception_received), and what rdma_cm makes of them
(cma_iw_handler)."""

from __future__ import annotations

import errno

import pytest
from helpers.cxgb4_lab import (
    IP_A,
    IP_B,
    IP_RAW,
    KEY_REP,
    KEY_REQ,
    PORT,
    RawPeer,
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
from mpa_emu.ulp.rdma_cm import RdmaCmEventType as Ev
from mpa_emu.wire import mpa
from mpa_emu.wire.segment import FIN, RST, SYN

MS = 1_000_000
S = 1_000_000_000
C_S = mpa.FLAG_CRC | mpa.FLAG_ENHANCED
E = IwEvent


def _ups(host: Host) -> list[tuple[IwEvent, int]]:
    return [(u.event, u.status) for u in host.upcalls]


def _active(params: dict[str, object] | None = None) -> tuple[Network, Host, Host, int]:
    net = make_net()
    a = net.add_host("a", IP_A, stack="qedr", params=params)
    raw = net.add_host("raw", IP_B)
    raw.listen(PORT)
    a.connect(IP_B, PORT, private_data=b"x", ird=4, ord=4)
    net.run_for(MS)
    core = raw.core
    assert isinstance(core, RawPeer)
    (sock,) = core.socks("accepted")
    return net, a, raw, sock


def _sent_flags(net: Network, sender: str, since: int = 0) -> list[int]:
    return [f.segment.flags for f in net.frames[since:] if f.sender == sender]


def test_reject_is_econnrefused_with_the_reject_s_private_data() -> None:
    # IWARP_CONN_ERROR_MPA_ERROR_REJECT -> -ECONNREFUSED; qedr_iw_issue_event passes the
    # private data with CONNECT_REPLY
    net, a, raw, sock = _active()
    raw_send(net, raw, sock, mpa_frame(KEY_REP, mpa.FLAG_REJECT | C_S, 2,
                                       bytes(4) + b"busy"))
    net.run_for(MS)
    (up,) = a.upcalls
    assert (up.event, up.status, up.private_data) == (E.CONNECT_REPLY, -errno.ECONNREFUSED,
                                                      b"busy")
    assert [(e.event, e.status) for e in a.cm_events] == [(Ev.REJECTED, -errno.ECONNREFUSED)]


def test_rst_while_the_reply_is_awaited_is_econnreset() -> None:
    net, a, raw, sock = _active()
    raw_reset(net, raw, sock)
    net.run_for(MS)
    assert _ups(a) == [(E.CONNECT_REPLY, -errno.ECONNRESET)]  # IWARP_CONN_ERROR_MPA_RST
    syns = [f for f in net.frames if f.sender == "a" and f.segment.flags & SYN]
    assert len(syns) == 1  # no MPA v1 retry
    assert a.conns() == []


def test_fin_while_the_reply_is_awaited_is_econnrefused() -> None:
    net, a, raw, sock = _active()
    raw_close(net, raw, sock)
    net.run_for(MS)
    # IWARP_CONN_ERROR_MPA_FIN -> -ECONNREFUSED: rdma_cm REJECTED, not a reset
    assert _ups(a) == [(E.CONNECT_REPLY, -errno.ECONNREFUSED)]
    assert [e.event for e in a.cm_events] == [Ev.REJECTED]


def test_mpa_timeout_is_ebusy_and_a_connect_error() -> None:
    net, a, _raw, _sock = _active()
    net.run(until_ns=59 * S)
    assert a.upcalls == []
    net.run(until_ns=61 * S)
    # IWARP_CONN_ERROR_MPA_TIMEOUT -> -EBUSY; cma_iw_handler's default: CONNECT_ERROR
    assert _ups(a) == [(E.CONNECT_REPLY, -errno.EBUSY)]
    assert [(e.event, e.status) for e in a.cm_events] == [(Ev.CONNECT_ERROR, -errno.EBUSY)]
    assert any(f.segment.flags & RST for f in net.frames if f.sender == "a")


def test_the_firmware_timer_is_a_parameter() -> None:
    net, a, _raw, _sock = _active({"fw_mpa_timeout_secs": 5})
    net.run(until_ns=6 * S)
    assert _ups(a) == [(E.CONNECT_REPLY, -errno.EBUSY)]


def test_rst_to_the_syn_is_econnreset() -> None:
    # IWARP_CONN_ERROR_TCP_CONNECTION_RST -> -ECONNRESET (qed_iwarp_tcp_connect_unsuccessful)
    net = make_net()
    a = net.add_host("a", IP_A, stack="qedr")
    net.add_host("raw", IP_B)  # nothing listens: the raw TCP answers with a RST
    a.connect(IP_B, PORT, ird=4, ord=4)
    net.run_for(S)
    assert _ups(a) == [(E.CONNECT_REPLY, -errno.ECONNRESET)]


def test_a_syn_without_a_qedr_listener_goes_to_the_host_stack() -> None:
    # qed_iwarp_ll2_comp_syn_pkt: no listener -> QED_LL2_TX_DEST_LB, the host's TCP answers
    net = make_net()
    net.add_host("b", IP_B, stack="qedr")
    raw = net.add_host("raw", IP_RAW)
    raw.connect(IP_B, PORT)
    net.run_for(MS)
    (answer,) = [f for f in net.frames if f.sender == "b"]
    assert answer.segment.flags & RST
    assert net.trace is not None
    assert any(r.fn == "qed_iwarp_ll2_comp_syn_pkt" for r in net.trace.records
               if r.host == "b")


def _passive_accepted() -> tuple[Network, Host, Host, int]:
    net = make_net()
    b = net.add_host("b", IP_B, stack="qedr")
    raw = net.add_host("raw", IP_RAW)
    b.listen(PORT, policy=Accept())
    sock = raw.connect(IP_B, PORT)
    net.run_for(MS)
    raw_send(net, raw, sock, mpa_frame(KEY_REQ, C_S, 2, bytes.fromhex("8004c004")))
    net.run_for(MS)
    return net, b, raw, sock


def test_rst_before_the_rtr_is_established_then_close_with_econnreset() -> None:
    # qed_iwarp_mpa_complete MPA_RST -> PASSIVE_COMPLETE -ECONNRESET with a QP:
    # qedr_iw_passive_complete issues ESTABLISHED with the status, then CLOSE
    net, b, raw, sock = _passive_accepted()
    raw_reset(net, raw, sock)
    net.run_for(MS)
    assert _ups(b) == [(E.CONNECT_REQUEST, 0), (E.ESTABLISHED, -errno.ECONNRESET),
                       (E.CLOSE, -errno.ECONNRESET)]
    assert b.conns() == []


def test_a_request_that_never_comes_is_silent() -> None:
    # passive IWARP_CONN_ERROR_MPA_TIMEOUT: qed_iwarp_tcp_connect_unsuccessful returns the
    # ep to the free list; the ULP hears nothing
    net = make_net()
    b = net.add_host("b", IP_B, stack="qedr")
    raw = net.add_host("raw", IP_RAW)
    b.listen(PORT, policy=Manual())
    raw.connect(IP_B, PORT)
    net.run(until_ns=70 * S)
    assert b.upcalls == [] and b.conns() == []
    assert any(f.segment.flags & RST for f in net.frames if f.sender == "b")


def _connected() -> tuple[Network, Host, Host, int, int]:
    net = make_net()
    a = net.add_host("a", IP_A, stack="qedr")
    b = net.add_host("b", IP_B, stack="qedr")
    b.listen(PORT, policy=Accept())
    conn = a.connect(b, PORT, ird=4, ord=4)
    net.run_for(S)
    (req,) = b.events(IwEvent.CONNECT_REQUEST)
    return net, a, b, conn, req.conn


def test_graceful_close_statuses() -> None:
    net, a, b, conn, _passive = _connected()
    since = len(net.frames)
    a.disconnect(conn, graceful=True)
    net.run()
    # a asked for the close (IWARP_MODIFY_QP_STATE_CLOSING, its FIN): the peer's FIN
    # completes it, IWARP_QP_IN_ERROR_GOOD_CLOSE, CLOSE 0 (qed_iwarp_qp_in_error);
    # b: the FIN is IWARP_EXCEPTION_DETECTED_LLP_CLOSED, DISCONNECT 0 from
    # qedr_iw_disconnect_worker, whose SQD sends b's FIN; then CLOSE 0
    assert _ups(a)[1:] == [(E.CLOSE, 0)]
    assert _ups(b)[2:] == [(E.DISCONNECT, 0), (E.CLOSE, 0)]
    assert not any(fl & RST for fl in _sent_flags(net, "a", since) + _sent_flags(net, "b",
                                                                               since))
    assert _sent_flags(net, "a", since)[0] & FIN


def test_abortive_close_statuses() -> None:
    net, a, b, conn, _passive = _connected()
    a.disconnect(conn, graceful=False)
    net.run()
    # qed_iwarp_modify_fw IWARP_MODIFY_QP_STATE_ERROR: a RST; the QP in error with a bad
    # close is CLOSE -ECONNRESET; the peer: LLP_RESET -> DISCONNECT -ECONNRESET, CLOSE
    assert _ups(a)[-1] == (E.CLOSE, -errno.ECONNRESET)
    assert _ups(b)[2:] == [(E.DISCONNECT, -errno.ECONNRESET), (E.CLOSE, -errno.ECONNRESET)]


def test_accept_refuses_ird_above_32_and_changes_nothing() -> None:
    net = make_net()
    b = net.add_host("b", IP_B, stack="qedr")
    raw = net.add_host("raw", IP_RAW)
    b.listen(PORT, policy=Manual())
    sock = raw.connect(IP_B, PORT)
    net.run_for(MS)
    raw_send(net, raw, sock, mpa_frame(KEY_REQ, C_S, 2, bytes.fromhex("8004c004")))
    net.run_for(MS)
    (req,) = b.upcalls
    with pytest.raises(CmError) as info:
        b.core.accept(req.conn, now_ns=net.now_ns, ird=33)  # type: ignore[call-arg]
    assert info.value.errno == errno.EINVAL  # qed_iwarp_accept
    assert b.node(req.conn).state == "MPA_REQ_RCVD"


def test_a_request_after_destroy_listen_is_a_use_after_free() -> None:
    # qedr_iw_destroy_listen kfree()s the listener qed keeps as the ep's cb_context;
    # qedr_iw_mpa_request then calls through it: the model records the kernel bug
    net = make_net()
    b = net.add_host("b", IP_B, stack="qedr")
    raw = net.add_host("raw", IP_RAW)
    listener = b.listen(PORT, policy=Manual())
    sock = raw.connect(IP_B, PORT)
    net.run_for(MS)
    b.core.destroy_listen(listener, now_ns=net.now_ns)
    raw_send(net, raw, sock, mpa_frame(KEY_REQ, C_S, 2, bytes.fromhex("8004c004")))
    net.run_for(MS)
    assert b.upcalls == []
    assert net.trace is not None
    assert [r.fn for r in net.trace.records if r.kind == "kernel_bug"] == [
        "qedr_iw_mpa_request"]


def test_a_syn_never_answered_is_ebusy() -> None:
    # IWARP_CONN_ERROR_TCP_CONNECT_TIMEOUT -> -EBUSY (qed_iwarp_tcp_connect_unsuccessful);
    # the SYN retries are the shared TCP's (Linux's, assumed for the firmware)
    from mpa_emu.stacks.qedr import QedrCore
    core = QedrCore("a", bytes(6), seed=1)
    core.add_address(bytes((192, 0, 2, 1)))
    core.set_neighbour(bytes((192, 0, 2, 2)), b"\x02" * 6)
    core.connect(bytes((192, 0, 2, 1)), bytes((192, 0, 2, 2)), PORT, ird=2, ord=2, now_ns=0)
    up = None
    while up is None:
        due = core.get_timer()
        assert due is not None and due < 600 * S
        core.handle_timer(due)
        core.frames_to_send()
        up = core.next_event()
    assert (up.event, up.status) == (E.CONNECT_REPLY, -errno.EBUSY)
    assert core.conns() == []


def _wire(seed: int) -> list[bytes]:
    net = Network(seed=seed)
    a = net.add_host("a", IP_A, stack="qedr")
    b = net.add_host("b", IP_B, stack="qedr")
    b.listen(PORT)
    conn = a.connect(b, PORT, private_data=b"same", ird=4, ord=4)
    net.run_for(S)
    a.disconnect(conn, graceful=True)
    net.run()
    return [bytes(f.segment.payload) + f.segment.seq.to_bytes(4, "big") for f in net.frames]


def test_the_same_seed_gives_the_same_bytes() -> None:
    assert _wire(5) == _wire(5)
    assert _wire(5) != _wire(6)  # the ISNs are drawn from the seed


def test_the_node_watch_hears_of_each_endpoint() -> None:
    from mpa_emu.stacks.contract.api import WatchedCore
    events: list[tuple[str, int, str]] = []

    class Watch:
        def node_created(self, conn: int, loc_port: int, rem: bytes, rem_port: int) -> None:
            events.append(("created", conn, ""))

        def state_changed(self, conn: int, state: object) -> None:
            events.append(("state", conn, getattr(state, "name", str(state))))

        def node_freed(self, conn: int) -> None:
            events.append(("freed", conn, ""))

        def qp_event(self, time_ns: int, conn: int, ae: str) -> None:
            pass

    net, a, _b, conn, _passive = _connected()
    assert isinstance(a.core, WatchedCore)
    a.core.watch_nodes(Watch())
    a.disconnect(conn, graceful=True)
    net.run()
    assert events == [("created", conn, ""), ("state", conn, "CLOSED"), ("freed", conn, "")]
