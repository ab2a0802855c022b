"""erdma's connection endpoint (``struct erdma_cep``, erdma_cm.h), the frame being read
(``struct erdma_mpa_info``) and the read-only views the network and scenarios see."""

from __future__ import annotations

import errno
import struct
from dataclasses import dataclass, field

from mpa_emu.stacks.erdma.params import MPA_MAX_PRIVDATA
from mpa_emu.stacks.erdma.states import ErdmaQpState, ErdmaState
from mpa_emu.wire.erdma_mpa import EXT_SIZE, REVISION_EXT_1
from mpa_emu.wire.mpa import FRAME_SIZE
from mpa_emu.wire.untagged import SendReceiver

# The flags byte (byte 16): erdma_cm.h keeps it with the revision as one __be16 ``bits``
# (MPA_RR_FLAG_MARKERS 0x8000, MPA_RR_FLAG_CRC 0x4000, MPA_RR_FLAG_REJECT 0x2000,
# MPA_RR_RESERVED 0x1f00, MPA_RR_MASK_REVISION 0x00ff): no S flag, no RFC 6581 block.
FLAG_MARKERS = 0x80
FLAG_CRC = 0x40
FLAG_REJECT = 0x20


@dataclass(slots=True)
class MpaInfo:
    """``struct erdma_mpa_info``: the peer's header (``hdr``, turned into the reply in
    place by erdma_proc_mpareq), its extension (``ext``: cookie and bits, replaced by our
    own in erdma_accept), the private data buffer and ``bytes_rcvd``."""

    hdr: bytearray = field(default_factory=bytearray)
    ext: bytearray = field(default_factory=bytearray)
    pdata: bytearray | None = None
    """``mpa.pdata``: allocated (``kmalloc(pd_len + 4)``) when the private data starts
    to arrive; None before, and after erdma_accept frees it."""
    swallowed: int = 0
    """Bytes past a complete frame that a read took and dropped (1 to 3 of them: the
    kernel's 4-byte probe came back short, ``-EAGAIN``)."""

    @property
    def pd_len(self) -> int:
        """``hdr.params.pd_len`` (0 before the header is complete)."""
        if len(self.hdr) < FRAME_SIZE:
            return 0
        return int(struct.unpack_from("!H", self.hdr, 18)[0])

    @pd_len.setter
    def pd_len(self, value: int) -> None:
        if len(self.hdr) >= FRAME_SIZE:
            struct.pack_into("!H", self.hdr, 18, value & 0xFFFF)

    @property
    def rev(self) -> int:
        """__mpa_rr_revision of ``hdr.params.bits``."""
        return self.hdr[17] if len(self.hdr) >= FRAME_SIZE else 0

    @property
    def cookie(self) -> int:
        """``ext_data.cookie`` (be32_to_cpu)."""
        return int(struct.unpack_from("!I", self.ext)[0]) if len(self.ext) == EXT_SIZE else 0

    @property
    def ext_bits(self) -> int:
        """``ext_data.bits`` (be32_to_cpu)."""
        return int(struct.unpack_from("!I", self.ext, 4)[0]) if len(self.ext) == EXT_SIZE \
            else 0

    def recv(self, rx: bytearray) -> int:
        """erdma_recv_mpa_rr on the socket's unread bytes ``rx`` (consumed as its
        ksock_recv calls consume them): 0 when the frame is complete, ``-EAGAIN`` when
        more is due, ``-EPROTO`` for a PD_Length over MPA_MAX_PRIVDATA, a revision other
        than MPA_REVISION_EXT_1 (checked once the 20-byte header is in, before the
        extension is read) or four or more bytes past the frame."""
        if len(self.hdr) < FRAME_SIZE:  # __recv_mpa_hdr(.., sizeof(struct mpa_rr))
            if not rx:
                return -errno.EAGAIN
            take = min(FRAME_SIZE - len(self.hdr), len(rx))
            self.hdr += rx[:take]
            del rx[:take]
            if len(self.hdr) < FRAME_SIZE:
                return -errno.EAGAIN
        if self.pd_len > MPA_MAX_PRIVDATA or self.rev != REVISION_EXT_1:
            return -errno.EPROTO
        if len(self.ext) < EXT_SIZE:  # __recv_mpa_hdr(.., sizeof(struct erdma_mpa_ext))
            if not rx:
                return -errno.EAGAIN
            take = min(EXT_SIZE - len(self.ext), len(rx))
            self.ext += rx[:take]
            del rx[:take]
            if len(self.ext) < EXT_SIZE:
                return -errno.EAGAIN
        got = len(self.pdata) if self.pdata is not None else 0
        to_rcv = self.pd_len - got
        if to_rcv == 0:
            # "Check against peer protocol violation": a 4-byte __recv_mpa_hdr
            if not rx:
                return 0  # -EAGAIN with nothing read
            take = min(4, len(rx))
            del rx[:take]
            if take < 4:
                self.swallowed += take
                return -errno.EAGAIN  # short read: -EAGAIN, the bytes gone
            return -errno.EPROTO
        if self.pdata is None:
            self.pdata = bytearray()
        if not rx:
            return -errno.EAGAIN
        take = min(to_rcv + 4, len(rx))
        chunk = bytes(rx[:take])
        del rx[:take]
        if take > to_rcv:
            self.pdata += chunk[:to_rcv]
            return -errno.EPROTO
        self.pdata += chunk
        return 0 if take == to_rcv else -errno.EAGAIN


