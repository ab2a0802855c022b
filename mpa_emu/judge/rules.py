"""What each stack refuses in the MPA frame it receives, with the kernel function that
refuses it and what the peer then sees.

The responder reads the request (irdma_parse_mpa and irdma_negotiate_mpa_v2_ird_ord,
siw_proc_mpareq, process_mpa_request); the initiator reads the reply (the same irdma
functions, siw_proc_mpareply, process_mpa_reply). :func:`responder_refusals` and
:func:`initiator_refusals` list, for one stack, every rule the frame breaks, as
:class:`Refusal` records. They say nothing about severity: the caller decides from who
the receiving side is (:mod:`mpa_emu.views.inspection.judging`).
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mpa_emu.judge.model import Refusal
from mpa_emu.judge.stacks import CXGB4, FACTS, IRDMA, SIW
from mpa_emu.wire.mpa import FLAG_ENHANCED, FLAG_MARKERS, FRAME_SIZE, IRD_ORD_MASK, RTR_MSG_SIZE

if TYPE_CHECKING:
    from mpa_emu.judge.shapes import MpaFrameLike as MpaInfo

IRDMA_MAX_CM_BUF = 544
"""IRDMA_MAX_CM_BUF: irdma_parse_mpa refuses a longer payload."""

# Catalogue keys (docs/explain.md): one per kind of refusal.
RULE_SPLIT = "split-frame"
RULE_CM_BUFFER = "pd-over-limit"
RULE_PD_LIMIT = "pd-over-limit"
RULE_REV = "revision"
RULE_NO_P2P = "no-p2p"
RULE_RTR = "rtr-mismatch"
RULE_IRD_ORD = "ird-ord"
RULE_MARKERS = "markers"
RULE_EXTRA = "extra-bytes"
RULE_KEY = "wrong-key"
RULE_ENHANCED = "revision"


@dataclass(frozen=True, slots=True)
class Received:
    """The frame as the receiving side read it: the frame, the request it answers (for a
    reply), the bytes of its first segment and the bytes after it in its last one."""

    frame: MpaInfo
    request: MpaInfo | None
    first_segment: int
    trailing: int


def _common(stack: str, role: str, r: Received) -> list[Refusal]:
    """Limits every kernel stack checks on a request and a reply alike."""
    m = r.frame
    out: list[Refusal] = []
    what = "request" if m.request else "reply"
    facts = FACTS[stack]
    initiator = role == "initiator"
    if stack == IRDMA:
        # irdma_parse_mpa, in its order: PD_Length over IETF_MAX_PRIV_DATA_LEN ("CM: large
        # pri_data"), a revision other than 1 or 2, a reply above the request's revision,
        # (the key: inspect's wrong-key), the frame longer than the segment ("ietf buffer
        # len", no reassembly), then a segment over IRDMA_MAX_CM_BUF. -EOVERFLOW or
        # -EINVAL, the node is reset.
        status = -errno.ECONNRESET if initiator else None
        reply = "RST"
        if m.pd_length > facts.max_pd_length:
            out.append(Refusal(stack, role, RULE_PD_LIMIT, "irdma_parse_mpa", m.frame,
                               f"PD_Length {m.pd_length} over irdma's "
                               f"{facts.max_pd_length}", f"-EOVERFLOW, {reply}", status,
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
    if stack == SIW:
        # siw_recv_mpa_rr / siw_proc_mpareq / siw_proc_mpareply: -EPROTO.
        status = -errno.EINVAL if initiator else None
        # sock_release: a RST when received bytes are left unread (tcp_close), else a FIN.
        reply = "socket released (RST with bytes unread, else FIN)"
        fn = "siw_proc_mpareply" if initiator else "siw_proc_mpareq"
        if m.pd_length > facts.max_pd_length:
            out.append(Refusal(stack, role, RULE_PD_LIMIT, "siw_recv_mpa_rr", m.frame,
                               f"PD_Length {m.pd_length} over siw's MPA_MAX_PRIVDATA "
                               f"({facts.max_pd_length})", f"-EPROTO, {reply}", status))
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
    if stack == CXGB4:
        status = -errno.EPROTO if initiator else None
        fn = "process_mpa_reply" if initiator else "process_mpa_request"
        reply = "abort (RST)"
        if m.rev > 2:
            out.append(Refusal(stack, role, RULE_REV, fn, m.frame,
                               f"MPA rev {m.rev} above iw_cxgb4 mpa_rev (2)",
                               f"{reply}", status,
                               log=f"{fn} MPA version mismatch. Local = 2, Received = "
                                   f"{m.rev}"))
        if m.pd_length > facts.max_pd_length:
            out.append(Refusal(stack, role, RULE_PD_LIMIT, fn, m.frame,
                               f"PD_Length {m.pd_length} over cxgb4's MPA_MAX_PRIVATE_DATA "
                               f"({facts.max_pd_length})", reply, status))
        if r.trailing > 0:
            out.append(Refusal(stack, role, RULE_EXTRA, fn, m.frame,
                               f"{r.trailing} bytes follow the MPA {what} in its segment "
                               "(\"plen does not account for pkt size\")", reply, status))
    return out


def responder_refusals(stack: str, r: Received) -> list[Refusal]:
    """What a ``stack`` responder refuses in the request ``r``."""
    if stack not in FACTS:
        return []
    req = r.frame
    out = _common(stack, "responder", r)
    if stack == IRDMA:
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
    elif stack == SIW:
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


def initiator_refusals(stack: str, r: Received) -> list[Refusal]:
    """What a ``stack`` initiator refuses in the reply ``r`` (a reject is not a
    refusal: it is the responder's answer)."""
    if stack not in FACTS:
        return []
    rep, req = r.frame, r.request
    out = _common(stack, "initiator", r)
    if req is None:
        return out
    if stack == IRDMA:
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
    elif stack == SIW and not rep.reject:
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
    elif stack == CXGB4 and not rep.reject and req.p2p and rep.rev == 2:
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
