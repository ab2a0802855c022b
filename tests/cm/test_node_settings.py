"""The node's settings record (``CmNode.settings``): what ``irdma_make_cm_node`` and the
later writers store reads back unchanged, nodes holding equal settings share one record,
and a write to one node never shows in another (copy-on-write)."""

from __future__ import annotations

from typing import Any

import pytest
from mpa_emu.stacks.irdma.config import CmConfig
from mpa_emu.stacks.irdma.mpa_policy import Negotiated, Rdma0Op
from mpa_emu.stacks.irdma.node import CmNode, Listener, NodeSettings, TcpContext
from mpa_emu.stacks.irdma.nodes import make_cm_node, record_ird_ord

from mpa_emu.stacks.irdma import node as node_mod
from mpa_emu.wire.interning import SharedRecords

LOCAL = bytes([192, 0, 2, 1])
REMOTE = bytes([198, 51, 100, 7])
MAC = bytes.fromhex("020000000007")
UNTAGGED = 0xFFFF


def made(port: int, tos: int = 0, listener: Listener | None = None) -> CmNode:
    return make_cm_node(port, (LOCAL, port, REMOTE, 4791, UNTAGGED), MAC, False, tos,
                        CmConfig(), 1000 + port, listener)


def test_make_cm_node_settings_follow_the_kernel() -> None:
    lst = Listener(3, LOCAL, 4791, True, UNTAGGED, 16, False)
    node = made(5000, tos=0x10, listener=lst)
    st = node.settings
    # rt_tos2priority(IPTOS_LOWDELAY): ip_tos2prio[8] = TC_PRIO_INTERACTIVE
    assert (st.tos, st.user_pri, st.rem_mac) == (0x10, 6, MAC)
    # irdma_make_cm_node: IRDMA_CM_DEFAULT_RCV_WND_SCALED (0x3FFFC) >> scale 2, and
    # MSS = MTU 1500 - 40 (IPv4 and TCP headers)
    assert (st.rcv_wscale, st.rcv_wnd, st.mss) == (2, 0xFFFF, 1460)
    assert (st.mpa_frame_rev, st.ird_size, st.ord_size) == (2, 127, 255)
    assert st.listener is lst
    # untouched by irdma_make_cm_node
    assert (st.snd_wscale, st.snd_wnd, st.max_snd_wnd, node.loc_id) == (0, 0, 0, 0x3B47)
    assert (st.mpav2_ird_ord, st.send_rdma0_op) == (0, Rdma0Op.READ_ZERO)
    assert (st.pdata_size, st.lsmm_size, st.passive_state) == (0, 0, 0)


def test_nodes_with_equal_settings_share_one_record() -> None:
    a, b = made(5001), made(5002)
    assert a.settings is b.settings
    a.update_settings(ird_size=9, pdata_size=21)
    b.update_settings(ird_size=9)
    b.update_settings(pdata_size=21)
    assert a.settings is b.settings


def test_a_write_changes_only_its_own_node() -> None:
    a, b = made(5003), made(5004)
    a.update_settings(ird_size=7)
    a.update_settings(pdata_size=33, passive_state=a.settings.passive_state + 1)
    assert (a.settings.ird_size, a.settings.pdata_size, a.settings.passive_state) == \
        (7, 33, 1)
    assert (b.settings.ird_size, b.settings.pdata_size, b.settings.passive_state) == \
        (127, 0, 0)
    b.update_settings(ord_size=4)
    assert (a.settings.ord_size, b.settings.ord_size) == (255, 4)
    # the same write again (a remembered step) still changes only the node written
    c = made(5005)
    c.update_settings(ird_size=7)
    assert (c.settings.ird_size, b.settings.ird_size, a.settings.ird_size) == (7, 127, 7)


