"""The receive half shared by ``process_mpa_reply`` and ``process_mpa_request``: bytes of
``CPL_RX_DATA`` accumulate in ``ep->mpa_pkt`` until a whole MPA frame is there, checked
in the kernel's order at every call.

What happens next (upcall, abort, QP state) is the caller's: this module only says
whether the frame is incomplete, bad (with the errno ``process_mpa_reply`` would use and
the log line, if the kernel prints one), or complete.
"""

from __future__ import annotations

from dataclasses import dataclass
from errno import EINVAL, EPROTO

from mpa_emu.stacks.cxgb4.states import MPA_MAX_PRIVATE_DATA, MPA_PKT_SIZE
from mpa_emu.wire import mpa

INCOMPLETE = 0
BAD = 1
COMPLETE = 2


@dataclass(frozen=True, slots=True)
class MpaCheck:
    """The outcome of one ``CPL_RX_DATA`` during MPA negotiation.

    ``status`` is :data:`INCOMPLETE`, :data:`BAD` or :data:`COMPLETE`. For BAD: ``errno``
    (positive) and ``reason``; ``log`` is the pr_err text when the kernel prints one.
    For COMPLETE: the header fields and ``pd`` (PD_Length bytes after the header)."""

    status: int
    errno: int = 0
    reason: str = ""
    log: str | None = None
    flags: int = 0
    rev: int = 0
    pd_length: int = 0
    pd: bytes = b""


_INCOMPLETE = MpaCheck(INCOMPLETE)


def accumulate(pkt: bytearray, length: int, data: bytes, *, request: bool,
               mpa_rev: int) -> tuple[MpaCheck, int]:
    """Copy ``data`` into ``pkt`` (the endpoint's ``mpa_pkt``, 276 bytes) after the
    ``length`` bytes already there; return the outcome and the new length.

    The checks, in the kernel's order: the bytes would overflow ``mpa_pkt`` (nothing is
    copied; -EINVAL); fewer than 20 bytes (wait); ``revision > mpa_rev`` (-EPROTO, with
    the "MPA version mismatch" pr_err); the key; PD_Length above
    ``MPA_MAX_PRIVATE_DATA``; more bytes than 20 + PD_Length; fewer (wait, with
    ``pd_length`` set: the kernel already stored ``ep->plen``)."""
    fn = "process_mpa_request" if request else "process_mpa_reply"
    if length + len(data) > MPA_PKT_SIZE:
        return MpaCheck(BAD, EINVAL, f"{length + len(data)} bytes overflow "
                        f"mpa_pkt[{MPA_PKT_SIZE}]"), length
    pkt[length:length + len(data)] = data
    length += len(data)
    if length < mpa.FRAME_SIZE:
        return _INCOMPLETE, length
    head = mpa.parse_header(bytes(pkt[:mpa.FRAME_SIZE]))
    if head.rev > mpa_rev:
        return MpaCheck(BAD, EPROTO, f"revision {head.rev} > mpa_rev {mpa_rev}",
                        log=f"{fn} MPA version mismatch. Local = {mpa_rev}, "
                            f"Received = {head.rev}"), length
    key = mpa.KEY_REQ if request else mpa.KEY_REP
    if head.key != key:
        return MpaCheck(BAD, EPROTO, f"key {head.key!r} is not {key.decode()!r}"), length
    if head.pd_length > MPA_MAX_PRIVATE_DATA:
        return MpaCheck(BAD, EPROTO, f"PD_Length {head.pd_length} > "
                        f"MPA_MAX_PRIVATE_DATA {MPA_MAX_PRIVATE_DATA}"), length
    end = mpa.FRAME_SIZE + head.pd_length
    if length > end:
        return MpaCheck(BAD, EPROTO, f"{length - end} bytes after the frame "
                        f"(PD_Length {head.pd_length})"), length
    if length < end:
        return MpaCheck(INCOMPLETE, pd_length=head.pd_length), length
    return MpaCheck(COMPLETE, flags=head.flags, rev=head.rev, pd_length=head.pd_length,
                    pd=bytes(pkt[mpa.FRAME_SIZE:end])), length
