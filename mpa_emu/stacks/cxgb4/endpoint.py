"""``struct c4iw_ep`` and ``struct c4iw_listen_ep``: what one endpoint remembers.

Field names follow the kernel's (``mpa_pkt``, ``mpa_pkt_len``, ``plen``, ``ird``,
``ord``, ``tried_with_mpa_v1``, ``retry_with_mpa_v1``); ``mpa_attr`` is flattened into
``attr_*`` fields. Refcounts and the history bits are not copied; ``has_cm_id`` is what
``ref_cm_id``/``deref_cm_id`` guarantee: upcalls reach the ULP only while it is set.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mpa_emu.stacks.contract.api import SendCompletion
from mpa_emu.stacks.cxgb4.states import MPA_PKT_SIZE, EpState, P2pType, QpState


@dataclass(slots=True, eq=False)
class ListenEp:
    """``struct c4iw_listen_ep``: a listener and the TCP listener under it."""

    ident: int
    ip: bytes | None
    port: int
    backlog: int
    tcp_listener: int
    state: EpState = EpState.LISTEN


@dataclass(slots=True, eq=False)
class Endpoint:
    """``struct c4iw_ep`` of one connection (active or passive)."""

    conn: int
    initiator: bool
    local_ip: bytes
    local_port: int
    remote_ip: bytes
    remote_port: int
    state: EpState = EpState.CONNECTING
    sock: int | None = None
    parent: int | None = None
    """The listener id (``parent_ep``) of a passive endpoint."""
    mpa_pkt: bytearray = field(default_factory=lambda: bytearray(MPA_PKT_SIZE))
    mpa_pkt_len: int = 0
    plen: int = 0
    """``ep->plen``: the ULP's private data length on connect, then ``(u8)PD_Length`` of
    the frame received."""
    ird: int = 0
    ord: int = 0
    attr_initiator: bool = False
    attr_crc: bool = False
    attr_recv_marker: bool = False
    attr_xmit_marker: bool = False
    attr_version: int = 0
    attr_enhanced: bool = False
    attr_p2p_type: int = P2pType.DISABLED
    tried_with_mpa_v1: bool = False
    retry_with_mpa_v1: bool = False
    timer_due: int | None = None
    close_sent: bool = False
    has_cm_id: bool = False
    held: bool = False
    """Passive: the CONNECT_REQUEST went up and the ULP has not answered it yet."""
    destroy_waiting: bool = False
    """Active: the ULP destroyed the cm_id before CONNECT_REPLY; iw_cm's destroy_cm_id
    waits for it (IWCM_F_CONNECT_WAIT) and then goes on."""
    qp: QpState | None = None
    """The bound QP's state (``c4iw_modify_qp``); None while no QP is bound."""
    rx_fpdu: bytearray = field(default_factory=bytearray)
    """RDMA mode: stream bytes not yet a whole FPDU."""
    recvq: list[int] = field(default_factory=list)
    """Receive buffers the application posted (lengths)."""
    completions: list[SendCompletion] = field(default_factory=list)
    """Receive completions: status and the bytes placed."""
    rx_partial: bytearray | None = None
    """A Send whose last segment has not arrived: the bytes placed so far."""
    rx_room: int = 0
    """The size of the buffer that Send fills."""
    rx_msn: int = 1
    """The MSN the next inbound Send must carry (RFC 5041 section 5.1: from 1)."""
    tx_msn: int = 0
    upcall_ird: int = 0
    upcall_ord: int = 0
