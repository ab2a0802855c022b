"""What ksmbd (fs/smb/server/transport_rdma.c) does with an SMB Direct Negotiate Request.

``smb_direct_check_recvmsg`` (a request of type SMB_DIRECT_MSG_NEGOTIATE_REQ) returns

- ``-EOPNOTSUPP`` when MinVersion > 0x0100 or MaxVersion < 0x0100;
- ``-ECONNABORTED`` when CreditsRequested is 0, MaxReceiveSize <= 128 or
  MaxFragmentedSize <= 128 * 1024;

and ``smb_direct_prepare`` acts on it: on ``-ECONNABORTED`` it sends no Negotiate
Response (``goto out``) and returns the error, so ``ksmbd_conn_handler_loop`` ends and
``smb_direct_disconnect`` disconnects (rdma_disconnect); on ``-EOPNOTSUPP`` it still calls
``smb_direct_send_negotiate_response(st, failed)``, which sends a response zeroed but for
MinVersion = MaxVersion = 0x0100 and Status STATUS_NOT_SUPPORTED, and the connection stays
until the client leaves. A request shorter than the 20-byte ``struct
smb_direct_negotiate_req`` is dropped by ``recv_done`` (``put_empty_recvmsg``): ksmbd
keeps waiting, and after SMB_DIRECT_NEGOTIATE_TIMEOUT (120 s) ``smb_direct_prepare``
returns ``-ETIMEDOUT`` and the connection is disconnected.

A request that passes is answered with what ``smb_direct_prepare`` and
``smb_direct_send_negotiate_response`` compute from ksmbd's limits (:class:`KsmbdLimits`,
the module's defaults): see :func:`answer`.
"""

from __future__ import annotations

import errno
import struct
from dataclasses import dataclass

from mpa_emu.wire.private_data import encode_legacy
from mpa_emu.wire.ulp.smbd import (
    NEGOTIATE_REQUEST_SIZE,
    SMBDIRECT_V1,
    NegotiateRequest,
    NegotiateResponse,
)

MIN_RECEIVE = 128
"""``max_receive_size <= 128`` is refused."""
MIN_FRAGMENTED = 128 * 1024
"""``max_fragmented_size <= 128 * 1024`` is refused."""
STATUS_SUCCESS = 0x00000000
STATUS_NOT_SUPPORTED = 0xC00000BB
"""[MS-ERREF] 2.3 NTSTATUS values ksmbd puts in the response's Status."""
NEGOTIATE_TIMEOUT_NS = 120 * 1_000_000_000
"""transport_rdma.c ``SMB_DIRECT_NEGOTIATE_TIMEOUT``: 120 seconds."""
SMBD_MIN_IOSIZE = 512 * 1024
SMBD_MAX_IOSIZE = 16 * 1024 * 1024
SMBD_DEFAULT_IOSIZE = 8 * 1024 * 1024
"""transport_rdma.h: ``init_smbd_max_io_size`` clamps the read/write size to
512 KiB..16 MiB; 8 MiB by default."""
PAGE_SIZE = 4096
MAX_SEND_SGES = 6
"""transport_rdma.c ``SMB_DIRECT_MAX_SEND_SGES``."""
ACCEPT_PRIVATE_DATA = encode_legacy(0, 1, "little")
"""``smb_direct_accept_client`` on iWARP: ``u32 ird_ord_hdr[2] = {responder_resources
(0), 1}`` in the CPU's byte order (little-endian on x86), [MS-SMBD] 6.1's IRD/ORD
header."""


def check_negotiate(req: NegotiateRequest) -> tuple[int, str]:
    """(0 or the negative errno smb_direct_check_recvmsg returns, why)."""
    if req.min_version > SMBDIRECT_V1 or req.max_version < SMBDIRECT_V1:
        return -errno.EOPNOTSUPP, (f"versions 0x{req.min_version:04x}-0x{req.max_version:04x}, "
                                   "without 0x0100")
    if req.credits_requested == 0:
        return -errno.ECONNABORTED, "CreditsRequested 0"
    if req.max_receive_size <= MIN_RECEIVE:
        return -errno.ECONNABORTED, (f"MaxReceiveSize {req.max_receive_size:,} is not above "
                                     f"{MIN_RECEIVE}")
    if req.max_fragmented_size <= MIN_FRAGMENTED:
        return -errno.ECONNABORTED, (f"MaxFragmentedSize {req.max_fragmented_size:,} is not "
                                     f"above {MIN_FRAGMENTED:,}")
    return 0, ""


