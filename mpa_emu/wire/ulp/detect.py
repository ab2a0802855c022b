"""Which upper protocol a connection speaks, from its bytes first and its port second.

Content decides when it proves a format: NVMe-RDMA's 32-byte connect request (record
format 0, reserved bytes zero), RPC-over-RDMA's format identifier, iSER's CM header with
its flags set (Linux's initiator always sets ``ISER_ZBVA_NOT_SUP``), SMB Direct's
Negotiate Request as the initiator's first Send. A weaker sign (four zero bytes that an
iSER header could be, SMB Direct's legacy IRD/ORD header) counts only together with the
protocol's well-known port or its first message. A port alone names the protocol "by
port", and then only bytes that decode as it are read as it. Anything else is the unknown
upper protocol, its private data kept as hex: never read as a format it may not be.
"""

from __future__ import annotations

from dataclasses import dataclass

from mpa_emu.wire.private_data import SMBD_PORT, decode_legacy
from mpa_emu.wire.ulp import iser, nvme_rdma, rpcrdma, smbd
from mpa_emu.wire.ulp.values import Decoded

SMBD, NVME, ISER, RPCRDMA, UNKNOWN = "smb-direct", "nvme-rdma", "iser", "rpc-rdma", "unknown"
PROTOCOL_NAMES = {SMBD: "SMB Direct", NVME: "NVMe over Fabrics (RDMA)", ISER: "iSER",
                  RPCRDMA: "RPC-over-RDMA", UNKNOWN: "unknown upper protocol"}
"""Each protocol's key (as JSON and scenarios spell it) and its name in reports."""
WELL_KNOWN_PORTS = {SMBD_PORT: SMBD, nvme_rdma.NVME_RDMA_IP_PORT: NVME,
                    iser.ISCSI_PORT: ISER, rpcrdma.NFS_RDMA_PORT: RPCRDMA}
"""[MS-SMBD] 1.9: 5445; nvme-rdma.h NVME_RDMA_IP_PORT 4420; iSCSI 3260; NFS/RDMA 20049."""


@dataclass(frozen=True, slots=True)
class Recognition:
    """The protocol, and how it was told: ``private data``, ``first message``,
    ``port``, or both content and port (``private data and port 4420``)."""

    protocol: str
    by: str

    @property
    def name(self) -> str:
        """``SMB Direct``."""
        return PROTOCOL_NAMES[self.protocol]


def decode_private_data(protocol: str, data: bytes, *, request: bool,
                        reject: bool = False) -> Decoded | None:
    """``data`` (an MPA frame's ULP private data) read as ``protocol``'s connect
    (``request``), accept or reject private data; None when it is not that format."""
    if protocol == NVME:
        if request:
            return nvme_rdma.CmRequest.decode(data)
        return nvme_rdma.CmReject.decode(data) if reject else nvme_rdma.CmReply.decode(data)
    if protocol == RPCRDMA:
        return rpcrdma.ConnectPrivate.decode(data)
    if protocol == ISER:
        return iser.CmHeader.decode(data)
    if protocol == SMBD:
        return smbd.LegacyHeader.decode(data)
    return None


def recognise(request_pd: bytes | None, server_port: int,
              first_client_send: bytes | None = None) -> Recognition | None:
    """The protocol of a connection from its MPA request's ULP private data, the
    responder's port and the initiator's first Send (its opening bytes); None when
    nothing says anything (no private data, no known port, no known first message),
    :data:`UNKNOWN` when private data is there but is no known format."""
    port = WELL_KNOWN_PORTS.get(server_port)
    pd = request_pd or b""
    by_content: str | None = None
    how = "private data"
    nvme = nvme_rdma.CmRequest.decode(pd)
    # An all-zero block is no proof: Linux's host never asks for an empty queue
    # (nvme_rdma_route_resolved: hrqsize is the queue size, at least 1).
    if nvme is not None and (nvme.hrqsize or nvme.hsqsize or port == NVME):
        by_content = NVME
    elif rpcrdma.ConnectPrivate.decode(pd) is not None:
        by_content = RPCRDMA
    else:
        header = iser.CmHeader.decode(pd)
        first_iser = (first_client_send is not None
                      and iser.IserMessage.decode(first_client_send) is not None)
        if header is not None and (header.flags or port == ISER or first_iser):
            by_content = ISER
        elif first_client_send is not None \
                and smbd.NegotiateRequest.decode(first_client_send) is not None:
            by_content, how = SMBD, "first message"
        elif decode_legacy(pd) is not None and port == SMBD:
            by_content = SMBD
    if by_content is not None:
        if port == by_content:
            how += f" and port {server_port}"
        return Recognition(by_content, how)
    if port is not None:
        return Recognition(port, f"port {server_port}")
    if pd:
        return Recognition(UNKNOWN, "private data of no known format")
    return None


