"""The SMB Direct client of cifs.ko (fs/smb/client/smbdirect.c) as far as its negotiation.

``smbd_negotiate`` posts one receive for the response (``smbd_post_recv``, a buffer of
``max_receive_size``), then ``smbd_post_send_negotiate_req`` sends the Negotiate Request
([MS-SMBD] 2.2.1): MinVersion = MaxVersion = SMBDIRECT_V1, CreditsRequested
``send_credit_target``, PreferredSendSize ``max_send_size``, MaxReceiveSize
``max_receive_size`` and MaxFragmentedSize ``max_fragmented_recv_size`` - the module's
``smbd_send_credit_target`` (255), ``smbd_max_send_size`` (1364),
``smbd_max_receive_size`` (1364) and ``smbd_max_fragmented_recv_size`` (1 MiB).

``process_negotiation_response`` ([MS-SMBD] 3.1.5.7) refuses a response shorter than 32
bytes, NegotiatedVersion other than 0x0100, CreditsRequested 0, CreditsGranted 0,
PreferredSendSize above its own MaxReceiveSize, MaxReceiveSize below
SMBD_MIN_RECEIVE_SIZE (128) or MaxFragmentedSize below SMBD_MIN_FRAGMENTED_SIZE
(131,072); a refused response or none within SMBD_NEGOTIATE_TIMEOUT (120 s) fails the
connection, which ``_smbd_get_connection`` disconnects (rdma_disconnect). Status is not
read: a STATUS_NOT_SUPPORTED response fails on its NegotiatedVersion 0.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from mpa_emu.wire.ulp.smbd import NEGOTIATE_RESPONSE_SIZE, SMBDIRECT_V1, NegotiateRequest

SMBD_MIN_RECEIVE_SIZE = 128
SMBD_MIN_FRAGMENTED_SIZE = 131072
"""smbdirect.c: the minimum sizes [MS-SMBD] 3.1.5.7 allows."""
NEGOTIATE_TIMEOUT_NS = 120 * 1_000_000_000
"""smbdirect.c ``SMBD_NEGOTIATE_TIMEOUT``: 120 seconds."""

DEFAULT_REQUEST = NegotiateRequest(SMBDIRECT_V1, SMBDIRECT_V1, 255, 1364, 1364, 1024 * 1024)
"""``smbd_post_send_negotiate_req`` with the module's defaults."""


@dataclass(frozen=True, slots=True)
class ResponseCheck:
    """``process_negotiation_response``'s verdict: ``ok``, and the first check that
    failed (empty when ok)."""

    ok: bool
    why: str


def check_response(data: bytes, request: NegotiateRequest = DEFAULT_REQUEST) -> ResponseCheck:
    """``process_negotiation_response`` on ``data`` (the received message) for a client
    that sent ``request`` (its MaxReceiveSize bounds the server's PreferredSendSize)."""
    if len(data) < NEGOTIATE_RESPONSE_SIZE:
        return ResponseCheck(False, f"packet_length={len(data)}: shorter than the "
                             f"{NEGOTIATE_RESPONSE_SIZE}-byte negotiate response")
    (_mn, _mx, negotiated, _res, creq, cgr, _status, _rw, pref, maxrecv,
     maxfrag) = struct.unpack_from("<HHHHHHIIIII", data)
    if negotiated != SMBDIRECT_V1:
        return ResponseCheck(False, f"negotiated_version={negotiated:x}")
    if creq == 0:
        return ResponseCheck(False, "credits_requested==0")
    if cgr == 0:
        return ResponseCheck(False, "credits_granted==0")
    if pref > request.max_receive_size:
        return ResponseCheck(False, f"preferred_send_size={pref}")
    if maxrecv < SMBD_MIN_RECEIVE_SIZE:
        return ResponseCheck(False, f"max_receive_size={maxrecv}")
    if maxfrag < SMBD_MIN_FRAGMENTED_SIZE:
        return ResponseCheck(False, f"max_fragmented_size={maxfrag}")
    return ResponseCheck(True, "")
