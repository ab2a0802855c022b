"""rdma_cm's mapping of iw_cm events (cma.c: cma_iw_handler, iw_conn_req_handler) and the
values of enum rdma_cm_event_type (include/rdma/rdma_cm.h). The expected values are read
from those files and written here by hand."""

from __future__ import annotations

from errno import ECONNREFUSED, ECONNRESET, EINVAL, ENOMEM, ETIMEDOUT

import pytest
from mpa_emu.stacks.contract.events import IwEvent, Upcall

from mpa_emu.ulp.rdma_cm import RdmaCmEventType, connect_reply_event, map_upcall

# include/rdma/rdma_cm.h: the enum counts from 0 in this order.
KERNEL_ORDER = ["ADDR_RESOLVED", "ADDR_ERROR", "ROUTE_RESOLVED", "ROUTE_ERROR",
                "CONNECT_REQUEST", "CONNECT_RESPONSE", "CONNECT_ERROR", "UNREACHABLE",
                "REJECTED", "ESTABLISHED", "DISCONNECTED", "DEVICE_REMOVAL", "MULTICAST_JOIN",
                "MULTICAST_ERROR", "ADDR_CHANGE", "TIMEWAIT_EXIT"]


def _upcall(event: IwEvent, status: int = 0, *, pdata: bytes = b"", plen: int | None = None,
            ird: int = 0, ord_: int = 0, listener: int | None = None) -> Upcall:
    return Upcall(event, 7, status, 1234, b"\xc0\x00\x02\x01", 49152, b"\xc0\x00\x02\x02",
                  31000, pdata, len(pdata) if plen is None else plen, ird, ord_, listener)


def test_enum_values_are_the_kernels() -> None:
    assert [e.name for e in RdmaCmEventType] == KERNEL_ORDER
    assert [int(e) for e in RdmaCmEventType] == list(range(16))
    assert RdmaCmEventType.REJECTED.kernel_name == "RDMA_CM_EVENT_REJECTED"


@pytest.mark.parametrize(("status", "expected"), [
    (0, RdmaCmEventType.ESTABLISHED),
    (-ECONNRESET, RdmaCmEventType.REJECTED),
    (-ECONNREFUSED, RdmaCmEventType.REJECTED),
    (-ETIMEDOUT, RdmaCmEventType.UNREACHABLE),
    (-EINVAL, RdmaCmEventType.CONNECT_ERROR),
    (-ENOMEM, RdmaCmEventType.CONNECT_ERROR),
])
def test_connect_reply_status_switch(status: int, expected: RdmaCmEventType) -> None:
    """cma_iw_handler, case IW_CM_EVENT_CONNECT_REPLY: switch on the status."""
    assert connect_reply_event(status) == expected
    ev = map_upcall(_upcall(IwEvent.CONNECT_REPLY, status, pdata=b"why", ird=4, ord_=8))
    assert ev is not None
    assert ev.event == expected
    assert ev.status == status  # event.status = iw_event->status
    assert ev.fn == "cma_iw_handler"
    assert (ev.private_data, ev.private_data_len) == (b"why", 3)
    # Only status 0 fills initiator_depth/responder_resources from ird/ord.
    assert (ev.initiator_depth, ev.responder_resources) == ((4, 8) if status == 0 else (0, 0))


def test_established_carries_ird_ord_and_status() -> None:
    """cma_iw_handler, case IW_CM_EVENT_ESTABLISHED."""
    ev = map_upcall(_upcall(IwEvent.ESTABLISHED, 0, ird=127, ord_=4))
    assert ev is not None
    assert (ev.event, ev.status) == (RdmaCmEventType.ESTABLISHED, 0)
    assert (ev.initiator_depth, ev.responder_resources) == (127, 4)


def test_close_is_disconnected() -> None:
    """cma_iw_handler, case IW_CM_EVENT_CLOSE: RDMA_CM_EVENT_DISCONNECTED."""
    ev = map_upcall(_upcall(IwEvent.CLOSE))
    assert ev is not None and ev.event == RdmaCmEventType.DISCONNECTED
    assert ev.name == "RDMA_CM_EVENT_DISCONNECTED" and int(ev.event) == 10


def test_disconnect_has_no_rdma_cm_event() -> None:
    """cma_iw_handler's default: goto out (and iw_cm never passes DISCONNECT up)."""
    assert map_upcall(_upcall(IwEvent.DISCONNECT, -ECONNRESET)) is None


def test_connect_request_fills_conn_param_and_status_zero() -> None:
    """iw_conn_req_handler: event zeroed, CONNECT_REQUEST, private data and its length,
    initiator_depth = ird, responder_resources = ord; status never set."""
    ev = map_upcall(_upcall(IwEvent.CONNECT_REQUEST, 0, pdata=b"hello", ird=16, ord_=2,
                            listener=3))
    assert ev is not None
    assert (ev.event, int(ev.event), ev.status) == (RdmaCmEventType.CONNECT_REQUEST, 4, 0)
    assert (ev.private_data, ev.private_data_len) == (b"hello", 5)
    assert (ev.initiator_depth, ev.responder_resources) == (16, 2)
    assert ev.listener == 3 and ev.fn == "iw_conn_req_handler"


def test_private_data_length_is_a_u8() -> None:
    """rdma_conn_param.private_data_len is a u8: a longer length wraps."""
    data = bytes(300)
    ev = map_upcall(_upcall(IwEvent.CONNECT_REPLY, 0, pdata=data, plen=300))
    assert ev is not None
    assert ev.private_data_len == 300 - 256
    assert ev.private_data == data[:44]


@pytest.mark.parametrize("text", ["RDMA_CM_EVENT_REJECTED", "rejected", " REJECTED "])
def test_parse_event_names(text: str) -> None:
    assert RdmaCmEventType.parse(text) == RdmaCmEventType.REJECTED


def test_parse_unknown_event_names_the_choices() -> None:
    with pytest.raises(ValueError) as exc:
        RdmaCmEventType.parse("RDMA_CM_EVENT_NOPE")
    assert str(exc.value).startswith("unknown rdma_cm event 'RDMA_CM_EVENT_NOPE'")
    assert "RDMA_CM_EVENT_TIMEWAIT_EXIT" in str(exc.value)
