"""What siw refuses in the MPA frame it receives, with the kernel function that
refuses it and what the peer then sees (siw_recv_mpa_rr, siw_proc_mpareq, siw_proc_mpareply).
The judge applies the rules (:mod:`mpa_emu.judge.rules`, through :attr:`Stack.refusals
<mpa_emu.stacks.base.Stack.refusals>`); they say nothing about severity."""

from __future__ import annotations

import errno

from mpa_emu.stacks.refusals import (
    RULE_ENHANCED,
    RULE_EXTRA,
    RULE_MARKERS,
    RULE_PD_LIMIT,
    RULE_REV,
    RULE_RTR,
    Received,
    Refusal,
)
from mpa_emu.stacks.siw.facts import FACTS
from mpa_emu.wire.mpa import FLAG_ENHANCED, FLAG_MARKERS, RTR_MSG_SIZE

NAME = "siw"


def _common(role: str, r: Received) -> list[Refusal]:
    """Limits siw checks on a request and a reply alike."""
    stack = NAME
    m = r.frame
    out: list[Refusal] = []
    what = "request" if m.request else "reply"
    initiator = role == "initiator"
    # siw_recv_mpa_rr / siw_proc_mpareq / siw_proc_mpareply: -EPROTO.
    status = -errno.EINVAL if initiator else None
    # sock_release: a RST when received bytes are left unread (tcp_close), else a FIN.
    reply = "socket released (RST with bytes unread, else FIN)"
    fn = "siw_proc_mpareply" if initiator else "siw_proc_mpareq"
    if m.pd_length > FACTS.max_pd_length:
        out.append(Refusal(stack, role, RULE_PD_LIMIT, "siw_recv_mpa_rr", m.frame,
                           f"PD_Length {m.pd_length} over siw's MPA_MAX_PRIVDATA "
                           f"({FACTS.max_pd_length})", f"-EPROTO, {reply}", status))
    # siw_recv_mpa_rr reads the frame (the PD_Length limit, then bytes past it)
    # before siw_proc_mpareq / siw_proc_mpareply look at the revision.
    if r.trailing > 0:
        out.append(Refusal(stack, role, RULE_EXTRA, "siw_recv_mpa_rr", m.frame,
                           f"{r.trailing} bytes follow the MPA {what} in its segment: "
                           "siw reads exactly the frame and takes more as a protocol "
                           "violation", f"-EPROTO, {reply}", status))
    if m.rev > 2:
        out.append(Refusal(stack, role, RULE_REV, fn, m.frame,
                           f"MPA rev {m.rev} (siw allows 0, 1 and 2)",
                           f"-EPROTO, {reply}", status))
    return out


def responder(r: Received) -> list[Refusal]:
    """What a siw responder refuses in the request ``r``."""
    stack = NAME
    req = r.frame
    out = _common("responder", r)
    # siw_proc_mpareq: an enhanced request too short for the RFC 6581 block is
    # refused before it looks at the M flag.
    if req.rev == 2 and req.flags & FLAG_ENHANCED and req.pd_length < RTR_MSG_SIZE:
        out.append(Refusal(stack, "responder", RULE_ENHANCED, "siw_proc_mpareq",
                           req.frame, "enhanced flag with fewer than 4 bytes of "
                           "private data", "reject (R) reply, no upcall"))
    if req.flags & FLAG_MARKERS:
        out.append(Refusal(stack, "responder", RULE_MARKERS, "siw_proc_mpareq", req.frame,
                           "request asks for markers (M): siw does not support them",
                           "reject (R) reply, -EOPNOTSUPP, no upcall"))
    return out


def initiator(r: Received) -> list[Refusal]:
    """What a siw initiator refuses in the reply ``r`` (a reject is not a refusal:
    it is the responder's answer)."""
    stack = NAME
    rep, req = r.frame, r.request
    out = _common("initiator", r)
    if req is None:
        return out
    if rep.reject:
        return out
    if rep.flags & FLAG_MARKERS:
        out.append(Refusal(stack, "initiator", RULE_MARKERS, "siw_proc_mpareply",
                           rep.frame, "reply asks for markers (M)", "socket closed",
                           -errno.ECONNREFUSED))
    if req.has_block and (rep.rev < 2 or not rep.flags & FLAG_ENHANCED):
        out.append(Refusal(stack, "initiator", RULE_REV, "siw_proc_mpareply", rep.frame,
                           f"enhanced request answered by a rev {rep.rev} reply "
                           f"{'with' if rep.flags & FLAG_ENHANCED else 'without'} the "
                           "enhanced flag", "socket closed", -errno.ECONNRESET,
                           log="mpa reply error: vers"))
    offered = {n for n in req.rtr_names() if n in ("write", "read")}
    if req.p2p and offered and rep.has_block:
        chosen = {n for n in rep.rtr_names() if n in ("write", "read")}
        if not chosen & offered:
            out.append(Refusal(stack, "initiator", RULE_RTR, "siw_proc_mpareply",
                               rep.frame, f"P2P request offered {'+'.join(sorted(offered))}"
                               f" RTR, the reply chose "
                               f"{'+'.join(sorted(chosen)) or 'none'}",
                               "Terminate (LLP, MPA, no matching RTR), socket closed",
                               -errno.EINVAL, log="rtr mode:  req"))
    return out
