"""What ksmbd (fs/smb/server/transport_rdma.c) requires of an SMB Direct Negotiate
Request before it answers: ``smb_direct_check_recvmsg`` (SMBDIRECT_EXPECT_NEGOTIATE_REQ)
returns

- ``-EOPNOTSUPP`` when MinVersion > 0x0100 or MaxVersion < 0x0100;
- ``-ECONNABORTED`` when CreditsRequested is 0, MaxReceiveSize <= 128 or
  MaxFragmentedSize <= 128 * 1024;

and on an error ksmbd sends no Negotiate Response and disconnects."""

from __future__ import annotations

import errno

from mpa_emu.wire.ulp.smbd import SMBDIRECT_V1, NegotiateRequest

MIN_RECEIVE = 128
"""``max_receive_size <= 128`` is refused."""
MIN_FRAGMENTED = 128 * 1024
"""``max_fragmented_size <= 128 * 1024`` is refused."""


def check_negotiate(req: NegotiateRequest) -> tuple[int, str]:
    """(0 or the negative errno smb_direct_check_recvmsg returns, why)."""
    if req.min_version > SMBDIRECT_V1 or req.max_version < SMBDIRECT_V1:
        return -errno.EOPNOTSUPP, (f"versions 0x{req.min_version:04x}-0x{req.max_version:04x} "
                                   "do not include 0x0100")
    if req.credits_requested == 0:
        return -errno.ECONNABORTED, "CreditsRequested 0"
    if req.max_receive_size <= MIN_RECEIVE:
        return -errno.ECONNABORTED, (f"MaxReceiveSize {req.max_receive_size:,} is not above "
                                     f"{MIN_RECEIVE}")
    if req.max_fragmented_size <= MIN_FRAGMENTED:
        return -errno.ECONNABORTED, (f"MaxFragmentedSize {req.max_fragmented_size:,} is not "
                                     f"above {MIN_FRAGMENTED:,}")
    return 0, ""
