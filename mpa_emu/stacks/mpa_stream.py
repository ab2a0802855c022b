"""MPA over a byte stream, shared by the socket-based stacks: reading one MPA
request/reply frame that may arrive split over several TCP segments, the way
siw_recv_mpa_rr reads it from its socket.

:class:`FrameReader` takes bytes from a receive queue (a ``bytearray`` the caller fills
as segments arrive) and says after each step whether the frame is complete, needs more
bytes, or breaks a rule. It consumes bytes as the kernel's ``kernel_recvmsg`` calls do,
so what stays in the queue afterwards is what the kernel would leave unread.
"""

from __future__ import annotations

import errno
import struct
from dataclasses import dataclass, field

from mpa_emu.wire.mpa import FRAME_SIZE


@dataclass(slots=True)
class FrameReader:
    """One frame being read: ``hdr`` the header bytes so far, ``pdata`` the private data
    so far (PD_Length bytes once complete, the RFC 6581 block included)."""

    max_pd: int
    hdr: bytearray = field(default_factory=bytearray)
    pdata: bytearray = field(default_factory=bytearray)
    extra: int = 0
    """Bytes read past the frame when the read failed with ``-EPROTO``."""

    @property
    def pd_len(self) -> int:
        """PD_Length of the header (0 before the header is complete)."""
        if len(self.hdr) < FRAME_SIZE:
            return 0
        return int(struct.unpack_from("!H", self.hdr, 18)[0])

    def step(self, rx: bytearray) -> int:
        """siw_recv_mpa_rr: 0 when the whole frame has been read, ``-EAGAIN`` when more
        bytes are needed, ``-EPROTO`` for PD_Length over ``max_pd`` or bytes past the
        frame in the same read, ``-ECONNABORTED`` when the header read finds nothing."""
        if len(self.hdr) < FRAME_SIZE:
            take = min(FRAME_SIZE - len(self.hdr), len(rx))
            if take <= 0:
                return -errno.ECONNABORTED
            self.hdr += rx[:take]
            del rx[:take]
            if len(self.hdr) < FRAME_SIZE:
                return -errno.EAGAIN
            if self.pd_len > self.max_pd:
                return -errno.EPROTO
        to_rcv = self.pd_len - len(self.pdata)
        if to_rcv == 0:
            # "Check against peer protocol violation": a 4-byte read must find nothing.
            if not rx:
                return 0
            self.extra = min(4, len(rx))
            del rx[:self.extra]
            return -errno.EPROTO
        if not rx:
            return -errno.EAGAIN
        got = min(to_rcv + 4, len(rx))
        chunk = bytes(rx[:got])
        del rx[:got]
        if got > to_rcv:
            self.pdata += chunk[:to_rcv]
            self.extra = got - to_rcv
            return -errno.EPROTO
        self.pdata += chunk
        return 0 if got == to_rcv else -errno.EAGAIN
