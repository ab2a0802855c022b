"""irdma_accept recomputes the node's VLAN from the local address (no dcb_vlan_mode conversion)."""

from __future__ import annotations

from helpers.audit_peer import Passive, listen, make_host, v2_request
from mpa_emu.stacks.irdma.config import CmConfig
from mpa_emu.stacks.irdma.states import CmState

from mpa_emu.wire.segment import ACK


def test_accept_takes_the_vlan_of_the_local_address_not_the_dcb_vlan_0() -> None:
    # irdma_accept: cm_node->vlan_id = irdma_get_vlan_ipv4(cm_node->loc_addr) (0xFFFF
    # for an untagged address, no dcb_vlan_mode conversion); irdma_init_tcp_ctx then
    # inserts no VLAN tag, so the reply the QP sends is untagged.
    p = make_host(CmConfig(gen=1, dcb_vlan_mode=True))
    listen(p)  # specific listener: vlan 0xFFFF -> 0 in dcb_vlan_mode
    pas = Passive(p, 1)
    [synack] = pas.syn(vlan=0)
    assert synack.vlan == 0
    pas.ack(v2_request(), vlan=0)
    conn = pas.conn()
    p.core.accept(conn, now_ns=p.now)
    [reply] = [s for s in p.drain() if s.payload]
    assert reply.flags & ACK
    view = p.core.node(conn)
    assert view is not None and view.state == CmState.OFFLOADED
    assert view.vlan_id == 0xFFFF
    assert reply.vlan is None


def test_after_accept_in_dcb_mode_an_address_removal_tears_the_connection_down() -> None:
    # With the VLAN recomputed by irdma_accept (0xFFFF), irdma_teardown_list_prep's
    # "nfo->vlan_id == cm_node->vlan_id" matches the 0xFFFF irdma_if_notify computes for
    # the untagged address, so the offloaded QP goes to ERROR and resets the TCP
    # connection (irdma_modify_qp: RST).
    p = make_host(CmConfig(gen=1, dcb_vlan_mode=True))
    listen(p)
    pas = Passive(p, 1)
    pas.syn(vlan=0)
    pas.ack(v2_request(), vlan=0)
    conn = pas.conn()
    p.core.accept(conn, now_ns=p.now)
    p.drain()
    p.core.remove_address(p.ip_h, now_ns=p.now)
    assert any(s.flags & 0x04 for s in p.drain())  # RST from the QP
