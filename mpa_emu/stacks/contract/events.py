"""What the core hands to its driver: upcalls to the application (iw_cm events); frames
to transmit are :class:`mpa_emu.wire.segment.Transmit` (re-exported here)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from mpa_emu.wire.segment import Transmit

__all__ = ["IwEvent", "Transmit", "Upcall"]

# Upcall status codes are negated Linux errno values: the standard library's errno module
# holds them.


class IwEvent(IntEnum):
    """``enum iw_cm_event_type`` (include/rdma/iw_cm.h), delivered by irdma_send_cm_event."""

    CONNECT_REQUEST = 1
    CONNECT_REPLY = 2
    ESTABLISHED = 3
    DISCONNECT = 4
    CLOSE = 5


@dataclass(slots=True, unsafe_hash=True)
class Upcall:
    """One iw_cm event as the application (rdma_cm) would see it.

    ``conn`` identifies the node (the handle used for accept/reject/close);
    ``private_data`` holds the bytes reported upward and ``private_data_len`` the length
    as the kernel reports it (after the u8 wrap and the v2 +4 quirk, when enabled).
    """

    event: IwEvent
    conn: int
    status: int
    time_ns: int
    local_ip: bytes
    local_port: int
    remote_ip: bytes
    remote_port: int
    private_data: bytes = b""
    private_data_len: int = 0
    ird: int = 0
    ord: int = 0
    listener: int | None = None
    private_data_past_frame: int = 0
    """How many of the last bytes of ``private_data`` lie past the MPA frame (the v2 +4
    quirk): the kernel reports whatever follows the frame in its receive buffer there;
    the emulator puts what ``Quirks.v2_pdata_tail`` chooses."""
    accept_error: bool = False
    """Not an event of the driver's: the error the passive side's accept verb returns
    once its wait is over (irdma_accept waits for the RTS AE inside the downcall), which
    the emulator delivers late as an ESTABLISHED with that status. iw_cm takes it as
    ``iw_cm_accept``'s error path (CONN_RECV -> IDLE, nothing goes up). An ESTABLISHED
    with an error status and without this mark is a real upcall (qedr_iw_passive_complete
    sends one for a failed handshake): ``cm_conn_est_handler`` passes it up."""

    def __init__(self, event: IwEvent, conn: int, status: int, time_ns: int, local_ip: bytes,
                 local_port: int, remote_ip: bytes, remote_port: int, private_data: bytes = b"",
                 private_data_len: int = 0, ird: int = 0, ord: int = 0,
                 listener: int | None = None, private_data_past_frame: int = 0,
                 accept_error: bool = False) -> None:
        self.event = event
        self.conn = conn
        self.status = status
        self.time_ns = time_ns
        self.local_ip = local_ip
        self.local_port = local_port
        self.remote_ip = remote_ip
        self.remote_port = remote_port
        self.private_data = private_data
        self.private_data_len = private_data_len
        self.ird = ird
        self.ord = ord
        self.listener = listener
        self.private_data_past_frame = private_data_past_frame
        self.accept_error = accept_error

# Every member as a module-level ``Final`` name. In the compiled build such a name is a
# C static, while ``IwEvent.X`` is an attribute lookup through ``EnumType.__getattr__`` on
# every use (Python 3.11): the per-frame code reads the members through these.
IW_CONNECT_REQUEST: Final = IwEvent.CONNECT_REQUEST
IW_CONNECT_REPLY: Final = IwEvent.CONNECT_REPLY
IW_ESTABLISHED: Final = IwEvent.ESTABLISHED
IW_DISCONNECT: Final = IwEvent.DISCONNECT
IW_CLOSE: Final = IwEvent.CLOSE
