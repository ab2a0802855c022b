"""Hardware TCP and iWARP QP states as the NIC reports them in AEQEs (irdma defs.h).

The driver copies both into ``iwqp->hw_tcp_state`` / ``iwqp->hw_iwarp_state`` from every
asynchronous event (``irdma_process_aeq``), and ``irdma_cm_disconn_true`` decides on
them, so the numeric values are kept.
"""

from __future__ import annotations

import enum
from enum import IntEnum
from typing import Final


class TcpState(IntEnum):
    """``IRDMA_TCP_STATE_*``: the NIC's TCP state for one offloaded connection."""

    NON_EXISTENT = 0
    CLOSED = 1
    LISTEN = 2
    SYN_SENT = 3
    SYN_RECEIVED = 4
    ESTABLISHED = 5
    CLOSE_WAIT = 6
    FIN_WAIT_1 = 7
    CLOSING = 8
    LAST_ACK = 9
    FIN_WAIT_2 = 10
    TIME_WAIT = 11


class IwarpState(IntEnum):
    """``IRDMA_QP_STATE_*``: the NIC's iWARP QP state (CLOSING doubles as SQD)."""

    INVALID = 0
    IDLE = 1
    RTS = 2
    CLOSING = 3
    RTR = 4
    TERMINATE = 5
    ERROR = 6


class IbQpState(IntEnum):
    """``enum ib_qp_state`` (include/rdma/ib_verbs.h): the verbs-level state the driver
    keeps in ``iwqp->ibqp_state``; the order matters (``ibqp_state > IB_QPS_RTS``)."""

    RESET = 0
    INIT = 1
    RTR = 2
    RTS = 3
    SQD = 4
    SQE = 5
    ERR = 6


