"""What qedr refuses in the MPA frame it receives, with the function that reports it and
what the peer then sees.

qed never reads an MPA frame: the adapter's firmware does, and reports what it refuses as
the ``fw_return_code`` of an async event (qed_iwarp_async_event). qed_iwarp_connect_complete
takes the passive side's request (a failure goes to qed_iwarp_tcp_connect_unsuccessful,
which returns the ep to the free list with no event), qed_iwarp_mpa_complete the active
side's reply (CONNECT_REPLY with its status). Which frames the firmware refuses is the
model's reading of the return codes the driver knows (:mod:`mpa_emu.stacks.qedr.firmware`,
docs/stacks/qedr.md): a revision above 2 is IWARP_CONN_ERROR_MPA_NOT_SUPPORTED_VER,
revision 0, a PD_Length over the 512-byte ``in_pdata`` (QED_MAX_PRIV_DATA_LEN, the
``incoming_ulp_buffer`` qed_iwarp_tcp_offload and qed_iwarp_mpa_offload hand it) and an
enhanced frame too short for the RFC 6581 block are IWARP_CONN_ERROR_MPA_INVALID_PACKET,
a reply offering no RTR type the request offered IWARP_CONN_ERROR_MPA_RTR_MISMATCH, a reply
IRD below the request's ORD IWARP_CONN_ERROR_MPA_INSUF_IRD. Markers, bytes after the frame
and a frame split over segments are not refused (the firmware reads the stream; it never
sets M and the driver has no markers setting to refuse them by).

The judge applies the rules (:mod:`mpa_emu.judge.rules`, through :attr:`Stack.refusals
<mpa_emu.stacks.base.Stack.refusals>`); they say nothing about severity.
"""

from __future__ import annotations

import errno

from mpa_emu.stacks.qedr.facts import FACTS
from mpa_emu.stacks.qedr.qed_iwarp import MPA_COMPLETE_STATUS
from mpa_emu.stacks.qedr.states import (
    MPA_INSUF_IRD,
    MPA_INVALID_PACKET,
    MPA_NOT_SUPPORTED_VER,
    MPA_RTR_MISMATCH,
)
from mpa_emu.stacks.refusals import (
    RULE_ENHANCED,
    RULE_IRD_ORD,
    RULE_PD_LIMIT,
    RULE_REV,
    RULE_RTR,
    MpaFrameLike,
    Received,
    Refusal,
)
from mpa_emu.wire.mpa import FLAG_ENHANCED, RTR_MSG_SIZE

NAME = "qedr"

_PASSIVE_FN = "qed_iwarp_tcp_connect_unsuccessful"
"""Where the passive side's firmware failure ends: the ep back to the free list, no
event to qedr (qed_iwarp_connect_complete: "If connect failed - upper layer doesn't
know about it")."""
_ACTIVE_FN = "qed_iwarp_mpa_complete"
"""Where the active side's firmware failure ends: ACTIVE_COMPLETE with its status."""
_RST = "the firmware resets the connection (RST)"

_RTR_WORDS = ("send", "write", "read")


def _status(code: str) -> int:
    """qed_iwarp_mpa_complete's status for ``code`` (``default``: -ECONNRESET)."""
    return MPA_COMPLETE_STATUS.get(code, (-errno.ECONNRESET, ""))[0]


