"""The firmware's TCP as qed_iwarp_tcp_offload and qed_iwarp_setup parameterise it: MSS
from the port MTU (at most QED_IWARP_MAX_FW_MSS), timestamps (QED_IWARP_TS_EN), window
scale rcv_wnd_scale = ilog2(256 KiB) - ilog2(0xffff) = 3, no SACK bit in the offload
parameters, TTL 0x40."""

from __future__ import annotations

from helpers.cxgb4_lab import IP_A, IP_B, PORT, make_net

from mpa_emu.net.network import Network
from mpa_emu.stacks.qedr.params import QedrParams, fw_mss
from mpa_emu.stacks.tcp import options as opts
from mpa_emu.wire.segment import ACK, SYN

MS = 1_000_000


def _syns() -> tuple[Network, list[object]]:
    net = make_net()
    a = net.add_host("a", IP_A, stack="qedr")
    b = net.add_host("b", IP_B, stack="qedr")
    b.listen(PORT)
    a.connect(b, PORT, ird=2, ord=2)
    net.run_for(10 * MS)
    return net, [f.segment for f in net.frames if f.segment.flags & SYN]


def test_syn_and_synack_options() -> None:
    _net, (syn, synack) = _syns()
    for seg in (syn, synack):
        parsed = opts.parse(seg.options)  # type: ignore[attr-defined]
        assert parsed.mss == 1460  # iwarp_max_mtu 1500 - 20 - 20
        assert parsed.wscale == 3  # rcv_wnd_scale
        assert parsed.tsval is not None  # TCP_OFFLOAD_PARAMS_OPT2_TS_EN
        assert not parsed.sack_perm
        assert seg.ttl == 64  # type: ignore[attr-defined]  # tcp->ttl = 0x40
        assert seg.window == 65535  # type: ignore[attr-defined]  # fw_syn_window


def test_established_window_is_256k_scaled_by_3() -> None:
    net, _ = _syns()
    acks = [f.segment for f in net.frames
            if not f.segment.flags & SYN and f.segment.flags & ACK]
    assert acks and {seg.window for seg in acks} == {32768}  # 262144 >> 3


def test_mss_is_capped_at_the_firmware_s_4120() -> None:
    assert fw_mss(9000, ipv6=False) == 4120  # min_t(u16, QED_IWARP_MAX_FW_MSS, ...)
    assert fw_mss(1500, ipv6=True) == 1440  # 1500 - 60 (qed_iwarp_ll2_comp_syn_pkt)


def test_window_scale_follows_the_receive_window() -> None:
    # qed_iwarp_setup: ilog2(rcv_wnd_size) - ilog2(QED_IWARP_RCV_WND_SIZE_MIN)
    assert QedrParams().rcv_wnd_scale == 3 and QedrParams().rcv_wnd == 32768
    assert QedrParams(rcv_wnd_size=1 << 20).rcv_wnd_scale == 5
    assert QedrParams(rcv_wnd_size=0xFFFF).rcv_wnd_scale == 0
