"""siw's connection endpoint (``struct siw_cep``, siw_cm.h) and the read-only views the
network and scenarios see."""

from __future__ import annotations

from dataclasses import dataclass, field

from mpa_emu.stacks.contract.base import CoreBase, Ports
from mpa_emu.stacks.mpa_stream import FrameReader
from mpa_emu.stacks.siw.params import MPA_MAX_PRIVDATA
from mpa_emu.stacks.siw.qp_rx import Completion, RxStream
from mpa_emu.stacks.siw.states import SiwQpState, SiwState

# Byte 16 of the MPA header: siw keeps it with the revision as one __be16 ``bits``
# (iwarp.h: MPA_RR_FLAG_*); MPA_RR_FLAG_GSO_EXP is siw's own, a reserved bit of RFC 5044.
FLAG_MARKERS = 0x80
FLAG_CRC = 0x40
FLAG_REJECT = 0x20
FLAG_ENHANCED = 0x10
FLAG_GSO_EXP = 0x08

# struct mpa_v2_data words (iwarp.h: enum mpa_v2_ctrl), host order.
V2_PEER_TO_PEER = 0x8000  # IRD word
V2_ZERO_LENGTH_RTR = 0x4000  # IRD word
V2_WRITE_RTR = 0x8000  # ORD word
V2_READ_RTR = 0x4000  # ORD word
IRD_ORD_MASK = 0x3FFF  # MPA_IRD_ORD_MASK


@dataclass(slots=True)
class Cep:
    """One ``struct siw_cep``: a listening, active or passive endpoint.

    ``key``/``flags``/``rev``/``pd_len`` are ``cep->mpa.hdr`` (the peer's header, turned
    into the reply in place by siw_proc_mpareq), ``v2_ird``/``v2_ord`` ``cep->mpa.v2_ctrl``
    and ``req_ird``/``req_ord`` ``cep->mpa.v2_ctrl_req``; ``rx`` is what the socket holds
    unread; ``reader`` the frame being read (``cep->mpa.bytes_rcvd``), ``pdata`` the
    private data of the last frame read (``cep->mpa.pdata``, the RFC 6581 block included).
    """

    ident: int
    state: SiwState
    sock: int | None = None
    listen_cep: int | None = None
    listener: bool = False
    active: bool = False
    held: bool = False
    """iw_cm holds the endpoint: CONNECT_REQUEST was delivered and neither siw_accept nor
    siw_reject has run ("Keep reference until IWCM accepts/rejects")."""
    tcp_listener: int | None = None
    backlog: int = 0
    cm_id: bool = False
    qp: bool = False
    qp_state: SiwQpState = SiwQpState.IDLE
    crc: bool = False
    enhanced: bool = False
    key: bytes = b""
    flags: int = 0
    rev: int = 0
    pd_len: int = 0
    reader: FrameReader = field(default_factory=lambda: FrameReader(MPA_MAX_PRIVDATA))
    pdata: bytes = b""
    rx: bytearray = field(default_factory=bytearray)
    v2_ird: int = 0
    v2_ord: int = 0
    req_ird: int = 0
    req_ord: int = 0
    ird: int = 0
    ord: int = 0
    mpa_timer: int | None = None
    wait_rtr: bool = False
    established: bool = False
    """ESTABLISHED went up (a passive endpoint: iw_cm's id left CONN_RECV)."""
    deferred_disconnect: bool | None = None
    """A disconnect (graceful or not) the application asked for while iw_cm waits for
    ESTABLISHED (IWCM_F_CONNECT_WAIT): run when ESTABLISHED goes up, dropped if the
    connection closes first."""
    orq_msn: int = 0
    loc_addr: bytes = b""
    loc_port: int = 0
    rem_addr: bytes = b""
    rem_port: int = 0
    rxs: RxStream | None = None
    """The QP's receive stream once it is in RTS (siw_qp_rx.c)."""
    recvq: list[int] = field(default_factory=list)
    """Receive buffers the application posted (lengths), shared with ``rxs``."""
    completions: list[Completion] = field(default_factory=list)
    """Receive completions, in order (the receive CQ)."""

    def ports(self) -> Ports | None:
        """The ports the node watch is told of (local port, remote address, remote
        port), None while the 4-tuple is not known (a listener, a connect in flight)."""
        return (self.loc_port, self.rem_addr, self.rem_port) if self.rem_port else None


def dbg_cep(base: CoreBase, cep: Cep, fn: str, text: str) -> None:
    """``siw_dbg_cep(cep, fmt, ...)``: an ``ibdev_dbg`` line (dynamic debug) of ``fn``,
    prefixed ``CEP[0x%pK] %s: `` with the endpoint's address and the function's name."""
    base.kernel_log("debug", fn,
                    f"CEP[0x{0xffff888100000000 + cep.ident * 0x200:016x}] {fn}: {text}",
                    dynamic_debug=True)


@dataclass(frozen=True, slots=True)
class CepView:
    """Read-only view of a siw endpoint (``Host.node``): the kernel state and the
    4-tuple under the names scenario files use (``loc_addr``, ``rem_port``...)."""

    state: SiwState
    loc_addr: bytes
    loc_port: int
    rem_addr: bytes
    rem_port: int
    ird: int
    ord: int
    enhanced_rdma_conn_est: bool
    mpa_timer_ns: int | None


@dataclass(frozen=True, slots=True)
class QpView:
    """Read-only view of a siw QP (``Host.qp_state``): ``iwarp_state`` the
    ``SIW_QP_STATE_*`` name, ``tcp_state`` the Linux socket's state name."""

    iwarp_state: str
    tcp_state: str
    crc: bool


@dataclass(frozen=True, slots=True)
class ListenerView:
    """Read-only view of a listening endpoint (``Host.listener``)."""

    state: SiwState
    ip: bytes | None
    port: int
    backlog: int
