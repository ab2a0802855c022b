"""A graceful close right after CONNECT_REPLY, before the RTR's Read Response arrives.

cxgb4's rdma_disconnect moves the QP RTS -> CLOSING and c4iw_ep_disconnect sends
send_halfclose (CPL_CLOSE_CON_REQ): a half close, FPDU_MODE -> CLOSING. The offloaded
connection in FIN_WAIT1/FIN_WAIT2 is no orphaned Linux socket: what the peer still sends
is ACKed by the adapter and handed to rx_data, whose CLOSING/MORIBUND case is
``default: break`` (dropped, nothing sent). Then the kernel's close:

- initiator: close_con_rpl (our FIN acknowledged) CLOSING -> MORIBUND; peer_close (the
  peer's FIN) in MORIBUND: stop_ep_timer, QP -> IDLE, close_complete_upcall(ep, 0), DEAD.
  No DISCONNECT upcall (peer_close_upcall is only FPDU_MODE's), no ep_timeout;
- a cxgb4 responder: peer_close in FPDU_MODE: start_ep_timer, CLOSING, QP -> CLOSING,
  peer_close_upcall (DISCONNECT), c4iw_ep_disconnect -> MORIBUND and its FIN;
  close_con_rpl in MORIBUND: close_complete_upcall(ep, 0).

rdma_cm (cma_iw_handler): CONNECT_REPLY 0 is ESTABLISHED, CLOSE is DISCONNECTED with
its status; iw_cm's DISCONNECT is no rdma_cm event of its own.
"""

from __future__ import annotations

import pytest
from helpers.cxgb4_lab import (
    IP_A,
    IP_B,
    KEY_REQ,
    PORT,
    RawPeer,
    cxgb4,
    make_net,
    mpa_frame,
    raw_close,
    raw_send,
)

from mpa_emu.net import Host, Network
from mpa_emu.net.policy import Reject
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.wire import mpa
from mpa_emu.wire.segment import FIN, RST

MS = 1_000_000
S = 1_000 * MS


def _close_on_reply(responder: str) -> tuple[Network, Host, Host]:
    net = Network(seed=7, latency_ns=1 * MS)
    a = net.add_host("a", IP_A, stack="cxgb4")
    b = net.add_host("b", IP_B, stack=responder)
    b.listen(PORT)
    a.on(lambda host, up: host.disconnect(up.conn, graceful=True), IwEvent.CONNECT_REPLY)
    a.connect(IP_B, PORT, ird=4, ord=4)
    net.run_for(200 * S)
    return net, a, b


def _sent(net: Network, host: str) -> list[tuple[str, str]]:
    return [(f.kind, f.comment) for f in net.frames if f.sender == host]


def test_the_read_response_after_our_fin_is_acked_and_both_close_with_status_0() -> None:
    net, a, b = _close_on_reply("cxgb4")
    # a: the RTR and the half close leave together, on CONNECT_REPLY
    kinds = [k for k, _ in _sent(net, "a")]
    rtr = kinds.index("data")
    assert kinds[rtr + 1] == "FIN" and kinds[rtr + 2:] == ["ACK", "ACK"]
    assert not [f for f in net.frames if f.segment is not None and f.segment.flags & RST]
    # b's NIC answers the RTR, b's endpoint answers the FIN with its own
    b_kinds = [k for k, _ in _sent(net, "b")]
    assert b_kinds[-3:] == ["ACK", "data", "FIN"]
    resp = [f for f in net.frames if f.sender == "b" and f.kind == "data"][-1]
    fin = [f for f in net.frames if f.sender == "b" and f.kind == "FIN"][-1]
    assert "Read Response" in resp.comment and fin.segment is not None
    # a ACKs the Read Response (delivered to rx_data and dropped there) and the FIN
    acks = [f.segment for f in net.frames if f.sender == "a" and f.time_ns > resp.time_ns]
    assert [s.ack for s in acks if s is not None] == [
        resp.segment.seq + len(resp.segment.payload), fin.segment.seq + 1]
    assert net.trace is not None
    drops = [r for r in net.trace.records if r.host == "a" and r.kind == "segment_dropped"
             and r.fn == "rx_data"]
    assert len(drops) == 1 and drops[0].fields["state"] in ("CLOSING", "MORIBUND")
    # upcalls: no DISCONNECT on a, both CLOSE 0, long before ep_timeout (60 s)
    assert [(u.event, u.status) for u in a.upcalls] == [
        (IwEvent.CONNECT_REPLY, 0), (IwEvent.CLOSE, 0)]
    assert [(u.event, u.status) for u in b.upcalls] == [
        (IwEvent.CONNECT_REQUEST, 0), (IwEvent.ESTABLISHED, 0), (IwEvent.DISCONNECT, 0),
        (IwEvent.CLOSE, 0)]
    assert max(u.time_ns for u in a.upcalls + b.upcalls) < 1 * S
    # rdma_cm
    assert [(e.name, e.status) for e in a.cm_events] == [
        ("RDMA_CM_EVENT_ESTABLISHED", 0), ("RDMA_CM_EVENT_DISCONNECTED", 0)]
    assert [(e.name, e.status) for e in b.cm_events] == [
        ("RDMA_CM_EVENT_CONNECT_REQUEST", 0), ("RDMA_CM_EVENT_ESTABLISHED", 0),
        ("RDMA_CM_EVENT_DISCONNECTED", 0)]
    assert a.conns() == [] and b.conns() == []


