"""What each stack refuses in the MPA frame it receives, with the kernel function that
refuses it and what the peer then sees.

The responder reads the request (irdma_parse_mpa and irdma_negotiate_mpa_v2_ird_ord,
siw_proc_mpareq, process_mpa_request); the initiator reads the reply (the same irdma
functions, siw_proc_mpareply, process_mpa_reply). :func:`responder_refusals` and
:func:`initiator_refusals` list, for one stack, every rule the frame breaks, as
:class:`Refusal` records: each stack's own rules (:attr:`Stack.refusals
<mpa_emu.stacks.base.Stack.refusals>`, in its folder's ``refusals.py``), none for a side
judged as a stack the registry lacks. They say nothing about severity: the caller decides from who
the receiving side is (:mod:`mpa_emu.views.inspection.judging`).
"""

from __future__ import annotations

from mpa_emu.stacks import STACKS
from mpa_emu.stacks.refusals import (
    RULE_CM_BUFFER,
    RULE_ENHANCED,
    RULE_EXTRA,
    RULE_IRD_ORD,
    RULE_KEY,
    RULE_MARKERS,
    RULE_NO_P2P,
    RULE_PD_LIMIT,
    RULE_REV,
    RULE_RTR,
    RULE_SPLIT,
    Received,
    Refusal,
)


def responder_refusals(stack: str, r: Received) -> list[Refusal]:
    """What a ``stack`` responder refuses in the request ``r``."""
    st = STACKS.get(stack)
    return st.refusals.responder(r) if st is not None else []


def initiator_refusals(stack: str, r: Received) -> list[Refusal]:
    """What a ``stack`` initiator refuses in the reply ``r`` (a reject is not a
    refusal: it is the responder's answer)."""
    st = STACKS.get(stack)
    return st.refusals.initiator(r) if st is not None else []


__all__ = ["RULE_CM_BUFFER", "RULE_ENHANCED", "RULE_EXTRA", "RULE_IRD_ORD", "RULE_KEY",
           "RULE_MARKERS", "RULE_NO_P2P", "RULE_PD_LIMIT", "RULE_REV", "RULE_RTR",
           "RULE_SPLIT", "Received", "Refusal", "initiator_refusals", "responder_refusals"]
