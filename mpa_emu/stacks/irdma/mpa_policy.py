"""MPA request/reply as irdma builds and checks them (RFC 5044 section 7.1, RFC 6581
section 5): ``irdma_cm_build_mpa_frame``,
``irdma_parse_mpa`` and ``irdma_negotiate_mpa_v2_ird_ord`` as pure functions over small
values. The bytes come from :mod:`mpa_emu.wire.mpa`; the policy lives here.
"""

from __future__ import annotations

import errno
import struct
from dataclasses import dataclass
from enum import Enum
from typing import Final

from mpa_emu.wire import mpa

MAX_CM_BUF: Final = 544  # IRDMA_MAX_CM_BUF = IRDMA_MAX_IETF_SIZE (32) + IETF_MAX_PRIV_DATA_LEN
MPA_V2_HDR: Final = mpa.FRAME_SIZE + mpa.RTR_MSG_SIZE  # sizeof(struct ietf_mpa_v2)


class Rdma0Op(Enum):
    """``enum send_rdma0``: the zero-length operation the active side sends as RTR."""

    READ_ZERO = "read"
    WRITE_ZERO = "write"


@dataclass(slots=True, unsafe_hash=True)
class MpaParams:
    """The node fields ``irdma_build_mpa_v1/v2`` read."""

    rev: int
    ird_size: int
    ord_size: int
    mpav2_ird_ord: int
    send_rdma0_op: Rdma0Op
    markers: bool = False
    p2p: bool = True

    def __init__(self, rev: int, ird_size: int, ord_size: int, mpav2_ird_ord: int,
                 send_rdma0_op: Rdma0Op, markers: bool = False, p2p: bool = True) -> None:
        self.rev = rev
        self.ird_size = ird_size
        self.ord_size = ord_size
        self.mpav2_ird_ord = mpav2_ird_ord
        self.send_rdma0_op = send_rdma0_op
        self.markers = markers
        self.p2p = p2p


def build_mpa_frame(p: MpaParams, *, request: bool, private_data: bytes,
                    reject: bool = False) -> bytes:
    """``irdma_cm_build_mpa_frame`` + private data: the frame bytes as sent.

    C (0x40) always; v2 adds 0x10 and the RFC 6581 block (P2P always, unless the profile
    turns it off; a request offers WRITE and READ, a reply names ``send_rdma0_op``);
    ``reject`` adds R (``irdma_send_mpa_reject``). An unknown rev builds nothing (the
    kernel's header size 0).
    """
    flags = mpa.FLAG_CRC | (mpa.FLAG_REJECT if reject else 0)
    if p.rev == 1:
        return mpa.MpaFrame(request=request, rev=1, flags=flags,
                            private_data=private_data).to_bytes()
    if p.rev != 2:
        return b""
    flags |= mpa.FLAG_ENHANCED | (mpa.FLAG_MARKERS if p.markers else 0)
    if p.mpav2_ird_ord == mpa.IRD_ORD_MASK:
        ird = ord_ = mpa.IRD_ORD_MASK
    else:
        ird = min(p.ird_size, mpa.IRD_ORD_MASK)
        ord_ = min(p.ord_size, mpa.IRD_ORD_MASK)
    if request:
        write0 = read0 = True
    else:
        write0 = p.send_rdma0_op is Rdma0Op.WRITE_ZERO
        read0 = p.send_rdma0_op is Rdma0Op.READ_ZERO
    block = mpa.RtrBlock(ird=ird, ord=ord_, peer_to_peer=p.p2p, write0=write0, read0=read0)
    return mpa.MpaFrame(request=request, rev=2, flags=flags, rtr=block,
                        private_data=private_data).to_bytes()


@dataclass(slots=True, unsafe_hash=True)
class Negotiated:
    """Node fields after ``irdma_negotiate_mpa_v2_ird_ord``."""

    ird_size: int
    ord_size: int
    mpav2_ird_ord: int
    send_rdma0_op: Rdma0Op

    def __init__(self, ird_size: int, ord_size: int, mpav2_ird_ord: int,
                 send_rdma0_op: Rdma0Op) -> None:
        self.ird_size = ird_size
        self.ord_size = ord_size
        self.mpav2_ird_ord = mpav2_ird_ord
        self.send_rdma0_op = send_rdma0_op