@dataclass(slots=True)
class Cep:
    """One ``struct erdma_cep``: a listening, active or passive endpoint, with the QP
    state of the QP bound to it (``cep->qp``)."""

    ident: int
    state: ErdmaState
    sock: int | None = None
    listen_cep: int | None = None
    listener: bool = False
    active: bool = False
    held: bool = False
    """iw_cm holds the endpoint: CONNECT_REQUEST went up and neither erdma_accept nor
    erdma_reject has run ("Keep reference until IWCM accepts/rejects")."""
    tcp_listener: int | None = None
    backlog: int = 0
    cm_id: bool = False
    qp: bool = False
    qp_state: ErdmaQpState = ErdmaQpState.IDLE
    cc: int = 0
    """``qp->attrs.cc``: the QP's congestion control (COMPROMISE_CC after a mismatch)."""
    cookie: int = 0
    """``qp->attrs.iwarp.cookie``: the value the device gave the QP (create_qp_cmd)."""
    mpa: MpaInfo = field(default_factory=MpaInfo)
    private_data: bytes = b""
    """``cep->private_data``: the request's private data, held from erdma_connect."""
    rx: bytearray = field(default_factory=bytearray)
    ird: int = 0
    ord: int = 0
    mpa_timer: int | None = None
    """The deadline of ``cep->mpa_timer`` (MPATIMEOUT or CONNECTTIMEOUT work)."""
    timer_work: int = 0
    """Which work the timer runs (an :class:`~mpa_emu.stacks.erdma.states.ErdmaWork`)."""
    established: bool = False
    loc_addr: bytes = b""
    loc_port: int = 0
    rem_addr: bytes = b""
    rem_port: int = 0
    device_rx: bytearray = field(default_factory=bytearray)
    """RDMA mode: stream bytes the device has not framed into whole FPDUs yet."""
    tx_msn: int = 0
    """RDMA mode: the MSN of the last Send the device sent on queue 0."""
    rq: SendReceiver = field(default_factory=SendReceiver)
    """The receive buffers erdma_post_recv posted and the Send being placed."""
    completions: list[tuple[str, bytes]] = field(default_factory=list)
    """Receive completions (status, bytes placed), oldest first."""


@dataclass(frozen=True, slots=True)
class CepView:
    """Read-only view of an erdma endpoint (``Host.node``): the kernel state, the
    4-tuple under the names scenario files use, IRD/ORD, the QP's congestion control,
    the peer's cookie and the MPA timer."""

    state: ErdmaState
    loc_addr: bytes
    loc_port: int
    rem_addr: bytes
    rem_port: int
    ird: int
    ord: int
    cc: int
    peer_cookie: int
    mpa_timer_ns: int | None


@dataclass(frozen=True, slots=True)
class QpView:
    """Read-only view of an erdma QP (``Host.qp_state``): ``iwarp_state`` the
    ``ERDMA_QPS_IWARP_*`` name, ``tcp_state`` the kernel socket's state name; erdma has
    no CRC (erdma_proc_mpareq refuses it)."""

    iwarp_state: str
    tcp_state: str
    crc: bool


@dataclass(frozen=True, slots=True)
class ListenerView:
    """Read-only view of a listening endpoint (``Host.listener``)."""

    state: ErdmaState
    ip: bytes | None
    port: int
    backlog: int
