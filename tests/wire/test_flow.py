"""The one connection key (mpa_emu.wire.flow): an untagged flow has the VLAN id 0xFFFF
(what rdma_vlan_dev_vlan_id gives for a device without a VLAN), a tagged one its 802.1Q
VLAN id (0..4095, IEEE 802.1Q)."""

from __future__ import annotations

from mpa_emu.stacks.irdma.states import NO_VLAN as CM_NO_VLAN

from mpa_emu.wire.flow import NO_VLAN, flow_key, flow_vlan

IP_A, IP_B = bytes([192, 0, 2, 1]), bytes([192, 0, 2, 2])


def test_an_untagged_flow_keys_with_the_kernel_s_no_vlan() -> None:
    key = flow_key(IP_A, 40000, IP_B, 31000, None)
    assert key == (IP_A, 40000, IP_B, 31000, 0xFFFF)
    assert flow_vlan(key) is None
    assert NO_VLAN == CM_NO_VLAN == 0xFFFF


def test_a_tagged_flow_keeps_its_vlan_id_zero_included() -> None:
    assert flow_vlan(flow_key(IP_A, 1, IP_B, 2, 10)) == 10
    assert flow_vlan(flow_key(IP_A, 1, IP_B, 2, 0)) == 0  # priority-tagged: VLAN id 0