def _frame_checks(m: MpaFrameLike) -> list[tuple[str, str, str]]:
    """The firmware's checks of an MPA request or reply header, in its order (firmware
    ``_frame``): (rule, return code, words)."""
    what = "request" if m.request else "reply"
    out: list[tuple[str, str, str]] = []
    if m.rev > 2:
        out.append((RULE_REV, MPA_NOT_SUPPORTED_VER,
                    f"MPA rev {m.rev} (the firmware takes 1, MPA_NEGOTIATION_TYPE_BASIC, "
                    "and 2, MPA_NEGOTIATION_TYPE_ENHANCED)"))
    elif m.rev == 0:
        out.append((RULE_REV, MPA_INVALID_PACKET,
                    "MPA rev 0 (the firmware takes 1 and 2)"))
    if m.pd_length > FACTS.max_pd_length:
        out.append((RULE_PD_LIMIT, MPA_INVALID_PACKET,
                    f"PD_Length {m.pd_length} over the {FACTS.max_pd_length}-byte "
                    f"in_pdata the firmware reads the {what}'s private data into "
                    "(QED_MAX_PRIV_DATA_LEN)"))
    if m.rev == 2 and m.flags & FLAG_ENHANCED and m.pd_length < RTR_MSG_SIZE:
        out.append((RULE_ENHANCED, MPA_INVALID_PACKET,
                    f"enhanced {what} (S) with {m.pd_length} bytes of private data, too "
                    "few for the RFC 6581 block"))
    return out


def responder(r: Received) -> list[Refusal]:
    """What a qedr responder's firmware refuses in the request ``r``: the ULP never hears
    of it (qed_iwarp_tcp_connect_unsuccessful on the passive side)."""
    req = r.frame
    out: list[Refusal] = []
    for rule, code, text in _frame_checks(req):
        line = ("MPA not supported VER" if code == MPA_NOT_SUPPORTED_VER
                else "MPA Invalid Packet")
        out.append(Refusal(NAME, "responder", rule, _PASSIVE_FN, req.frame, text,
                           f"{code}: {_RST}, no upcall",
                           log=f"Passive(0x%x) {line} ({_PASSIVE_FN}, DP_NOTICE)"))
    return out


def initiator(r: Received) -> list[Refusal]:
    """What a qedr initiator's firmware refuses in the reply ``r`` (a reject is not a
    refusal: it is the responder's answer, IWARP_CONN_ERROR_MPA_ERROR_REJECT)."""
    rep, req = r.frame, r.request
    out: list[Refusal] = []
    for rule, code, text in _frame_checks(rep):
        status, line = MPA_COMPLETE_STATUS.get(code, (-errno.ECONNRESET, ""))
        log = (f"Active(0x%x) {line} ({_ACTIVE_FN}, DP_NOTICE)" if line
               else f"no line: {_ACTIVE_FN} has no case for {code} (default: -ECONNRESET)")
        out.append(Refusal(NAME, "initiator", rule, _ACTIVE_FN, rep.frame, text,
                           f"{code}: {_RST}", status, log=log))
    if out or req is None or rep.reject or not rep.has_block:
        return out
    # fw_check_reply: an enhanced reply's block against what the request offered.
    offered = {n for n in req.rtr_names() if n in _RTR_WORDS} if req.p2p else set()
    if rep.p2p and offered:
        chosen = {n for n in rep.rtr_names() if n in _RTR_WORDS}
        if not chosen & offered:
            out.append(Refusal(NAME, "initiator", RULE_RTR, _ACTIVE_FN, rep.frame,
                               f"the request offered the {'+'.join(sorted(offered))} RTR, "
                               f"the reply {'+'.join(sorted(chosen)) or 'none'}",
                               f"{MPA_RTR_MISMATCH}: {_RST}", _status(MPA_RTR_MISMATCH),
                               log=f"Active(0x%x) MPA RTR MISMATCH ({_ACTIVE_FN}, "
                                   "DP_NOTICE)"))
    if req.has_block and rep.ird is not None and req.ord is not None \
            and rep.ird < req.ord:
        out.append(Refusal(NAME, "initiator", RULE_IRD_ORD, _ACTIVE_FN, rep.frame,
                           f"responder IRD {rep.ird} below the initiator's ORD {req.ord}",
                           f"{MPA_INSUF_IRD}: {_RST}", _status(MPA_INSUF_IRD),
                           log=f"Active(0x%x) MPA insufficient ird ({_ACTIVE_FN}, "
                               "DP_NOTICE)"))
    return out