def test_every_field_reads_back_what_was_written() -> None:
    node = made(5006)
    lst = Listener(4, LOCAL, 4791, True, UNTAGGED, 8, False)
    written: dict[str, Any] = {
        "tos": 0x48, "user_pri": 4, "rem_mac": bytes.fromhex("02aabbccddee"),
        "rcv_wnd": 0x3FFFC, "rcv_wscale": 0, "mss": 1440,
        "snd_wscale": 7, "snd_wnd": 65535 << 7, "max_snd_wnd": 65535 << 7,
        "mpa_frame_rev": 1, "mpav2_ird_ord": 0x8010C001, "ird_size": 16, "ord_size": 1,
        "rdma0_write": 1, "pdata_size": 512, "lsmm_size": 532,
        "passive_state": 2, "listener": lst,
    }
    assert set(written) == set(NodeSettings._fields)
    for name, value in written.items():
        node.update_settings(**{name: value})
    assert node.settings._asdict() == written
    assert node.settings.send_rdma0_op is Rdma0Op.WRITE_ZERO
    node.update_settings(rdma0_write=node_mod.rdma0_code(Rdma0Op.READ_ZERO))
    assert node.settings.send_rdma0_op is Rdma0Op.READ_ZERO
    node.loc_id = 0x3B48
    assert node.tcp_cntxt == TcpContext(
        client=False, loc_id=0x3B48, loc_seq_num=1000 + 5006, loc_ack_num=0,
        rem_ack_num=0, rcv_nxt=0, rcv_wnd=0x3FFFC, snd_wnd=65535 << 7,
        max_snd_wnd=65535 << 7, snd_wscale=7, rcv_wscale=0, mss=1440)


def test_an_unknown_field_is_refused() -> None:
    with pytest.raises(KeyError):
        made(5011).update_settings(no_such_field=1)


def test_grouped_writes() -> None:
    node, other = made(5007), made(5008)
    # irdma_handle_tcp_options: max_snd_wnd only grows
    node.record_tcp_options(1400, 3, 8000)
    node.record_tcp_options(1400, 3, 4000)
    st = node.settings
    assert (st.mss, st.snd_wscale, st.snd_wnd, st.max_snd_wnd) == (1400, 3, 4000, 8000)
    node.record_mpa(1, 10, None)
    st = node.settings
    assert (st.mpa_frame_rev, st.pdata_size, st.ird_size) == (1, 10, 127)
    node.record_mpa(2, 0, Negotiated(ird_size=8, ord_size=2, mpav2_ird_ord=0x4008C002,
                                     send_rdma0_op=Rdma0Op.WRITE_ZERO))
    st = node.settings
    assert (st.mpa_frame_rev, st.pdata_size, st.ird_size, st.ord_size,
            st.mpav2_ird_ord, st.send_rdma0_op) == (2, 0, 8, 2, 0x4008C002,
                                                    Rdma0Op.WRITE_ZERO)
    node.record_lsmm(24, 4)
    assert (node.settings.lsmm_size, node.settings.pdata_size) == (24, 4)
    o = other.settings
    assert (o.mss, o.snd_wnd, o.max_snd_wnd, o.ird_size) == (1460, 0, 0, 127)


def test_record_ird_ord_limits_and_zero_ord() -> None:
    node = made(5009)
    # irdma_record_ird_ord: clamped to the device's limits, ORD 0 -> 1 with a read RTR
    record_ird_ord(node, 500, 0, CmConfig())
    assert (node.settings.ird_size, node.settings.ord_size) == (127, 1)
    node.update_settings(rdma0_write=node_mod.rdma0_code(Rdma0Op.WRITE_ZERO))
    record_ird_ord(node, 3, 0, CmConfig())
    assert (node.settings.ird_size, node.settings.ord_size) == (3, 0)


def test_remembered_steps_stay_bounded() -> None:
    records: SharedRecords[NodeSettings] = SharedRecords(NodeSettings, NodeSettings._fields,
                                                         steps_max=64)
    record = node_mod.INITIAL_SETTINGS
    for size in range(200):
        record = records.changed(record, {"pdata_size": size})
        assert record.pdata_size == size
    assert len(records._steps) <= 64
