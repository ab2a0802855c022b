"""erdma's states and work types with the kernel's names and values (erdma_cm.h,
erdma_verbs.h)."""

from __future__ import annotations

from enum import IntEnum


class ErdmaState(IntEnum):
    """``enum erdma_cep_state`` (erdma_cm.h): the connection endpoint's state."""

    IDLE = 1
    LISTENING = 2
    CONNECTING = 3
    AWAIT_MPAREQ = 4
    RECVD_MPAREQ = 5
    AWAIT_MPAREP = 6
    RDMA_MODE = 7
    CLOSED = 8


class ErdmaWork(IntEnum):
    """``enum erdma_work_type`` (erdma_cm.h): what erdma_cm_work_handler runs. Two more
    than siw's: the non-blocking connect's CONNECTED and CONNECTTIMEOUT."""

    ACCEPT = 1
    READ_MPAHDR = 2
    CLOSE_LLP = 3
    PEER_CLOSE = 4
    MPATIMEOUT = 5
    CONNECTED = 6
    CONNECTTIMEOUT = 7


class ErdmaQpState(IntEnum):
    """``enum erdma_qps_iwarp`` (erdma_verbs.h, ERDMA_QPS_IWARP_*): the iWARP QP's state
    as erdma_modify_qp_state_iwarp moves it."""

    IDLE = 0
    RTR = 1
    RTS = 2
    CLOSING = 3
    TERMINATE = 4
    ERROR = 5


STATES = tuple(s.name for s in ErdmaState)
"""The state names a scenario's ``[[expect.state]]`` takes for an erdma host."""