@dataclass(slots=True, unsafe_hash=True)
class NegotiationError:
    """A non-zero return of the negotiation: errno and reason, and ``partial``, the node
    fields as the kernel left them (it changes the node in place before some of its
    failures), None when nothing had changed yet."""

    errno: int
    reason: str
    partial: Negotiated | None = None


def negotiate_mpa_v2_ird_ord(ctrl_ird: int, ctrl_ord: int, *, initiator: bool,
                             ird_size: int, ord_size: int, mpav2_ird_ord: int,
                             send_rdma0_op: Rdma0Op, require_p2p: bool = True,
                             prefer: Rdma0Op = Rdma0Op.READ_ZERO,
                             ) -> Negotiated | NegotiationError:
    """``irdma_negotiate_mpa_v2_ird_ord`` (RFC 6581 section 5), step for step.

    ``initiator`` is ``state == MPAREQ_SENT``. ``prefer`` is the RTR the node picks when
    the peer offers both (irdma: READ; a siw-like profile: WRITE).
    """
    peer_ird = ctrl_ird & mpa.IRD_ORD_MASK
    peer_ord = ctrl_ord & mpa.IRD_ORD_MASK
    if require_p2p and not ctrl_ird & mpa.RTR_PEER_TO_PEER:
        return NegotiationError(errno.EOPNOTSUPP, "peer does not offer P2P")
    if peer_ird == mpa.IRD_ORD_MASK or peer_ord == mpa.IRD_ORD_MASK:
        mpav2_ird_ord = mpa.IRD_ORD_MASK
    elif not initiator:
        if peer_ord == 0 and ctrl_ord & mpa.RTR_READ0:
            ird_size = 1
        ord_size = min(ord_size, peer_ird)
    else:
        if peer_ird == 0 and ctrl_ord & mpa.RTR_READ0:
            return NegotiationError(errno.EOPNOTSUPP,
                                    "peer IRD 0 with RDMA0_READ requested")
        ord_size = min(ord_size, peer_ird)
        if ird_size < peer_ord:
            # the ORD was already lowered: irdma_get_cmevent_info reports it in the
            # CONNECT_REPLY(-ECONNRESET) that follows
            return NegotiationError(errno.EINVAL,
                                    f"own IRD {ird_size} < peer ORD {peer_ord}",
                                    Negotiated(ird_size, ord_size, mpav2_ird_ord,
                                               send_rdma0_op))
    read0 = bool(ctrl_ord & mpa.RTR_READ0)
    write0 = bool(ctrl_ord & mpa.RTR_WRITE0)
    if read0 and write0:
        send_rdma0_op = prefer
    elif read0:
        send_rdma0_op = Rdma0Op.READ_ZERO
    elif write0:
        send_rdma0_op = Rdma0Op.WRITE_ZERO
    else:
        # negotiate_done: the IRD/ORD limits (or IETF_NO_IRD_ORD) are already applied
        return NegotiationError(errno.EOPNOTSUPP, "no RDMA0 operation offered",
                                Negotiated(ird_size, ord_size, mpav2_ird_ord,
                                           send_rdma0_op))
    return Negotiated(ird_size, ord_size, mpav2_ird_ord, send_rdma0_op)


@dataclass(slots=True, unsafe_hash=True)
class ParsedMpa:
    """A frame ``irdma_parse_mpa`` accepted."""

    rev: int
    reject: bool
    markers: bool
    pd_length: int
    private_data: bytes
    """``PD_Length`` bytes copied from after the header (v2: after 24 bytes, so the last 4
    come from past the frame: zeros, or the segment's next bytes with ``tail="segment"``;
    ``irdma_parse_mpa`` copies ``priv_data_len`` bytes from ``buf + mpa_hdr_len``)."""
    user_data: bytes
    """The private data without the RFC 6581 block (what siw reports)."""
    negotiated: Negotiated | None

    def __init__(self, rev: int, reject: bool, markers: bool, pd_length: int,
                 private_data: bytes, user_data: bytes, negotiated: Negotiated | None) -> None:
        self.rev = rev
        self.reject = reject
        self.markers = markers
        self.pd_length = pd_length
        self.private_data = private_data
        self.user_data = user_data
        self.negotiated = negotiated


