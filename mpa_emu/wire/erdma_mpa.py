"""erdma's private MPA dialect (drivers/infiniband/hw/erdma/erdma_cm.h): the request,
reply and reject frames Alibaba's Elastic RDMA connection manager writes.

The first 20 bytes have RFC 5044 section 7.1's shape (the 16-byte key, the flags byte,
the revision byte, the big-endian PD_Length), but the revision is
``MPA_REVISION_EXT_1`` (129), and eight bytes follow that PD_Length does not count,
``struct erdma_mpa_ext``: a big-endian ``cookie`` and a big-endian ``bits`` word whose
low four bits (``MPA_EXT_FLAG_CC``) name the sender's congestion-control algorithm. The
private data comes after the extension. There is no RFC 6581 block: erdma sends no IRD,
ORD or RTR. ``MPA_DEFAULT_HDR_LEN`` (28) is header plus extension.

This module knows the bytes only; what erdma_cm.c checks and does with them is the erdma
stack's (``STACKS["erdma"]``, docs/stacks/erdma.md).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from mpa_emu.wire import mpa
from mpa_emu.wire.mpa import FRAME_SIZE, KEY_REP, KEY_REQ, KEY_SIZE, MpaFormatError

REVISION_EXT_1: Final = 129
"""erdma_cm.h: MPA_REVISION_EXT_1, the only revision erdma_recv_mpa_rr takes."""
EXT_SIZE: Final = 8
"""sizeof(struct erdma_mpa_ext): __be32 cookie, __be32 bits."""
HDR_LEN: Final = FRAME_SIZE + EXT_SIZE
"""erdma_cm.h: MPA_DEFAULT_HDR_LEN (28), the frame before its private data."""
EXT_FLAG_CC: Final = 0x0000000F
"""erdma_cm.h: MPA_EXT_FLAG_CC (in host order), the congestion-control field of
``bits`` (__mpa_ext_set_cc, __mpa_ext_cc)."""
MAX_PRIVDATA: Final = 256
"""erdma_cm.h: MPA_MAX_PRIVDATA (RDMA_MAX_PRIVATE_DATA)."""

CC_NAMES: Final = {0: "NewReno", 1: "Cubic", 2: "HPCC-RTT", 3: "HPCC-ECN", 4: "HPCC-INT"}
"""erdma.h: enum erdma_cc_alg (ERDMA_CC_NEWRENO .. ERDMA_CC_HPCC_INT)."""
COMPROMISE_CC: Final = 1
"""erdma.h: COMPROMISE_CC (ERDMA_CC_CUBIC), what a QP runs when the two sides' CCs
differ (erdma_accept, erdma_proc_mpareply)."""


@dataclass(frozen=True, slots=True)
class ErdmaFrame:
    """One erdma request/reply/reject: the header fields, the extension and the private
    data (PD_Length bytes after the extension)."""

    key: bytes
    flags: int
    rev: int
    cookie: int
    ext_bits: int
    private_data: bytes = b""

    @property
    def request(self) -> bool:
        """The key is "MPA ID Req Frame"."""
        return self.key == KEY_REQ

    @property
    def reject(self) -> bool:
        """The R flag (0x20 of the flags byte, MPA_RR_FLAG_REJECT)."""
        return bool(self.flags & 0x20)

    @property
    def cc(self) -> int:
        """The congestion-control algorithm in ``bits`` (__mpa_ext_cc)."""
        return self.ext_bits & EXT_FLAG_CC

    @property
    def cc_name(self) -> str:
        """The algorithm's name in enum erdma_cc_alg (its number when unnamed)."""
        return CC_NAMES.get(self.cc, str(self.cc))

    def to_bytes(self) -> bytes:
        """The frame as erdma_send_mpareqrep writes it: ``struct mpa_rr`` with PD_Length
        the private data's length, ``struct erdma_mpa_ext``, the private data."""
        return (self.key + struct.pack("!BBH", self.flags & 0xFF, self.rev & 0xFF,
                                       len(self.private_data) & 0xFFFF)
                + struct.pack("!II", self.cookie & 0xFFFFFFFF, self.ext_bits & 0xFFFFFFFF)
                + self.private_data)


