"""What the core hands to its driver: upcalls to the application (iw_cm events); frames
to transmit are :class:`mpa_emu.wire.segment.Transmit` (re-exported here)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from mpa_emu.wire.fastinit import fast_frozen_init
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


@dataclass(frozen=True, slots=True)
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

    def __init__(self, event: IwEvent, conn: int, status: int, time_ns: int, local_ip: bytes,
                 local_port: int, remote_ip: bytes, remote_port: int, private_data: bytes = b"",
                 private_data_len: int = 0, ird: int = 0, ord: int = 0,
                 listener: int | None = None, private_data_past_frame: int = 0) -> None:
        # Compiled build: each field is stored directly (the dataclass __init__ would go
        # through object.__setattr__). The pure build never runs this body: Python refuses
        # these stores on a frozen class, and fast_frozen_init gives the class its own.
        self.event = event  # type: ignore[misc]
        self.conn = conn  # type: ignore[misc]
        self.status = status  # type: ignore[misc]
        self.time_ns = time_ns  # type: ignore[misc]
        self.local_ip = local_ip  # type: ignore[misc]
        self.local_port = local_port  # type: ignore[misc]
        self.remote_ip = remote_ip  # type: ignore[misc]
        self.remote_port = remote_port  # type: ignore[misc]
        self.private_data = private_data  # type: ignore[misc]
        self.private_data_len = private_data_len  # type: ignore[misc]
        self.ird = ird  # type: ignore[misc]
        self.ord = ord  # type: ignore[misc]
        self.listener = listener  # type: ignore[misc]
        self.private_data_past_frame = private_data_past_frame  # type: ignore[misc]


fast_frozen_init(Upcall)
