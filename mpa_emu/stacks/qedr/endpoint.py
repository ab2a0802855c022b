"""What one connection and one listener remember: ``struct qed_iwarp_ep`` with the
``struct qedr_iw_ep`` above it, and ``struct qed_iwarp_listener``.

Field names follow the kernel's (``cm_info.ird``, ``rtr_type``, ``mpa_rev``,
``mpa_reply_processed``, ``connect_mode``); ``cm_info`` is flattened into ``ird``,
``ord``, ``private_data``. ``has_cm_id`` stands for qedr's ``ep->cm_id`` (upcalls reach
the ULP only while it is set); ``qp`` for the QP bound by qedr_iw_connect /
qedr_iw_accept (None: no QP, as after qedr_iw_reject). The firmware's own state for the
connection (its MPA timer, what it waits for) is in the ``fw_*`` fields.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from mpa_emu.stacks.qedr.states import ConnectMode, EpState, MpaMode, QpState, RtrType
from mpa_emu.wire.untagged import SendReceiver


@dataclass(slots=True, eq=False)
class Listener:
    """``struct qed_iwarp_listener`` (and qedr's ``struct qedr_iw_listener``)."""

    ident: int
    ip: bytes | None
    port: int
    backlog: int
    tcp_listener: int
    vlan: int | None = None


@dataclass(slots=True, eq=False)
class Ep:
    """``struct qed_iwarp_ep`` and the ``struct qedr_iw_ep`` that goes with it."""

    conn: int
    connect_mode: ConnectMode
    local_ip: bytes
    local_port: int
    remote_ip: bytes
    remote_port: int
    state: EpState = EpState.INIT
    sock: int | None = None
    listener: int | None = None
    """The listener (qedr's ``qedr_iw_listener``) of a passive endpoint."""
    mpa_rev: MpaMode = MpaMode.ENHANCED
    rtr_type: RtrType = RtrType.NONE
    ird: int = 0
    ord: int = 0
    out_pdata: bytes = b""
    """``ep_buffer_virt->out_pdata`` (``cm_info.private_data_len`` bytes)."""
    in_pdata: bytearray = field(default_factory=lambda: bytearray(512))
    """``ep_buffer_virt->in_pdata``: the firmware writes the incoming PD there."""
    ulp_data_len: int = 0
    """The async output's ``ulp_data_len`` (PD_Length of the frame received)."""
    private_data: bytes = b""
    private_data_len: int = 0
    pd_hdr: int = 0
    """``mpa_hdr_size``: where ``cm_info.private_data`` starts in ``in_pdata``."""
    """``cm_info.private_data_len`` (a u16) once qed parsed the incoming frame."""
    mpa_reply_processed: bool = False
    qp: QpState | None = None
    has_cm_id: bool = False
    held: bool = False
    """Passive: the CONNECT_REQUEST went up and the ULP has not answered it yet."""
    connect_wait: bool = False
    """``IWCM_F_CONNECT_WAIT`` of the iw_cm id above the ep: set by ``iw_cm_connect``
    (active) and ``iw_cm_accept`` (passive), cleared when iw_cm takes the CONNECT_REPLY
    (``cm_conn_rep_handler``) or the ESTABLISHED (``cm_conn_est_handler``), or by the
    error paths of ``iw_cm_accept`` and ``iw_cm_reject``. A passive ep with it set is one
    whose iw_cm id is still in CONN_RECV after the accept."""
    waiting: list[tuple[str, bool]] = field(default_factory=list)
    """The application's ``iw_cm_disconnect`` (``("disconnect", graceful)``) and
    ``iw_destroy_cm_id`` (``("destroy", False)``) calls blocked in ``wait_event`` on
    :attr:`connect_wait`, in call order: they go on once it clears."""
    crc: bool = False
    """The negotiated C: the firmware checks and sends CRCs in RDMA mode."""
    fw_due: int | None = None
    """The firmware's MPA timer."""
    fw_wait: str = ""
    """What the firmware waits for: "request", "reply", "rtr", "" (nothing)."""
    fw_rtr: str = ""
    """The RTR type the initiator's firmware will send (send, write, read) or ""."""
    rx: bytearray = field(default_factory=bytearray)
    """Stream bytes the firmware has not consumed yet."""
    closing: bool = False
    """The firmware is closing the TCP connection (a FIN sent)."""
    disconnect_seen: bool = False
    """QEDR_IWARP_CM_WAIT_FOR_DISCONNECT of qp->iwarp_cm_flags."""
    fin_from_peer: bool = False
    work_refs: int = 0
    """References the queued disconnect work holds (qedr_iw_disconnect_event's kref_get)."""
    closed_event: bool = False
    """qedr_iw_close_event ran (its kref_put)."""
    received: deque[str] = field(default_factory=deque)
    """RDMA mode: what the firmware took from the peer (for the trace and tests)."""
    tx_msn: int = 0
    """RDMA mode: the MSN of the last Send the firmware sent on queue 0 (a zero-length
    Send RTR is MSN 1)."""
    rq: SendReceiver = field(default_factory=SendReceiver)
    """RDMA mode: the receive buffers qedr_post_recv posted and the Send being placed."""
    completions: list[tuple[str, bytes]] = field(default_factory=list)
    """Receive completions (status, bytes placed), oldest first."""
