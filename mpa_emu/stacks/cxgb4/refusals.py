"""What cxgb4 refuses in the MPA frame it receives, with the kernel function that
refuses it and what the peer then sees (process_mpa_request, process_mpa_reply).
The judge applies the rules (:mod:`mpa_emu.judge.rules`, through :attr:`Stack.refusals
<mpa_emu.stacks.base.Stack.refusals>`); they say nothing about severity."""

from __future__ import annotations

import errno

from mpa_emu.stacks.cxgb4.facts import FACTS
from mpa_emu.stacks.refusals import (
    RULE_EXTRA,
    RULE_NO_P2P,
    RULE_PD_LIMIT,
    RULE_REV,
    RULE_RTR,
    Received,
    Refusal,
)

NAME = "cxgb4"


def _common(role: str, r: Received) -> list[Refusal]:
    """Limits cxgb4 checks on a request and a reply alike."""
    stack = NAME
    m = r.frame
    out: list[Refusal] = []
    what = "request" if m.request else "reply"
    initiator = role == "initiator"
    status = -errno.EPROTO if initiator else None
    fn = "process_mpa_reply" if initiator else "process_mpa_request"
    reply = "abort (RST)"
    if m.rev > 2:
        out.append(Refusal(stack, role, RULE_REV, fn, m.frame,
                           f"MPA rev {m.rev} above iw_cxgb4 mpa_rev (2)",
                           f"{reply}", status,
                           log=f"{fn} MPA version mismatch. Local = 2, Received = "
                               f"{m.rev}"))
    if m.pd_length > FACTS.max_pd_length:
        out.append(Refusal(stack, role, RULE_PD_LIMIT, fn, m.frame,
                           f"PD_Length {m.pd_length} over cxgb4's MPA_MAX_PRIVATE_DATA "
                           f"({FACTS.max_pd_length})", reply, status))
    if r.trailing > 0:
        out.append(Refusal(stack, role, RULE_EXTRA, fn, m.frame,
                           f"{r.trailing} bytes follow the MPA {what} in its segment "
                           "(\"plen does not account for pkt size\")", reply, status))
    return out


def responder(r: Received) -> list[Refusal]:
    """What a cxgb4 responder refuses in the request ``r``."""
    return _common("responder", r)


def initiator(r: Received) -> list[Refusal]:
    """What a cxgb4 initiator refuses in the reply ``r`` (a reject is not a refusal:
    it is the responder's answer)."""
    stack = NAME
    rep, req = r.frame, r.request
    out = _common("initiator", r)
    if req is None:
        return out
    if rep.reject or not req.p2p or rep.rev != 2:
        return out
    # process_mpa_reply: peer2peer and the reply's p2p_type differs from the
    # one requested: RTR mismatch, Terminate, connect_reply_upcall(-ENOMEM).
    asked = "write" if req.write_rtr else "read" if req.read_rtr else None
    got = None
    if rep.has_block and rep.p2p:
        got = "write" if rep.write_rtr else "read" if rep.read_rtr else None
    if asked is not None and got != asked:
        out.append(Refusal(stack, "initiator", RULE_RTR if rep.p2p else RULE_NO_P2P,
                           "process_mpa_reply", rep.frame,
                           f"RTR mismatch: it asked for the {asked} RTR, the reply "
                           + (f"chose {got}" if got else
                              "has no P2P" if not rep.p2p else "chose none"),
                           "Terminate (MPA, MPA_NOMATCH_RTR), disconnect",
                           -errno.ENOMEM, log="RTR mismatch, sending TERM"))
    return out
