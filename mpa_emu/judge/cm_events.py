"""The rdma_cm event an application sees for an iw_cm event, as ``cma_iw_handler``
(drivers/infiniband/core/cma.c) maps them (the mapping is :mod:`mpa_emu.ulp.rdma_cm`'s),
and the iw_cm statuses each stack raises for the outcomes explain tells apart.

cma_iw_handler: IW_CM_EVENT_CLOSE -> RDMA_CM_EVENT_DISCONNECTED; IW_CM_EVENT_CONNECT_REPLY
with status 0 -> RDMA_CM_EVENT_ESTABLISHED, -ECONNRESET or -ECONNREFUSED ->
RDMA_CM_EVENT_REJECTED, -ETIMEDOUT -> RDMA_CM_EVENT_UNREACHABLE, anything else ->
RDMA_CM_EVENT_CONNECT_ERROR; IW_CM_EVENT_ESTABLISHED -> RDMA_CM_EVENT_ESTABLISHED; the
event's status is the iw_cm status. A responder learns of a connection through
iw_conn_req_handler: RDMA_CM_EVENT_CONNECT_REQUEST.

The statuses are each stack's own facts (``STACKS[name].statuses``, with the function
that sets each one).
"""

from __future__ import annotations

from mpa_emu.stacks import STACKS
from mpa_emu.ulp.rdma_cm import RdmaCmEventType
from mpa_emu.ulp.rdma_cm import connect_reply_event as cma_connect_reply_event

CONNECT_REQUEST = RdmaCmEventType.CONNECT_REQUEST.kernel_name
ESTABLISHED = RdmaCmEventType.ESTABLISHED.kernel_name
REJECTED = RdmaCmEventType.REJECTED.kernel_name
UNREACHABLE = RdmaCmEventType.UNREACHABLE.kernel_name
CONNECT_ERROR = RdmaCmEventType.CONNECT_ERROR.kernel_name
DISCONNECTED = RdmaCmEventType.DISCONNECTED.kernel_name
NONE = ""


def connect_reply_event(status: int) -> str:
    """cma_iw_handler's event for IW_CM_EVENT_CONNECT_REPLY with ``status``
    (:func:`mpa_emu.ulp.rdma_cm.connect_reply_event`)."""
    return cma_connect_reply_event(status).kernel_name


REJECT_STATUS = {name: stack.statuses.reject for name, stack in STACKS.items()}
"""CONNECT_REPLY status of an initiator that receives a reject (R)."""

RESET_STATUS = {name: stack.statuses.reset for name, stack in STACKS.items()}
"""CONNECT_REPLY status of an initiator whose connection is reset or closed by the peer
while it waits for the reply."""

TIMEOUT_STATUS = {name: stack.statuses.timeout for name, stack in STACKS.items()}
"""CONNECT_REPLY status of an initiator that never gets the reply."""


def status_of(table: dict[str, int], stack: str, default: int) -> int:
    """The stack's status from ``table``; ``default`` for a stack not in it (the common
    value, named as such in the explanation)."""
    return table.get(stack, default)