class Ae(enum.Enum):
    """Asynchronous events the QP raises; the value is the kernel's ``IRDMA_AE_*`` name."""

    RTS = "IRDMA_AE_LLP_CONNECTION_ESTABLISHED"
    """The first FPDU (the peer's RTR) arrived on a passive QP, or the active QP sent its
    RTR; ``irdma_accept`` and ``irdma_cm_event_connected`` wait for it."""
    LLP_FIN_RECEIVED = "IRDMA_AE_LLP_FIN_RECEIVED"
    LLP_CLOSE_COMPLETE = "IRDMA_AE_LLP_CLOSE_COMPLETE"
    LLP_CONNECTION_RESET = "IRDMA_AE_LLP_CONNECTION_RESET"
    RESET_SENT = "IRDMA_AE_RESET_SENT"
    BAD_CLOSE = "IRDMA_AE_BAD_CLOSE"
    ROE_BAD_LLP_CLOSE = "IRDMA_AE_RDMAP_ROE_BAD_LLP_CLOSE"
    """An RDMAP remote-operation error: the LLP stream closed badly. This model never raises it,
    but ``irdma_cm_disconn_true`` treats it as a bad close."""
    LLP_TOO_MANY_RETRIES = "IRDMA_AE_LLP_TOO_MANY_RETRIES"
    """The NIC gave up retransmitting (REXMIT_THRESH reached)."""
    LLP_RECEIVED_MPA_CRC_ERROR = "IRDMA_AE_LLP_RECEIVED_MPA_CRC_ERROR"
    """An FPDU arrived with a bad CRC32c while CRC was negotiated."""
    TERMINATE_SENT = "IRDMA_AE_TERMINATE_SENT"
    """The NIC put the Terminate the driver asked for on the wire."""
    LLP_TERMINATE_RECEIVED = "IRDMA_AE_LLP_TERMINATE_RECEIVED"
    """The peer's Terminate arrived (untagged, QN 2)."""
    # Errors the NIC finds in a received FPDU (RFC 5041 section 7, RFC 5040 section 7);
    # irdma_process_aeq sends every one of them to irdma_terminate_connection.
    AMP_UNALLOCATED_STAG = "IRDMA_AE_AMP_UNALLOCATED_STAG"
    AMP_INVALID_STAG = "IRDMA_AE_AMP_INVALID_STAG"
    AMP_BAD_QP = "IRDMA_AE_AMP_BAD_QP"
    AMP_BOUNDS_VIOLATION = "IRDMA_AE_AMP_BOUNDS_VIOLATION"
    AMP_BAD_PD = "IRDMA_AE_AMP_BAD_PD"
    AMP_BAD_STAG_KEY = "IRDMA_AE_AMP_BAD_STAG_KEY"
    AMP_BAD_STAG_INDEX = "IRDMA_AE_AMP_BAD_STAG_INDEX"
    AMP_RIGHTS_VIOLATION = "IRDMA_AE_AMP_RIGHTS_VIOLATION"
    AMP_INVALIDATE_NO_REMOTE_ACCESS_RIGHTS = \
        "IRDMA_AE_AMP_INVALIDATE_NO_REMOTE_ACCESS_RIGHTS"
    PRIV_OPERATION_DENIED = "IRDMA_AE_PRIV_OPERATION_DENIED"
    AMP_TO_WRAP = "IRDMA_AE_AMP_TO_WRAP"
    LLP_SEGMENT_TOO_SMALL = "IRDMA_AE_LLP_SEGMENT_TOO_SMALL"
    LCE_QP_CATASTROPHIC = "IRDMA_AE_LCE_QP_CATASTROPHIC"
    DDP_NO_L_BIT = "IRDMA_AE_DDP_NO_L_BIT"
    DDP_INVALID_MSN_GAP_IN_MSN = "IRDMA_AE_DDP_INVALID_MSN_GAP_IN_MSN"
    DDP_UBE_DDP_MESSAGE_TOO_LONG_FOR_AVAILABLE_BUFFER = \
        "IRDMA_AE_DDP_UBE_DDP_MESSAGE_TOO_LONG_FOR_AVAILABLE_BUFFER"
    DDP_UBE_INVALID_DDP_VERSION = "IRDMA_AE_DDP_UBE_INVALID_DDP_VERSION"
    DDP_UBE_INVALID_MO = "IRDMA_AE_DDP_UBE_INVALID_MO"
    DDP_UBE_INVALID_MSN_NO_BUFFER_AVAILABLE = \
        "IRDMA_AE_DDP_UBE_INVALID_MSN_NO_BUFFER_AVAILABLE"
    DDP_UBE_INVALID_QN = "IRDMA_AE_DDP_UBE_INVALID_QN"
    RDMAP_ROE_INVALID_RDMAP_VERSION = "IRDMA_AE_RDMAP_ROE_INVALID_RDMAP_VERSION"
    RDMAP_ROE_UNEXPECTED_OPCODE = "IRDMA_AE_RDMAP_ROE_UNEXPECTED_OPCODE"
    ROE_INVALID_RDMA_WRITE_OR_READ_RESP = "IRDMA_AE_ROE_INVALID_RDMA_WRITE_OR_READ_RESP"
    TERMINATE_TIMEOUT = "irdma_terminate_timeout"
    """Not an AEQE: the driver's terminate timer (``irdma_terminate_start_timer``, HZ)
    came due. The QP delivers it through the same queue so that the driver code runs at
    the virtual time the timer fires; it refreshes none of the driver's copies."""

    @property
    def kernel_name(self) -> str:
        """The ``IRDMA_AE_*`` constant this event stands for."""
        return str(self.value)

# Every member as a module-level ``Final`` name. In the compiled build such a name is a
# C static, while ``TcpState.X`` is an attribute lookup through ``EnumType.__getattr__`` on
# every use (Python 3.11): the per-frame code reads the members through these.
TCP_NON_EXISTENT: Final = TcpState.NON_EXISTENT
TCP_CLOSED: Final = TcpState.CLOSED
TCP_LISTEN: Final = TcpState.LISTEN
TCP_SYN_SENT: Final = TcpState.SYN_SENT
TCP_SYN_RECEIVED: Final = TcpState.SYN_RECEIVED
TCP_ESTABLISHED: Final = TcpState.ESTABLISHED
TCP_CLOSE_WAIT: Final = TcpState.CLOSE_WAIT
TCP_FIN_WAIT_1: Final = TcpState.FIN_WAIT_1
TCP_CLOSING: Final = TcpState.CLOSING
TCP_LAST_ACK: Final = TcpState.LAST_ACK
TCP_FIN_WAIT_2: Final = TcpState.FIN_WAIT_2
TCP_TIME_WAIT: Final = TcpState.TIME_WAIT

QPS_INVALID: Final = IwarpState.INVALID
QPS_IDLE: Final = IwarpState.IDLE
QPS_RTS: Final = IwarpState.RTS
QPS_CLOSING: Final = IwarpState.CLOSING
QPS_RTR: Final = IwarpState.RTR
QPS_TERMINATE: Final = IwarpState.TERMINATE
QPS_ERROR: Final = IwarpState.ERROR

