"""siw's states and work types with the kernel's names and values."""

from __future__ import annotations

from enum import IntEnum


class SiwState(IntEnum):
    """``enum siw_cep_state`` (siw_cm.h): the connection endpoint's state."""

    IDLE = 1
    LISTENING = 2
    CONNECTING = 3
    AWAIT_MPAREQ = 4
    RECVD_MPAREQ = 5
    AWAIT_MPAREP = 6
    RDMA_MODE = 7
    CLOSED = 8


class SiwWork(IntEnum):
    """``enum siw_work_type`` (siw_cm.h): what siw_cm_work_handler runs."""

    ACCEPT = 1
    READ_MPAHDR = 2
    CLOSE_LLP = 3
    PEER_CLOSE = 4
    MPATIMEOUT = 5


class SiwQpState(IntEnum):
    """``enum siw_qp_state`` (siw.h)."""

    IDLE = 0
    RTR = 1
    RTS = 2
    CLOSING = 3
    TERMINATE = 4
    ERROR = 5


STATES = tuple(s.name for s in SiwState)
"""The state names a scenario's ``[[expect.state]]`` takes for a siw host."""
