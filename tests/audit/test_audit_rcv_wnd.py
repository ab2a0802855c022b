"""tcp_cntxt.rcv_wnd is a u32: irdma_check_seq uses all of it, the header field 16 bits."""

from __future__ import annotations

from helpers.audit_peer import Passive, listen, make_host, v1_request
from mpa_emu.stacks.irdma.config import CmConfig

from mpa_emu.wire.segment import ACK


def test_check_seq_uses_the_32_bit_rcv_wnd_when_rcv_wscale_is_0() -> None:
    # irdma_make_cm_node: rcv_wnd = iwdev->rcv_wnd (0x3FFFC) >> rcv_wscale, a u32
    # (struct irdma_cm_tcp_context); only the header field is truncated by htons.
    # irdma_check_seq compares against the u32: 262140 with rcv_wscale 0.
    p = make_host(CmConfig(rcv_wscale=0))
    listen(p)
    pas = Passive(p, 1)
    [synack] = pas.syn()
    assert synack.window == 0xFFFC
    pas.ack()                                    # ESTABLISHED, rcv_nxt = 1001
    req = v1_request()
    [ack] = pas.ack(req, seq_off=100_000)        # inside [rcv_nxt, rcv_nxt + 262140]
    assert ack.flags == ACK and ack.ack == 1001 + 100_000 + len(req)