IB_QPS_RESET: Final = IbQpState.RESET
IB_QPS_INIT: Final = IbQpState.INIT
IB_QPS_RTR: Final = IbQpState.RTR
IB_QPS_RTS: Final = IbQpState.RTS
IB_QPS_SQD: Final = IbQpState.SQD
IB_QPS_SQE: Final = IbQpState.SQE
IB_QPS_ERR: Final = IbQpState.ERR

AE_RTS: Final = Ae.RTS
AE_LLP_FIN_RECEIVED: Final = Ae.LLP_FIN_RECEIVED
AE_LLP_CLOSE_COMPLETE: Final = Ae.LLP_CLOSE_COMPLETE
AE_LLP_CONNECTION_RESET: Final = Ae.LLP_CONNECTION_RESET
AE_RESET_SENT: Final = Ae.RESET_SENT
AE_BAD_CLOSE: Final = Ae.BAD_CLOSE
AE_ROE_BAD_LLP_CLOSE: Final = Ae.ROE_BAD_LLP_CLOSE
AE_LLP_TOO_MANY_RETRIES: Final = Ae.LLP_TOO_MANY_RETRIES
AE_LLP_RECEIVED_MPA_CRC_ERROR: Final = Ae.LLP_RECEIVED_MPA_CRC_ERROR
AE_TERMINATE_SENT: Final = Ae.TERMINATE_SENT
AE_LLP_TERMINATE_RECEIVED: Final = Ae.LLP_TERMINATE_RECEIVED
AE_AMP_UNALLOCATED_STAG: Final = Ae.AMP_UNALLOCATED_STAG
AE_AMP_INVALID_STAG: Final = Ae.AMP_INVALID_STAG
AE_AMP_BAD_QP: Final = Ae.AMP_BAD_QP
AE_AMP_BOUNDS_VIOLATION: Final = Ae.AMP_BOUNDS_VIOLATION
AE_AMP_BAD_PD: Final = Ae.AMP_BAD_PD
AE_AMP_BAD_STAG_KEY: Final = Ae.AMP_BAD_STAG_KEY
AE_AMP_BAD_STAG_INDEX: Final = Ae.AMP_BAD_STAG_INDEX
AE_AMP_RIGHTS_VIOLATION: Final = Ae.AMP_RIGHTS_VIOLATION
AE_AMP_INVALIDATE_NO_REMOTE_ACCESS_RIGHTS: Final = Ae.AMP_INVALIDATE_NO_REMOTE_ACCESS_RIGHTS
AE_PRIV_OPERATION_DENIED: Final = Ae.PRIV_OPERATION_DENIED
AE_AMP_TO_WRAP: Final = Ae.AMP_TO_WRAP
AE_LLP_SEGMENT_TOO_SMALL: Final = Ae.LLP_SEGMENT_TOO_SMALL
AE_LCE_QP_CATASTROPHIC: Final = Ae.LCE_QP_CATASTROPHIC
AE_DDP_NO_L_BIT: Final = Ae.DDP_NO_L_BIT
AE_DDP_INVALID_MSN_GAP_IN_MSN: Final = Ae.DDP_INVALID_MSN_GAP_IN_MSN
AE_DDP_UBE_DDP_MESSAGE_TOO_LONG_FOR_AVAILABLE_BUFFER: Final = (
    Ae.DDP_UBE_DDP_MESSAGE_TOO_LONG_FOR_AVAILABLE_BUFFER)
AE_DDP_UBE_INVALID_DDP_VERSION: Final = Ae.DDP_UBE_INVALID_DDP_VERSION
AE_DDP_UBE_INVALID_MO: Final = Ae.DDP_UBE_INVALID_MO
AE_DDP_UBE_INVALID_MSN_NO_BUFFER_AVAILABLE: Final = Ae.DDP_UBE_INVALID_MSN_NO_BUFFER_AVAILABLE
AE_DDP_UBE_INVALID_QN: Final = Ae.DDP_UBE_INVALID_QN
AE_RDMAP_ROE_INVALID_RDMAP_VERSION: Final = Ae.RDMAP_ROE_INVALID_RDMAP_VERSION
AE_RDMAP_ROE_UNEXPECTED_OPCODE: Final = Ae.RDMAP_ROE_UNEXPECTED_OPCODE
AE_ROE_INVALID_RDMA_WRITE_OR_READ_RESP: Final = Ae.ROE_INVALID_RDMA_WRITE_OR_READ_RESP
AE_TERMINATE_TIMEOUT: Final = Ae.TERMINATE_TIMEOUT
