"""What irdma refuses in the MPA frame it receives, with the kernel function that
refuses it and what the peer then sees (irdma_parse_mpa, irdma_negotiate_mpa_v2_ird_ord).
The judge applies the rules (:mod:`mpa_emu.judge.rules`, through :attr:`Stack.refusals
<mpa_emu.stacks.base.Stack.refusals>`); they say nothing about severity."""

from __future__ import annotations

import errno

from mpa_emu.stacks.refusals import (
    RULE_CM_BUFFER,
    RULE_IRD_ORD,
    RULE_NO_P2P,
    RULE_PD_LIMIT,
    RULE_REV,
    RULE_RTR,
    RULE_SPLIT,
    Received,
    Refusal,
)
from mpa_emu.wire.mpa import FRAME_SIZE, IRD_ORD_MASK, RTR_MSG_SIZE

IRDMA_MAX_CM_BUF = 544
"""IRDMA_MAX_CM_BUF: irdma_parse_mpa refuses a longer payload."""
MAX_PD_LENGTH = 512
"""IETF_MAX_PRIV_DATA_LEN: irdma_parse_mpa refuses a longer PD_Length (-EOVERFLOW)."""

NAME = "irdma"


def _common(role: str, r: Received) -> list[Refusal]:
    """Limits irdma checks on a request and a reply alike."""
    stack = NAME
    m = r.frame
    out: list[Refusal] = []
    what = "request" if m.request else "reply"
    initiator = role == "initiator"
    # irdma_parse_mpa, in its order: PD_Length over IETF_MAX_PRIV_DATA_LEN ("CM: large
    # pri_data"), a revision other than 1 or 2, a reply above the request's revision,
    # (the key: inspect's wrong-key), the frame longer than the segment ("ietf buffer
    # len", no reassembly), then a segment over IRDMA_MAX_CM_BUF. -EOVERFLOW or
    # -EINVAL, the node is reset.
    status = -errno.ECONNRESET if initiator else None
    reply = "RST"
    if m.pd_length > MAX_PD_LENGTH:
        out.append(Refusal(stack, role, RULE_PD_LIMIT, "irdma_parse_mpa", m.frame,
                           f"PD_Length {m.pd_length} over irdma's "
                           f"{MAX_PD_LENGTH}", f"-EOVERFLOW, {reply}", status,
                           log=f"irdma: CM: large pri_data {m.pd_length} (ibdev_dbg: "
                               "dynamic debug of cm.c)"))
    if m.rev not in (1, 2):
        out.append(Refusal(stack, role, RULE_REV, "irdma_parse_mpa", m.frame,
                           f"MPA rev {m.rev} (irdma takes 1 and 2)", f"-EINVAL, {reply}",
                           status))
    elif initiator and r.request is not None and m.rev > r.request.rev:
        out.append(Refusal(stack, "initiator", RULE_REV, "irdma_parse_mpa", m.frame,
                           f"reply rev {m.rev} above the request's rev "
                           f"{r.request.rev}", f"-EINVAL, {reply}", status))
    if r.first_segment < FRAME_SIZE + min(m.pd_length, 512):
        out.append(Refusal(stack, role, RULE_SPLIT, "irdma_parse_mpa", m.frame,
                           f"MPA {what} split over segments ({r.first_segment} bytes "
                           f"in the first, {FRAME_SIZE + m.pd_length} needed): irdma "
                           "has no reassembly", f"-EOVERFLOW, {reply}", status))
    if r.first_segment > IRDMA_MAX_CM_BUF:
        out.append(Refusal(stack, role, RULE_CM_BUFFER, "irdma_parse_mpa", m.frame,
                           f"segment with the MPA {what} carries {r.first_segment} "
                           f"bytes, over irdma's {IRDMA_MAX_CM_BUF}",
                           f"-EOVERFLOW, {reply}", status))
    return out


def responder(r: Received) -> list[Refusal]:
    """What a irdma responder refuses in the request ``r``."""
    stack = NAME
    req = r.frame
    out = _common("responder", r)
    if req.rev == 2 and not req.has_block and len(req.private_data) >= RTR_MSG_SIZE \
            and not req.private_data[0] & 0x80:
        # irdma_parse_mpa looks at Rev only: rev 2 without S still has its first
        # private data bytes read as the RFC 6581 block, here without the A bit.
        out.append(Refusal(stack, "responder", RULE_NO_P2P,
                           "irdma_negotiate_mpa_v2_ird_ord", req.frame,
                           "rev 2 request without the enhanced flag: irdma reads its "
                           "first 4 private data bytes as the RFC 6581 block, which "
                           "has no P2P (A)", "-EOPNOTSUPP, RST, no upcall"))
    if req.rev == 2 and req.has_block:
        # irdma_negotiate_mpa_v2_ird_ord: no A bit, or neither RTR: -EOPNOTSUPP.
        if not req.p2p:
            out.append(Refusal(stack, "responder", RULE_NO_P2P,
                               "irdma_negotiate_mpa_v2_ird_ord", req.frame,
                               "request without P2P (A)", "-EOPNOTSUPP, RST, no upcall"))
        elif not (req.write_rtr or req.read_rtr):
            out.append(Refusal(stack, "responder", RULE_RTR,
                               "irdma_negotiate_mpa_v2_ird_ord", req.frame,
                               "request offers neither the Read nor the Write RTR",
                               "-EOPNOTSUPP, RST, no upcall"))
    return out


def initiator(r: Received) -> list[Refusal]:
    """What a irdma initiator refuses in the reply ``r`` (a reject is not a refusal:
    it is the responder's answer)."""
    stack = NAME
    rep, req = r.frame, r.request
    out = _common("initiator", r)
    if req is None:
        return out
    reset = -errno.ECONNRESET
    if rep.rev == 2 and rep.has_block:
        assert rep.ird is not None and rep.ord is not None
        fn = "irdma_negotiate_mpa_v2_ird_ord"
        if not rep.p2p:
            out.append(Refusal(stack, "initiator", RULE_NO_P2P, fn, rep.frame,
                               "reply without P2P (A)", "-EOPNOTSUPP, RST", reset))
        elif not rep.reject:
            if rep.ird == 0 and rep.read_rtr:
                out.append(Refusal(stack, "initiator", RULE_IRD_ORD, fn, rep.frame,
                                   "responder IRD 0 with the Read RTR chosen",
                                   "-EOPNOTSUPP, RST", reset))
            # irdma_negotiate_mpa_v2_ird_ord compares the reply's ORD with the
            # initiator's own ird_size, which the wire shows only in the request's
            # RFC 6581 block: a request without one (rev 1, or rev 2 without S)
            # leaves that check unknown; the reply's own checks still apply.
            no_value = req.ird is None or req.ord is None \
                or IRD_ORD_MASK in (req.ird, req.ord, rep.ird, rep.ord)
            if not no_value and req.ird is not None and req.ird < rep.ord:
                out.append(Refusal(stack, "initiator", RULE_IRD_ORD, fn, rep.frame,
                                   f"initiator IRD {req.ird} below responder ORD "
                                   f"{rep.ord}", "-EINVAL, RST", reset))
            if not (rep.write_rtr or rep.read_rtr):
                out.append(Refusal(stack, "initiator", RULE_RTR, fn, rep.frame,
                                   "reply chooses neither the Read nor the Write RTR",
                                   "-EOPNOTSUPP, RST", reset))
    return out
