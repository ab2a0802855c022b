"""cm.c's upcalls to iw_cm: ``connect_reply_upcall``, ``connect_request_upcall``,
``established_upcall``, ``peer_close_upcall``, ``peer_abort_upcall`` and
``close_complete_upcall``, each filling the event as the kernel fills ``struct
iw_cm_event`` and queueing it on the contract's upcall queue (``cm.base.push``)."""

from __future__ import annotations

from errno import ECONNREFUSED, ECONNRESET

from mpa_emu.stacks.contract.events import IwEvent, Upcall
from mpa_emu.stacks.cxgb4.cm import Cxgb4Cm
from mpa_emu.stacks.cxgb4.endpoint import Endpoint
from mpa_emu.wire import mpa


def _upcall(cm: Cxgb4Cm, fn: str, ep: Endpoint, event: IwEvent, status: int, *,
            pdata: bytes = b"", pdata_len: int = 0, ird: int = 0, ord: int = 0,
            listener: int | None = None, past: int = 0) -> None:
    cm.base.push(Upcall(event, ep.conn, status, cm.base.now_ns, ep.local_ip,
                          ep.local_port, ep.remote_ip, ep.remote_port, pdata, pdata_len,
                          ird, ord, listener, past), fn)


def _pdata(cm: Cxgb4Cm, ep: Endpoint, v2: bool) -> tuple[bytes, int, int]:
    """Private data as the upcalls point at it: after the header (and the 4-byte
    block when v2), ``(u8)`` length; bytes past the received frame counted."""
    start = mpa.FRAME_SIZE + (mpa.RTR_MSG_SIZE if v2 else 0)
    length = (ep.plen - (mpa.RTR_MSG_SIZE if v2 else 0)) & 0xFF
    data = bytes(ep.mpa_pkt[start:start + length])
    data += bytes(length - len(data))
    past = max(0, start + length - ep.mpa_pkt_len)
    return data, length, min(past, length)


def connect_reply_upcall(cm: Cxgb4Cm, ep: Endpoint, status: int) -> None:
    """``connect_reply_upcall``: CONNECT_REPLY; private data and IRD/ORD only for 0
    and -ECONNREFUSED; a failure drops the cm_id."""
    if not ep.has_cm_id:
        return
    pdata, length, past, ird, ord = b"", 0, 0, 0, 0
    if status in (0, -ECONNREFUSED):
        if not ep.tried_with_mpa_v1:
            pdata, length, past = _pdata(cm, ep, True)
            ird, ord = ep.ord, ep.ird
        else:
            pdata, length, past = _pdata(cm, ep, False)
            ird = ord = cm.p.cur_max_read_depth
    _upcall(cm, "connect_reply_upcall", ep, IwEvent.CONNECT_REPLY, status, pdata=pdata,
                 pdata_len=length, ird=ird, ord=ord, past=past)
    if status < 0:
        ep.has_cm_id = False


def connect_request_upcall(cm: Cxgb4Cm, ep: Endpoint) -> None:
    """``connect_request_upcall``: CONNECT_REQUEST to the listener's ULP."""
    if not ep.tried_with_mpa_v1:
        pdata, length, past = _pdata(cm, ep, True)
        ird, ord = ep.ird, ep.ord
    else:
        pdata, length, past = _pdata(cm, ep, False)
        ird = ord = cm.p.cur_max_read_depth
    ep.held = True
    _upcall(cm, "connect_request_upcall", ep, IwEvent.CONNECT_REQUEST, 0, pdata=pdata,
                 pdata_len=length, ird=ird, ord=ord, listener=ep.parent, past=past)


def established_upcall(cm: Cxgb4Cm, ep: Endpoint) -> None:
    """``established_upcall``: ESTABLISHED with IRD = ``ep->ord``, ORD = ``ep->ird``."""
    if ep.has_cm_id:
        _upcall(cm, "established_upcall", ep, IwEvent.ESTABLISHED, 0, ird=ep.ord,
                     ord=ep.ird)


def peer_close_upcall(cm: Cxgb4Cm, ep: Endpoint) -> None:
    """``peer_close_upcall``: DISCONNECT."""
    if ep.has_cm_id:
        _upcall(cm, "peer_close_upcall", ep, IwEvent.DISCONNECT, 0)


def peer_abort_upcall(cm: Cxgb4Cm, ep: Endpoint) -> None:
    """``peer_abort_upcall``: CLOSE -ECONNRESET; drops the cm_id."""
    if ep.has_cm_id:
        _upcall(cm, "peer_abort_upcall", ep, IwEvent.CLOSE, -ECONNRESET)
        ep.has_cm_id = False


def close_complete_upcall(cm: Cxgb4Cm, ep: Endpoint, status: int) -> None:
    """``close_complete_upcall``: CLOSE with ``status``; drops the cm_id."""
    if ep.has_cm_id:
        _upcall(cm, "close_complete_upcall", ep, IwEvent.CLOSE, status)
        ep.has_cm_id = False