@dataclass(slots=True, unsafe_hash=True)
class MpaParseError:
    """A check of ``irdma_parse_mpa`` failed: errno, step (the check's place in the
    kernel's order, counted from 1) and reason;
    ``negotiated`` carries the node fields a failed step-8 negotiation had already
    changed (:attr:`NegotiationError.partial`)."""

    errno: int
    step: int
    reason: str
    negotiated: Negotiated | None = None


def parse_mpa(payload: bytes, *, node_rev: int, initiator: bool, ird_size: int,
              ord_size: int, mpav2_ird_ord: int, send_rdma0_op: Rdma0Op,
              require_p2p: bool = True, prefer: Rdma0Op = Rdma0Op.READ_ZERO,
              tail: str = "zeros") -> ParsedMpa | MpaParseError:
    """``irdma_parse_mpa`` with every check in the kernel's order.

    ``initiator`` is ``state == MPAREQ_SENT`` (expects the Rep key). The caller stores
    ``rev`` into ``mpa_frame_rev`` once step 4 passed, also when a later step fails.
    ``tail`` fills the v2 copy's bytes past the frame (``Quirks.v2_pdata_tail``).
    """
    length = len(payload)
    if length < mpa.FRAME_SIZE:
        return MpaParseError(errno.EINVAL, 1, f"frame of {length} bytes < 20")
    flags, rev, pd_length = struct.unpack_from("!BBH", payload, mpa.KEY_SIZE)
    if pd_length > mpa.MAX_PRIV_DATA_LEN:
        return MpaParseError(errno.EOVERFLOW, 2, f"PD_Length {pd_length} > 512")
    if rev not in (1, 2):
        return MpaParseError(errno.EINVAL, 3, f"unsupported MPA rev {rev}")
    if rev > node_rev:
        return MpaParseError(errno.EINVAL, 4, f"rev {rev} above own rev {node_rev}")
    want = mpa.KEY_REP if initiator else mpa.KEY_REQ
    if payload[:mpa.KEY_SIZE] != want:
        return MpaParseError(errno.EINVAL, 5, f"unexpected MPA key, wanted {want.decode()}")
    if pd_length + mpa.FRAME_SIZE > length:
        return MpaParseError(errno.EOVERFLOW, 6,
                             f"PD_Length {pd_length} + 20 > {length} bytes in the segment")
    if length > MAX_CM_BUF:
        return MpaParseError(errno.EOVERFLOW, 7, f"segment payload {length} > 544")
    hdr_len = mpa.FRAME_SIZE
    negotiated: Negotiated | None = None
    if rev == 2:
        hdr_len = MPA_V2_HDR
        ctrl_ird, ctrl_ord = struct.unpack_from("!HH", payload.ljust(MPA_V2_HDR, b"\0"),
                                                mpa.FRAME_SIZE)
        result = negotiate_mpa_v2_ird_ord(
            ctrl_ird, ctrl_ord, initiator=initiator, ird_size=ird_size, ord_size=ord_size,
            mpav2_ird_ord=mpav2_ird_ord, send_rdma0_op=send_rdma0_op,
            require_p2p=require_p2p, prefer=prefer)
        if isinstance(result, NegotiationError):
            return MpaParseError(result.errno, 8, result.reason, result.partial)
        negotiated = result
    # The kernel copies PD_Length bytes from hdr_len: for v2 the last 4 lie past the
    # frame, in whatever the receive buffer holds there (irdma_parse_mpa's memcpy).
    frame_end = mpa.FRAME_SIZE + pd_length
    past = payload[frame_end:hdr_len + pd_length] if tail == "segment" else b""
    copied = (payload[hdr_len:frame_end] + past).ljust(pd_length, b"\0")
    user = payload[hdr_len:mpa.FRAME_SIZE + pd_length] if rev == 2 else copied
    return ParsedMpa(rev=rev, reject=bool(flags & mpa.FLAG_REJECT),
                     markers=bool(flags & mpa.FLAG_MARKERS), pd_length=pd_length,
                     private_data=copied, user_data=bytes(user), negotiated=negotiated)
