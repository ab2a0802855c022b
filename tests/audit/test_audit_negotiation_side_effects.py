"""irdma_negotiate_mpa_v2_ird_ord changes the node in place before it fails, and the
abort upcall reports the changed values."""

from __future__ import annotations

from errno import ECONNRESET

from helpers.audit_peer import make_host, to_mpareq_sent, v2_reply
from mpa_emu.stacks.contract.events import IwEvent

from mpa_emu.wire.segment import ACK


def test_connect_reply_econnreset_reports_the_ord_lowered_before_the_einval() -> None:
    # initiator branch: "if (cm_node->ord_size > ird_size) cm_node->ord_size = ird_size;"
    # runs before "if (cm_node->ird_size < ord_size) return -EINVAL;". The abort path
    # (irdma_active_open_err -> ABORTED -> irdma_event_connect_error) then reports
    # event.ord = cm_node->ord_size (irdma_get_cmevent_info): 8, not 16.
    p = make_host()
    a, req = to_mpareq_sent(p, ird=16, ord_=16)
    end = a.isn_h + 1 + len(req.payload)
    a.to_core(flags=ACK, ack=end, payload=v2_reply(ird=8, ord_=17))
    [up] = p.ups
    assert (up.event, up.status) == (IwEvent.CONNECT_REPLY, -ECONNRESET)
    assert (up.ird, up.ord) == (16, 8)


def test_connect_reply_econnreset_after_no_rtr_bits_reports_the_lowered_ord() -> None:
    # the limits run, then negotiate_done finds neither READ nor WRITE: -EOPNOTSUPP
    p = make_host()
    a, req = to_mpareq_sent(p, ird=16, ord_=16)
    end = a.isn_h + 1 + len(req.payload)
    a.to_core(flags=ACK, ack=end, payload=v2_reply(ird=3, ord_=1, read=False, write=False))
    [up] = p.ups
    assert up.status == -ECONNRESET and up.ord == 3