@pytest.mark.parametrize("responder", ["irdma", "siw"])
def test_against_irdma_and_siw_the_initiator_closes_with_status_0(responder: str) -> None:
    net, a, b = _close_on_reply(responder)
    assert not [f for f in net.frames if f.sender == "a" and f.segment is not None
                and f.segment.flags & RST]
    assert [(u.event, u.status) for u in a.upcalls] == [
        (IwEvent.CONNECT_REPLY, 0), (IwEvent.CLOSE, 0)]
    assert a.upcalls[-1].time_ns < 1 * S
    # the responder's QP sent its Read Response and its FIN; it closes normally
    assert [k for k, _ in _sent(net, "b")].count("FIN") == 1
    fins = [f.segment for f in net.frames if f.sender == "b" and f.kind == "FIN"]
    assert fins[0] is not None and fins[0].flags & FIN
    assert (b.upcalls[-1].event, b.upcalls[-1].status) == (IwEvent.CLOSE, 0)
    assert [e.name for e in a.cm_events][-1] == "RDMA_CM_EVENT_DISCONNECTED"


def test_bytes_after_a_reject_s_half_close_are_acked_not_reset() -> None:
    # c4iw_reject_cr: send_mpa_reject, then c4iw_ep_disconnect(abrupt=0): CLOSING and
    # the FIN. Stream bytes the peer still sends reach rx_data in CLOSING/MORIBUND
    # (``default: break``); a Linux socket closed by close() would RST them instead.
    net = make_net()
    b = cxgb4(net, "b", IP_B)
    b.listen(PORT, policy=Reject(b"no"))
    raw = net.add_host("raw", IP_A)
    core = raw.core
    assert isinstance(core, RawPeer)
    sock = core.tcp.connect(raw.address(), b.address(), PORT, None, net.now_ns)
    raw.timer_stale = True
    net.run_for(MS)
    raw_send(net, raw, sock, mpa_frame(KEY_REQ, mpa.FLAG_CRC, 1, b""))
    net.run_for(MS)
    assert core.received[sock].startswith(b"MPA ID Rep Frame")
    t0 = net.now_ns
    raw_send(net, raw, sock, b"late bytes")
    net.run_for(MS)
    late = [f.segment for f in net.frames if f.sender == "raw" and f.segment is not None
            and f.segment.payload == b"late bytes"]
    after = [f.segment for f in net.frames if f.sender == "b" and f.time_ns >= t0]
    assert late and after and all(s is not None and not s.flags & RST for s in after)
    assert after[-1] is not None and after[-1].ack == late[0].seq + len(b"late bytes")
    raw_close(net, raw, sock)
    net.run_for(MS)
    assert not [f for f in net.frames if f.sender == "b" and f.segment is not None
                and f.segment.flags & RST]
    assert b.conns() == [] and b.upcalls[-1].event == IwEvent.CONNECT_REQUEST
