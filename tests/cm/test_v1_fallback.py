"""The active side's MPA v2 -> v1 retry on a RST in SYN_SENT or MPAREQ_SENT
(irdma_handle_rst_pkt), and the SYN-ACK in MPAREQ_RCVD (irdma_handle_synack_pkt)."""

from __future__ import annotations

from errno import ECONNRESET

import pytest
from helpers.cm_harness import IP_A, IP_P, MAC_A, MAC_P, PORT, S_NS, answer, make_pair, to_host
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.contract.trace import Trace
from mpa_emu.stacks.irdma.config import CmConfig, Quirks
from mpa_emu.stacks.irdma.core import CmCore
from mpa_emu.stacks.irdma.states import CmState

from mpa_emu.wire.segment import ACK, RST, SYN


def test_refused_syn_is_retried_once_in_v1_then_aborted() -> None:
    pair = make_pair(cfg_p=CmConfig(host_stack_rst=True))  # no listener on P
    conn = pair.a.connect(IP_A, IP_P, PORT, now_ns=0)
    pair.pump()
    a_frames = pair.frames("A")
    assert [s.seg.flags for s in a_frames] == [SYN, SYN]
    first, retry = a_frames[0].seg, a_frames[1].seg
    assert (retry.sport, retry.seq) == (first.sport, first.seq + 1)  # same 4-tuple
    assert retry.flags == SYN and retry.ack == 0
    assert a_frames[1].tx.comment == ("irdma_send_syn: SYN_SENT -> SYN_SENT (MPA v1 "
                                      "retry after RST)")
    [up] = pair.events("A")
    assert (up.event, up.status) == (IwEvent.CONNECT_REPLY, -ECONNRESET)
    assert pair.a.node(conn) is None
    assert [s.seg.flags for s in pair.frames("P")] == [RST | ACK, RST | ACK]


def test_without_the_fallback_quirk_the_first_reset_aborts() -> None:
    pair = make_pair(cfg_a=CmConfig(quirks=Quirks(mpa_v1_fallback=False)),
                     cfg_p=CmConfig(host_stack_rst=True))
    pair.a.connect(IP_A, IP_P, PORT, now_ns=0)
    pair.pump()
    assert [s.seg.flags for s in pair.frames("A")] == [SYN]
    assert pair.events("A")[0].status == -ECONNRESET


def test_reset_after_acked_request_retries_but_ack_rcvd_sticks() -> None:
    core = CmCore("A", MAC_A, CmConfig(retrans=8), seed=5, trace=Trace())
    core.add_address(IP_A)
    core.set_neighbour(IP_P, MAC_P)
    conn = core.connect(IP_A, IP_P, PORT, private_data=b"abc", now_ns=0)
    [syn] = core.frames_to_send()
    isn = syn.segment.seq
    # SYN-ACK lowering the MSS to 1000
    core.receive(answer(syn.segment, flags=SYN | ACK, seq=700, ack=isn + 1,
                        options=bytes.fromhex("020403e8")), 0)
    _, req = core.frames_to_send()
    end = isn + 1 + len(req.segment.payload)
    core.receive(answer(syn.segment, flags=ACK, seq=701, ack=end), 0)  # ack_rcvd
    core.receive(answer(syn.segment, flags=RST, seq=701, ack=0), 0)
    [retry] = core.frames_to_send()
    assert (retry.segment.flags, retry.segment.seq) == (SYN, end)
    assert retry.segment.options == bytes.fromhex("020403e803030200")  # MSS 1000
    view = core.node(conn)
    assert view is not None and view.mpa_frame_rev == 1 and view.ack_rcvd
    times = []
    while (t := core.get_timer()) is not None:
        core.handle_timer(t)
        times += [(t, tx.segment) for tx in core.frames_to_send()]
    # never resent: only the RST at expiry, acking rcv_nxt from the first SYN-ACK
    [(t_rst, rst)] = times
    assert t_rst == 75 * S_NS
    assert (rst.flags, rst.seq, rst.ack) == (RST | ACK, end + 1, 701)
    up = core.next_event()
    assert up is not None and up.status == -ECONNRESET


def test_syn_ack_in_mpareq_rcvd_frees_the_node_the_application_holds() -> None:
    pair = make_pair()
    pair.p.create_listen(IP_P, PORT)
    pair.a.connect(IP_A, IP_P, PORT, now_ns=0)
    pair.pump()
    [req] = pair.events("P")
    view = pair.p.node(req.conn)
    assert view is not None and view.state is CmState.MPAREQ_RCVD
    synack = pair.frames("P")[0].seg
    pair.p.receive(answer(synack, flags=SYN | ACK, seq=1, ack=view.loc_seq_num), 0)
    assert [t.segment.flags for t in pair.p.frames_to_send()] == [RST | ACK]
    assert pair.p.node(req.conn) is None
    bugs = [r.fields["reason"] for r in pair.p.trace.of_kind("kernel_bug")]  # type: ignore[union-attr]
    assert any("use-after-free" in b for b in bugs)
    with pytest.raises(CmError):
        pair.p.accept(req.conn, now_ns=0)  # the kernel's use-after-free, refused
    with pytest.raises(CmError):
        pair.p.reject(req.conn, now_ns=0)


def test_dcb_vlan_mode_stores_vlan_0_and_misses_later_untagged_segments() -> None:
    core = CmCore("P", MAC_P, CmConfig(dcb_vlan_mode=True), seed=5, trace=Trace())
    core.add_address(IP_P)
    core.set_neighbour(IP_A, MAC_A)
    core.create_listen(None, PORT)  # a wildcard listener takes any VLAN
    core.receive(to_host(MAC_P, IP_A, IP_P, 5000, PORT, flags=SYN, seq=10,
                         src_mac=MAC_A), 0)
    [synack] = core.frames_to_send()
    assert synack.segment.vlan == 0  # vlan_id 0 < 4096: tagged with VLAN 0
    core.receive(to_host(MAC_P, IP_A, IP_P, 5000, PORT, flags=SYN, seq=10,
                         src_mac=MAC_A), S_NS)  # the client's SYN resend
    core.frames_to_send()
    assert len(core.conns()) == 2  # irdma_receive_ilq looks up with 0xFFFF, a second node
