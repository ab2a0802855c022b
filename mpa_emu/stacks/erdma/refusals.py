"""What erdma refuses in the MPA frame it receives, with the kernel function that
refuses it and what the peer then sees (erdma_recv_mpa_rr, erdma_proc_mpareq,
erdma_proc_mpareply). The judge applies the rules (:mod:`mpa_emu.judge.rules`, through
:attr:`Stack.refusals <mpa_emu.stacks.base.Stack.refusals>`); they say nothing about
severity.

erdma checks in the kernel's order and stops at the first failure, so the rules stop
there too: a frame refused at its header (revision, PD_Length) is not read further, so
neither its key nor its flags are looked at (C is never seen in an RFC 5044 request).

The judge measures the bytes after a frame (:attr:`Received.trailing
<mpa_emu.stacks.refusals.Received.trailing>`) from its RFC 5044 end, 20 bytes plus
PD_Length; erdma's frame of revision 129 has the 8 bytes of ``struct erdma_mpa_ext``
more, which these rules take off.
"""

from __future__ import annotations

import errno

from mpa_emu.stacks.erdma.facts import FACTS, TEXTS
from mpa_emu.stacks.refusals import (
    RULE_EXTRA,
    RULE_KEY,
    RULE_MARKERS,
    RULE_PD_LIMIT,
    RULE_REV,
    MpaFrameLike,
    Received,
    Refusal,
)
from mpa_emu.wire.erdma_mpa import EXT_SIZE, REVISION_EXT_1
from mpa_emu.wire.mpa import FLAG_CRC, FLAG_MARKERS

NAME = "erdma"

RULE_CRC = "crc-mismatch"
"""The catalogue key (docs/explain.md) of a side insisting on CRC where the other does
not do it: erdma refuses C as it refuses M, with one check."""

_PROBE = 4
"""erdma_recv_mpa_rr: the ``u32 word`` it reads after a complete frame without private
data, and the ``to_rcv + 4`` bytes it asks for with private data."""


def _released(unread: bool) -> str:
    """What the peer sees when erdma_cm_work_handler's release_cep calls sock_release:
    tcp_close sends a RST when received bytes are left unread, else a FIN."""
    return ("socket released: RST (bytes left unread)" if unread
            else "socket released (FIN, or a RST with bytes unread)")


def _read(role: str, r: Received) -> list[Refusal]:
    """erdma_recv_mpa_rr's refusals, in its order: the 20-byte header's PD_Length and
    revision (-EPROTO before the extension is read), then bytes past the frame."""
    stack = NAME
    m = r.frame
    out: list[Refusal] = []
    initiator = role == "initiator"
    # erdma_proc_mpareply: any error but -EAGAIN is out_err, CONNECT_REPLY -EINVAL; a
    # responder's application hears nothing (erdma_proc_mpareq fails before the upcall).
    status = -errno.EINVAL if initiator else None
    how = "-EPROTO, out_err" if initiator else "-EPROTO, no upcall"
    # The header is read alone: whatever follows it in the stream stays in the socket.
    unread = m.pd_length > 0 or r.trailing > 0 or m.rev == REVISION_EXT_1
    if m.pd_length > FACTS.max_pd_length:
        out.append(Refusal(stack, role, RULE_PD_LIMIT, "erdma_recv_mpa_rr", m.frame,
                           f"PD_Length {m.pd_length} over erdma's MPA_MAX_PRIVDATA "
                           f"({FACTS.max_pd_length}), refused at the header",
                           f"{how}, {_released(unread)}", status))
    if m.rev != REVISION_EXT_1:
        rejected = " (a reject too: the revision is checked before R)" \
            if initiator and m.reject else ""
        out.append(Refusal(stack, role, RULE_REV, "erdma_recv_mpa_rr", m.frame,
                           f"MPA rev {m.rev}: erdma takes MPA_REVISION_EXT_1 (129) only, "
                           f"refused at the header{rejected}",
                           f"{how}, {_released(unread)}", status))
    if out:
        return out
    extra = max(0, r.trailing - EXT_SIZE)
    if extra == 0:
        return out
    if m.pd_length > 0 or extra >= _PROBE:
        # With private data: a read of up to to_rcv + 4 bytes, more than to_rcv is
        # -EPROTO; without: the 4-byte probe read, four bytes are -EPROTO.
        out.append(Refusal(stack, role, RULE_EXTRA, "erdma_recv_mpa_rr", m.frame,
                           f"{extra} bytes follow the MPA {'reply' if initiator else 'request'} "
                           "in its segment: erdma takes more than the frame as a peer "
                           "protocol violation", f"{how}, {_released(True)}", status))
        return out
    # No private data and one to three bytes: __recv_mpa_hdr returns -EAGAIN with them
    # read, which erdma_recv_mpa_rr passes on: the bytes are gone and the frame waits
    # for more bytes or the MPA timer (erdma_cm_work_handler, ERDMA_CM_WORK_MPATIMEOUT).
    timer = (f"the MPA timer after {TEXTS.reply_timer_s} s (MPAREP_TIMEOUT), socket "
             "released" if initiator else
             f"the MPA timer after {TEXTS.request_timer_s} s (MPAREQ_TIMEOUT), socket "
             "released, no upcall")
    out.append(Refusal(stack, role, RULE_EXTRA, "erdma_recv_mpa_rr", m.frame,
                       f"{extra} bytes follow the MPA {'reply' if initiator else 'request'} "
                       "without private data in its segment: erdma's 4-byte probe read "
                       "takes them and returns -EAGAIN, the frame is never processed",
                       f"-EAGAIN, then {timer}",
                       -errno.ETIMEDOUT if initiator else None))
    return out


