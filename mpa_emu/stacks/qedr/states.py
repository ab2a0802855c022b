"""qed's endpoint and QP states, the RTR types and the firmware's codes, with the
kernel's names.

``EpState`` is ``enum qed_iwarp_ep_state`` and ``QpState`` ``enum qed_iwarp_qp_state``
(qed_iwarp.h); ``RtrType`` ``enum mpa_rtr_type`` and ``MpaMode`` ``enum
mpa_negotiation_mode`` (the firmware interface, qed_hsi.h / iwarp_common.h); ``QedEvent``
``enum qed_iwarp_event_type`` (include/linux/qed/qed_rdma_if.h), what qed hands
qedr_iw_event_handler. ``FwReturn`` names the ``fw_return_code`` values of the async
events (``enum iwarp_eqe_async_opcode``'s completions: RDMA_RETURN_OK and the
``IWARP_CONN_ERROR_*``, ``IWARP_QP_IN_ERROR_*`` and ``IWARP_EXCEPTION_DETECTED_*``
codes) by their names: the model never needs their numbers.
"""

from __future__ import annotations

from enum import IntEnum, IntFlag


class EpState(IntEnum):
    """``enum qed_iwarp_ep_state``."""

    INIT = 0
    MPA_REQ_RCVD = 1
    MPA_OFFLOADED = 2
    ESTABLISHED = 3
    CLOSED = 4


STATES: tuple[str, ...] = tuple(s.name for s in EpState)
"""The kernel's names of the endpoint states, in kernel order (without ``QED_IWARP_EP_``)."""


class QpState(IntEnum):
    """``enum qed_iwarp_qp_state`` (the ``iwarp_state_names[]`` of qed_iwarp.c)."""

    IDLE = 0
    RTS = 1
    TERMINATE = 2
    CLOSING = 3
    ERROR = 4


class RtrType(IntFlag):
    """``enum mpa_rtr_type``: the zero-length RTRs an endpoint offers (a bit set)."""

    NONE = 0
    ZERO_SEND = 1
    ZERO_WRITE = 2
    ZERO_READ = 4


RTR_NAMES = {RtrType.ZERO_SEND: "send", RtrType.ZERO_WRITE: "write",
             RtrType.ZERO_READ: "read"}


class MpaMode(IntEnum):
    """``enum mpa_negotiation_mode``: the ``mode`` of the mpa offload ramrod and the
    ``mpa_handshake_mode`` the firmware reports for a request."""

    BASIC = 1
    ENHANCED = 2


class ConnectMode(IntEnum):
    """``enum tcp_connect_mode``."""

    ACTIVE = 1
    PASSIVE = 2


class QedEvent(IntEnum):
    """``enum qed_iwarp_event_type``: the events qed gives ``event_cb``."""

    MPA_REQUEST = 0
    PASSIVE_COMPLETE = 1
    ACTIVE_COMPLETE = 2
    DISCONNECT = 3
    CLOSE = 4
    IRQ_FULL = 5
    RQ_EMPTY = 6
    LLP_TIMEOUT = 7
    REMOTE_PROTECTION_ERROR = 8
    CQ_OVERFLOW = 9
    QP_CATASTROPHIC = 10
    ACTIVE_MPA_REPLY = 11
    LOCAL_ACCESS_ERROR = 12
    REMOTE_OPERATION_ERROR = 13
    TERMINATE_RECEIVED = 14


# fw_return_code values, by name (qed_iwarp_mpa_complete, qed_iwarp_tcp_connect_
# unsuccessful, qed_iwarp_qp_in_error, qed_iwarp_exception_received switch on them).
RDMA_RETURN_OK = "RDMA_RETURN_OK"
TCP_CONNECT_INVALID_PACKET = "IWARP_CONN_ERROR_TCP_CONNECT_INVALID_PACKET"
TCP_CONNECTION_RST = "IWARP_CONN_ERROR_TCP_CONNECTION_RST"
TCP_CONNECT_TIMEOUT = "IWARP_CONN_ERROR_TCP_CONNECT_TIMEOUT"
MPA_ERROR_REJECT = "IWARP_CONN_ERROR_MPA_ERROR_REJECT"
MPA_NOT_SUPPORTED_VER = "IWARP_CONN_ERROR_MPA_NOT_SUPPORTED_VER"
MPA_RST = "IWARP_CONN_ERROR_MPA_RST"
MPA_FIN = "IWARP_CONN_ERROR_MPA_FIN"
MPA_RTR_MISMATCH = "IWARP_CONN_ERROR_MPA_RTR_MISMATCH"
MPA_INSUF_IRD = "IWARP_CONN_ERROR_MPA_INSUF_IRD"
MPA_INVALID_PACKET = "IWARP_CONN_ERROR_MPA_INVALID_PACKET"
MPA_LOCAL_ERROR = "IWARP_CONN_ERROR_MPA_LOCAL_ERROR"
MPA_TIMEOUT = "IWARP_CONN_ERROR_MPA_TIMEOUT"
MPA_TERMINATE = "IWARP_CONN_ERROR_MPA_TERMINATE"
QP_IN_ERROR_GOOD_CLOSE = "IWARP_QP_IN_ERROR_GOOD_CLOSE"
QP_IN_ERROR_BAD_CLOSE = "IWARP_QP_IN_ERROR_BAD_CLOSE"
EXCEPTION_LLP_CLOSED = "IWARP_EXCEPTION_DETECTED_LLP_CLOSED"
EXCEPTION_LLP_RESET = "IWARP_EXCEPTION_DETECTED_LLP_RESET"
EXCEPTION_TERMINATE_RECEIVED = "IWARP_EXCEPTION_DETECTED_TERMINATE_RECEIVED"

MPA_V2_PEER2PEER_MODEL = 0x8000
MPA_V2_SEND_RTR = 0x4000
"""qed_iwarp.c: on the IRD word (RFC 6581's B, the zero-length Send RTR)."""
MPA_V2_READ_RTR = 0x4000
"""On the ORD word."""
MPA_V2_WRITE_RTR = 0x8000
MPA_V2_IRD_ORD_MASK = 0x3FFF
