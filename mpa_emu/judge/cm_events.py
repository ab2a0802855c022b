"""The rdma_cm event an application sees for an iw_cm event, as ``cma_iw_handler``
(drivers/infiniband/core/cma.c) maps them, and the iw_cm events each stack raises for the
outcomes explain tells apart.

cma_iw_handler: IW_CM_EVENT_CLOSE -> RDMA_CM_EVENT_DISCONNECTED; IW_CM_EVENT_CONNECT_REPLY
with status 0 -> RDMA_CM_EVENT_ESTABLISHED, -ECONNRESET or -ECONNREFUSED ->
RDMA_CM_EVENT_REJECTED, -ETIMEDOUT -> RDMA_CM_EVENT_UNREACHABLE, anything else ->
RDMA_CM_EVENT_CONNECT_ERROR; IW_CM_EVENT_ESTABLISHED -> RDMA_CM_EVENT_ESTABLISHED; the
event's status is the iw_cm status. A responder learns of a connection through
iw_conn_req_handler: RDMA_CM_EVENT_CONNECT_REQUEST.
"""

from __future__ import annotations

import errno

from mpa_emu.judge.stacks import CXGB4, IRDMA, SIW

CONNECT_REQUEST = "RDMA_CM_EVENT_CONNECT_REQUEST"
ESTABLISHED = "RDMA_CM_EVENT_ESTABLISHED"
REJECTED = "RDMA_CM_EVENT_REJECTED"
UNREACHABLE = "RDMA_CM_EVENT_UNREACHABLE"
CONNECT_ERROR = "RDMA_CM_EVENT_CONNECT_ERROR"
DISCONNECTED = "RDMA_CM_EVENT_DISCONNECTED"
NONE = ""


def connect_reply_event(status: int) -> str:
    """cma_iw_handler's event for IW_CM_EVENT_CONNECT_REPLY with ``status``."""
    if status == 0:
        return ESTABLISHED
    if status in (-errno.ECONNRESET, -errno.ECONNREFUSED):
        return REJECTED
    if status == -errno.ETIMEDOUT:
        return UNREACHABLE
    return CONNECT_ERROR


REJECT_STATUS = {
    IRDMA: -errno.ECONNREFUSED,  # irdma_cm_event_handler: MPA_REJECT
    SIW: -errno.ECONNRESET,  # siw_proc_mpareply: "got mpa reject"
    CXGB4: -errno.ECONNREFUSED,  # process_mpa_reply: MPA_REJECT
}
"""CONNECT_REPLY status of an initiator that receives a reject (R)."""

RESET_STATUS = {
    IRDMA: -errno.ECONNRESET,  # irdma_event_connect_error (ABORTED)
    SIW: -errno.ECONNRESET,  # siw_cm_work_handler, SIW_CM_WORK_PEER_CLOSE in AWAIT_MPAREP
    CXGB4: -errno.ECONNRESET,  # peer_abort / peer_close in MPA_REQ_SENT
}
"""CONNECT_REPLY status of an initiator whose connection is reset or closed by the peer
while it waits for the reply."""

TIMEOUT_STATUS = {
    IRDMA: -errno.ECONNRESET,  # retransmission expiry: RST, irdma_event_connect_error
    SIW: -errno.ETIMEDOUT,  # SIW_CM_WORK_MPATIMEOUT in AWAIT_MPAREP
    CXGB4: -errno.ETIMEDOUT,  # process_timeout in MPA_REQ_SENT
}
"""CONNECT_REPLY status of an initiator that never gets the reply."""


def status_of(table: dict[str, int], stack: str, default: int) -> int:
    """The stack's status from ``table``; ``default`` for a stack not in it (the common
    value, named as such in the explanation)."""
    return table.get(stack, default)