def _key_ok(m: MpaFrameLike, request: bool) -> bool:
    """The frame carries the key erdma_proc_mpareq (request) or erdma_proc_mpareply
    (reply) compares with ``memcmp``."""
    return m.request == request


def _flag_rule(m: MpaFrameLike) -> str:
    """The catalogue key of erdma's one check of M and C: markers when M is set, else
    CRC."""
    return RULE_MARKERS if m.flags & FLAG_MARKERS else RULE_CRC


def responder(r: Received) -> list[Refusal]:
    """What an erdma responder refuses in the request ``r`` (erdma_proc_mpareq)."""
    stack = NAME
    req = r.frame
    out = _read("responder", r)
    if out:
        return out
    if not _key_ok(req, True):
        # erdma_proc_mpareq: memcmp with MPA_KEY_REQ, -EPROTO, nothing sent; the frame
        # was read whole, so the release is a FIN.
        return [Refusal(stack, "responder", RULE_KEY, "erdma_proc_mpareq", req.frame,
                        "the request does not carry the key \"MPA ID Req Frame\"",
                        f"-EPROTO, no upcall, {_released(False)}")]
    names = "+".join(n for bit, n in ((FLAG_MARKERS, "M"), (FLAG_CRC, "C"))
                     if req.flags & bit)
    if names:
        # erdma_proc_mpareq, reject_conn: M and C cleared, R set, PD_Length 0, the
        # request's extension echoed; -EOPNOTSUPP, then release_cep.
        out.append(Refusal(stack, "responder", _flag_rule(req), "erdma_proc_mpareq",
                           req.frame, f"request sets {names}: erdma supports neither "
                           "markers nor CRC (\"Currently does not support marker and "
                           "crc\")", "reject (R) reply without private data, "
                           "-EOPNOTSUPP, no upcall, socket released"))
    return out


def initiator(r: Received) -> list[Refusal]:
    """What an erdma initiator refuses in the reply ``r`` (erdma_proc_mpareply; a reject
    that passes the read and the key is not a refusal: it is the responder's answer,
    CONNECT_REPLY -ECONNRESET). The checks do not depend on the request: erdma
    negotiates nothing."""
    stack = NAME
    rep = r.frame
    out = _read("initiator", r)
    if out:
        return out
    if not _key_ok(rep, False):
        return [Refusal(stack, "initiator", RULE_KEY, "erdma_proc_mpareply", rep.frame,
                        "the reply does not carry the key \"MPA ID Rep Frame\"",
                        f"-EPROTO, out_err, {_released(False)}", -errno.EINVAL)]
    if rep.reject:
        return out
    names = "+".join(n for bit, n in ((FLAG_MARKERS, "M"), (FLAG_CRC, "C"))
                     if rep.flags & bit)
    if names:
        out.append(Refusal(stack, "initiator", _flag_rule(rep), "erdma_proc_mpareply",
                           rep.frame, f"reply sets {names}: erdma supports neither "
                           "markers nor CRC", "-EINVAL, socket released",
                           -errno.ECONNREFUSED))
    return out
