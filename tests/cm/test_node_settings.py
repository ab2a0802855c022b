"""The node's settings record (``CmNode.settings``): what ``irdma_make_cm_node`` and the
later writers store reads back unchanged, nodes holding equal settings share one record,
and a write to one node never shows in another (copy-on-write)."""

from __future__ import annotations

from mpa_emu.cm import node as node_mod
from mpa_emu.cm.config import CmConfig
from mpa_emu.cm.mpa_policy import Negotiated, Rdma0Op
from mpa_emu.cm.node import CmNode, Listener, TcpContext
from mpa_emu.cm.nodes import make_cm_node, record_ird_ord

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
    # rt_tos2priority(IPTOS_LOWDELAY): ip_tos2prio[8] = TC_PRIO_INTERACTIVE
    assert (node.tos, node.user_pri, node.rem_mac) == (0x10, 6, MAC)
    # irdma_make_cm_node: IRDMA_CM_DEFAULT_RCV_WND_SCALED (0x3FFFC) >> scale 2, and
    # MSS = MTU 1500 - 40 (IPv4 and TCP headers)
    assert (node.rcv_wscale, node.rcv_wnd, node.mss) == (2, 0xFFFF, 1460)
    assert (node.mpa_frame_rev, node.ird_size, node.ord_size) == (2, 127, 255)
    assert node.listener is lst
    # untouched by irdma_make_cm_node
    assert (node.snd_wscale, node.snd_wnd, node.max_snd_wnd, node.loc_id) == (0, 0, 0, 0x3B47)
    assert (node.mpav2_ird_ord, node.send_rdma0_op) == (0, Rdma0Op.READ_ZERO)
    assert (node.pdata_size, node.lsmm_size, node.passive_state) == (0, 0, 0)


def test_nodes_with_equal_settings_share_one_record() -> None:
    a, b = made(5001), made(5002)
    assert a.settings is b.settings
    a.ird_size, b.ird_size = 9, 9
    a.pdata_size, b.pdata_size = 21, 21
    assert a.settings is b.settings


def test_a_write_changes_only_its_own_node() -> None:
    a, b = made(5003), made(5004)
    a.ird_size = 7
    a.pdata_size = 33
    a.passive_state += 1
    assert (a.ird_size, a.pdata_size, a.passive_state) == (7, 33, 1)
    assert (b.ird_size, b.pdata_size, b.passive_state) == (127, 0, 0)
    b.ord_size = 4
    assert (a.ord_size, b.ord_size) == (255, 4)
    # the same write again (a remembered step) still changes only the node written
    c = made(5005)
    c.ird_size = 7
    assert (c.ird_size, b.ird_size, a.ird_size) == (7, 127, 7)


def test_every_field_reads_back_what_was_written() -> None:
    node = made(5006)
    lst = Listener(4, LOCAL, 4791, True, UNTAGGED, 8, False)
    written: dict[str, object] = {
        "tos": 0x48, "user_pri": 4, "rem_mac": bytes.fromhex("02aabbccddee"),
        "loc_id": 0x3B48, "rcv_wnd": 0x3FFFC, "rcv_wscale": 0, "mss": 1440,
        "snd_wscale": 7, "snd_wnd": 65535 << 7, "max_snd_wnd": 65535 << 7,
        "mpa_frame_rev": 1, "mpav2_ird_ord": 0x8010C001, "ird_size": 16, "ord_size": 1,
        "send_rdma0_op": Rdma0Op.WRITE_ZERO, "pdata_size": 512, "lsmm_size": 532,
        "passive_state": 2, "listener": lst,
    }
    for name, value in written.items():
        setattr(node, name, value)
    assert {name: getattr(node, name) for name in written} == written
    assert node.send_rdma0_op is Rdma0Op.WRITE_ZERO
    node.send_rdma0_op = Rdma0Op.READ_ZERO
    assert node.send_rdma0_op is Rdma0Op.READ_ZERO
    assert node.tcp_cntxt == TcpContext(
        client=False, loc_id=0x3B48, loc_seq_num=1000 + 5006, loc_ack_num=0,
        rem_ack_num=0, rcv_nxt=0, rcv_wnd=0x3FFFC, snd_wnd=65535 << 7,
        max_snd_wnd=65535 << 7, snd_wscale=7, rcv_wscale=0, mss=1440)


def test_grouped_writes() -> None:
    node, other = made(5007), made(5008)
    # irdma_handle_tcp_options: max_snd_wnd only grows
    node.record_tcp_options(1400, 3, 8000)
    node.record_tcp_options(1400, 3, 4000)
    assert (node.mss, node.snd_wscale, node.snd_wnd, node.max_snd_wnd) == (1400, 3, 4000,
                                                                             8000)
    node.record_mpa(1, 10, None)
    assert (node.mpa_frame_rev, node.pdata_size, node.ird_size) == (1, 10, 127)
    node.record_mpa(2, 0, Negotiated(ird_size=8, ord_size=2, mpav2_ird_ord=0x4008C002,
                                     send_rdma0_op=Rdma0Op.WRITE_ZERO))
    assert (node.mpa_frame_rev, node.pdata_size, node.ird_size, node.ord_size,
            node.mpav2_ird_ord, node.send_rdma0_op) == (2, 0, 8, 2, 0x4008C002,
                                                        Rdma0Op.WRITE_ZERO)
    node.record_lsmm(24, 4)
    assert (node.lsmm_size, node.pdata_size) == (24, 4)
    assert (other.mss, other.snd_wnd, other.max_snd_wnd, other.ird_size) == (1460, 0, 0, 127)


def test_record_ird_ord_limits_and_zero_ord() -> None:
    node = made(5009)
    # irdma_record_ird_ord: clamped to the device's limits, ORD 0 -> 1 with a read RTR
    record_ird_ord(node, 500, 0, CmConfig())
    assert (node.ird_size, node.ord_size) == (127, 1)
    node.send_rdma0_op = Rdma0Op.WRITE_ZERO
    record_ird_ord(node, 3, 0, CmConfig())
    assert (node.ird_size, node.ord_size) == (3, 0)


def test_remembered_steps_stay_bounded() -> None:
    node = made(5010)
    for size in range(node_mod.STEPS_MAX + 50):
        node.pdata_size = size
        assert node.pdata_size == size
    assert len(node_mod._STEPS) <= node_mod.STEPS_MAX