def decode_message(protocol: str, head: bytes, size: int, *, from_initiator: bool,
                   first: bool, admin: bool = False) -> Decoded | None:
    """One Send's message read as ``protocol``: ``head`` its first bytes, ``size`` its
    length, ``from_initiator`` its direction, ``first`` whether it is that side's first
    Send, ``admin`` (NVMe) whether the connection is the admin queue. None when the
    bytes are not such a message."""
    whole = head if len(head) == size else head[:size]
    if protocol == SMBD:
        if first:
            neg: Decoded | None = (smbd.NegotiateRequest.decode(whole, any_version=True)
                                   if from_initiator else smbd.NegotiateResponse.decode(whole))
            if neg is not None:
                return neg
        return smbd.DataTransfer.decode(head, size)
    if protocol == NVME:
        if from_initiator:
            return nvme_rdma.CommandCapsule.decode(head, admin, size)
        return nvme_rdma.ResponseCapsule.decode(whole) if size == nvme_rdma.CQE_SIZE \
            else None
    if protocol == ISER:
        return iser.IserMessage.decode(head)
    if protocol == RPCRDMA:
        return rpcrdma.TransportHeader.decode(head)
    return None


def label_private_data(data: bytes, *, request: bool) -> Decoded | None:
    """A frame's ULP private data read by content alone, for views that see one frame
    without its connection (ladder labels, the HTML fields panel): only formats the bytes
    prove by themselves - an NVMe-RDMA connect request asking for a queue, RFC 8797's
    block (its format identifier), an iSER CM header with a flag set. An accept's or a
    reject's NVMe-RDMA block proves nothing without its request, so it is not named
    here (inspect and explain, which see the request, name it)."""
    if request:
        nvme = nvme_rdma.CmRequest.decode(data)
        if nvme is not None and (nvme.hrqsize or nvme.hsqsize):
            return nvme
    rpc = rpcrdma.ConnectPrivate.decode(data)
    if rpc is not None:
        return rpc
    header = iser.CmHeader.decode(data)
    return header if header is not None and header.flags else None


def label_send(ulpdu: bytes) -> str | None:
    """A Send's upper-protocol message named by content alone, for ladder labels that see
    one FPDU without its connection: only what the bytes prove - an SMB Direct Negotiate
    Request or Response (their exact sizes and version fields, reserved zero), or an SMB
    Direct data message whose payload opens with an SMB2 header (0xFE 'SMB'). The first
    segment of an untagged Send (RFC 5041 section 4.4: MO 0) only."""
    if len(ulpdu) < 18 or ulpdu[0] & 0x80 or ulpdu[1] & 0x0F not in (3, 4, 5, 6):
        return None
    if int.from_bytes(ulpdu[14:18], "big") != 0:
        return None
    body = ulpdu[18:]
    neg: Decoded | None = None
    if len(body) == smbd.NEGOTIATE_REQUEST_SIZE:
        req = smbd.NegotiateRequest.decode(body)
        neg = req if req is not None and req.reserved == 0 else None
    elif len(body) == smbd.NEGOTIATE_RESPONSE_SIZE:
        resp = smbd.NegotiateResponse.decode(body)
        neg = resp if resp is not None and resp.reserved == 0 else None
    if neg is not None:
        return f"SMB Direct {neg.kind}"
    # The first of several segments (L clear) holds only the start of the payload.
    whole = len(body) if ulpdu[0] & 0x40 else 0xFFFFFFFF
    data = smbd.DataTransfer.decode(body, whole)
    if data is not None and data.smb2 is not None:
        return f"SMB Direct {data.smb2.text()}"
    return None
