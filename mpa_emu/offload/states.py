"""Hardware TCP and iWARP QP states as the NIC reports them in AEQEs (irdma defs.h).

The driver copies both into ``iwqp->hw_tcp_state`` / ``iwqp->hw_iwarp_state`` from every
asynchronous event (``irdma_process_aeq``), and ``irdma_cm_disconn_true`` decides on
them, so the numeric values are kept.
"""

from __future__ import annotations

import enum
from enum import IntEnum


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