@dataclass(frozen=True, slots=True)
class KsmbdLimits:
    """ksmbd's SMB Direct parameters ([MS-SMBD] 3.1.1.1), defaults from transport_rdma.c:
    ``smb_direct_receive_credit_max`` (255), ``smb_direct_send_credit_target`` (255),
    ``smb_direct_max_send_size`` (1364), ``smb_direct_max_receive_size`` (1364) and
    ``smb_direct_max_read_write_size`` (SMBD_DEFAULT_IOSIZE, 8 MiB).
    ``smb_direct_max_fragmented_recv_size`` is not one: ``smb_direct_prepare`` replaces it
    with ``recv_credit_max * max_recv_size / 2`` before it is sent."""

    receive_credit_max: int = 255
    send_credit_target: int = 255
    max_send_size: int = 1364
    max_receive_size: int = 1364
    max_read_write_size: int = SMBD_DEFAULT_IOSIZE

    def problem(self) -> str | None:
        """Why ksmbd would refuse these limits itself, or None: ``smb_direct_init_params``
        needs ``DIV_ROUND_UP(max_send_size, PAGE_SIZE) + 3 <= SMB_DIRECT_MAX_SEND_SGES``
        ("max_send_size %d is too large"); the read/write size is clamped by
        ``init_smbd_max_io_size`` (512 KiB..16 MiB); every value is a positive count or
        size of its field's width ([MS-SMBD] 2.2.2)."""
        for name, value, hi in (("receive_credit_max", self.receive_credit_max, 0xFFFF),
                                ("send_credit_target", self.send_credit_target, 0xFFFF),
                                ("max_send_size", self.max_send_size, 0xFFFFFFFF),
                                ("max_receive_size", self.max_receive_size, 0xFFFFFFFF)):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= hi:
                return f"{name}: expected an integer in 1..{hi}, got {value!r}"
        if -(-self.max_send_size // PAGE_SIZE) + 3 > MAX_SEND_SGES:
            return (f"max_send_size {self.max_send_size} is too large (smb_direct_init_params: "
                    f"at most {(MAX_SEND_SGES - 3) * PAGE_SIZE:,})")
        rw = self.max_read_write_size
        if isinstance(rw, bool) or not isinstance(rw, int) \
                or not SMBD_MIN_IOSIZE <= rw <= SMBD_MAX_IOSIZE:
            return (f"max_read_write_size: expected {SMBD_MIN_IOSIZE:,}..{SMBD_MAX_IOSIZE:,} "
                    f"(init_smbd_max_io_size), got {rw!r}")
        return None

    @property
    def credits_granted(self) -> int:
        """The credits the response grants: ``smb_direct_prepare_negotiation`` takes one
        receive of the ``receive_credit_max`` that ``smb_direct_create_pools`` made for
        the request, then ``smb_direct_post_recv_credits`` posts every other one and
        counts them in ``new_recv_credits``, which ``manage_credits_prior_sending``
        hands to the response."""
        return self.receive_credit_max - 1


@dataclass(frozen=True, slots=True)
class KsmbdAnswer:
    """What ksmbd does with one request: ``response`` (the 32 bytes to send, or None
    when it sends none), ``disconnect`` (it disconnects right away), ``errno`` (0 or
    what smb_direct_check_recvmsg returned), ``ignored`` (recv_done dropped it: ksmbd
    waits, and no later Send is a negotiation, until its timeout) and the rule that
    decided."""

    response: bytes | None
    disconnect: bool
    errno: int
    why: str
    ignored: bool = False


def answer(data: bytes, limits: KsmbdLimits = KsmbdLimits()) -> KsmbdAnswer:
    """ksmbd's answer to the first Send of a connection (the module docstring).

    A passing request gets the response ``smb_direct_send_negotiate_response`` builds:
    versions 0x0100, CreditsRequested ``send_credit_target``, CreditsGranted
    :attr:`KsmbdLimits.credits_granted`, MaxReadWriteSize ``max_read_write_size``,
    PreferredSendSize ``min(max_send_size, request MaxReceiveSize)``, MaxReceiveSize
    ``min(max_receive_size, request PreferredSendSize)`` and MaxFragmentedSize
    ``receive_credit_max * MaxReceiveSize / 2`` (``smb_direct_prepare``)."""
    if len(data) < NEGOTIATE_REQUEST_SIZE:  # recv_done: wc->byte_len < sizeof(*req)
        return KsmbdAnswer(None, False, 0, f"recv_done: {len(data)} bytes is shorter than "
                           f"the {NEGOTIATE_REQUEST_SIZE}-byte negotiate request; dropped",
                           ignored=True)
    mn, mx, _res, credits, pref, maxrecv, maxfrag = struct.unpack_from("<HHHHIII", data)
    req = NegotiateRequest(mn, mx, credits, pref, maxrecv, maxfrag)
    status, why = check_negotiate(req)
    if status == -errno.ECONNABORTED:  # smb_direct_prepare: goto out, no response
        return KsmbdAnswer(None, True, status, f"smb_direct_check_recvmsg: {why}: no "
                           "Negotiate Response, smb_direct_prepare fails and the connection "
                           "is disconnected")
    if status:  # smb_direct_send_negotiate_response(st, -EOPNOTSUPP): the failed response
        failed = NegotiateResponse(SMBDIRECT_V1, SMBDIRECT_V1, 0, 0, 0, STATUS_NOT_SUPPORTED,
                                   0, 0, 0, 0)
        return KsmbdAnswer(failed.encode(), False, status, f"smb_direct_check_recvmsg: "
                           f"{why}: smb_direct_send_negotiate_response(failed) answers "
                           "STATUS_NOT_SUPPORTED")
    max_recv = min(limits.max_receive_size, pref)  # smb_direct_prepare: st->max_recv_size
    resp = NegotiateResponse(
        SMBDIRECT_V1, SMBDIRECT_V1, SMBDIRECT_V1, limits.send_credit_target,
        limits.credits_granted, STATUS_SUCCESS, limits.max_read_write_size,
        min(limits.max_send_size, maxrecv), max_recv,
        (limits.receive_credit_max * max_recv) // 2 & 0xFFFFFFFF)
    return KsmbdAnswer(resp.encode(), False, 0, "smb_direct_send_negotiate_response: "
                       "STATUS_SUCCESS")