def build(*, request: bool, flags: int = 0, cookie: int, cc: int,
          private_data: bytes = b"", ext_bits: int | None = None) -> bytes:
    """A frame of revision 129: ``cc`` set in the extension's bits the way
    __mpa_ext_set_cc does (the other bits from ``ext_bits``, else zero)."""
    bits = ((ext_bits or 0) & ~EXT_FLAG_CC) | (cc & EXT_FLAG_CC)
    return ErdmaFrame(KEY_REQ if request else KEY_REP, flags, REVISION_EXT_1, cookie, bits,
                      private_data).to_bytes()


def looks_like_erdma(payload: bytes) -> bool:
    """True when ``payload`` starts with an MPA key, revision 129 and the 8-byte
    extension: the frame erdma_cm.c writes, and no RFC 5044 stack does."""
    return (len(payload) >= HDR_LEN and payload[:KEY_SIZE] in (KEY_REQ, KEY_REP)
            and payload[KEY_SIZE + 1] == REVISION_EXT_1)


def parse(payload: bytes) -> ErdmaFrame:
    """Decode an erdma frame at the start of ``payload``. Raises
    :class:`~mpa_emu.wire.mpa.MpaFormatError` for another key, another revision, a
    payload shorter than the 28-byte header or than PD_Length says."""
    if len(payload) < HDR_LEN:
        raise MpaFormatError(f"an erdma MPA frame needs {HDR_LEN} bytes (header and "
                             f"extension), got {len(payload)}")
    key = bytes(payload[:KEY_SIZE])
    if key not in (KEY_REQ, KEY_REP):
        raise MpaFormatError(f"not an MPA key: {key!r}")
    flags, rev, pd_len = struct.unpack_from("!BBH", payload, KEY_SIZE)
    if rev != REVISION_EXT_1:
        raise MpaFormatError(f"revision {rev}, not erdma's {REVISION_EXT_1}")
    cookie, bits = struct.unpack_from("!II", payload, FRAME_SIZE)
    end = HDR_LEN + pd_len
    if end > len(payload):
        raise MpaFormatError(f"PD_Length {pd_len} needs {end} bytes, only {len(payload)} "
                             "present")
    return ErdmaFrame(key, flags, rev, cookie, bits, bytes(payload[HDR_LEN:end]))


def decode_frame(payload: bytes) -> tuple[mpa.MpaFrame, ErdmaFrame | None]:
    """An MPA request, reply or reject at the start of ``payload`` in either layout:
    erdma's (:func:`looks_like_erdma`) read with :func:`parse`, its private data the
    PD_Length bytes after the extension, with the :class:`ErdmaFrame`; any other with
    :func:`mpa_emu.wire.mpa.decode_frame` (RFC 5044 section 7.1, RFC 6581 section 5) and
    None. The one reader the views use, so none takes erdma's extension for private
    data. Raises :class:`~mpa_emu.wire.mpa.MpaFormatError` as those do."""
    if not looks_like_erdma(payload):
        return mpa.decode_frame(payload), None
    e = parse(payload)
    return mpa.MpaFrame(request=e.request, rev=e.rev, flags=e.flags, rtr=None,
                        private_data=e.private_data), e


def ext_text(e: ErdmaFrame) -> str:
    """``erdma ext cookie 0x12345678 cc Cubic``: the extension in words."""
    return f"erdma ext cookie 0x{e.cookie:08x} cc {e.cc_name}"


__all__ = ["CC_NAMES", "COMPROMISE_CC", "EXT_FLAG_CC", "EXT_SIZE", "HDR_LEN",
           "MAX_PRIVDATA", "REVISION_EXT_1", "ErdmaFrame", "build", "decode_frame",
           "ext_text", "looks_like_erdma", "parse"]
