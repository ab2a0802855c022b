"""What each iWARP stack does with the MPA frames it receives, as facts from its source.

One :class:`StackFacts` per stack a capture's side can be judged as. The numbers and the
functions that enforce them come from the kernel: irdma (drivers/infiniband/hw/irdma/cm.c),
siw (drivers/infiniband/sw/siw/siw_cm.c, siw_cm.h, iwarp.h) and cxgb4
(drivers/infiniband/hw/cxgb4/cm.c). ``linux-userspace`` is an iWARP library over ordinary
sockets (SoftUiWarp and the like): no kernel rules are known for it, so nothing is ever
refused in its name; ``unknown`` is a side the capture does not tell.
"""

from __future__ import annotations

from dataclasses import dataclass

IRDMA = "irdma"
SIW = "siw"
CXGB4 = "cxgb4"
LINUX_USERSPACE = "linux-userspace"
UNKNOWN = "unknown"

STACK_NAMES = (IRDMA, SIW, CXGB4, LINUX_USERSPACE, UNKNOWN)
"""Every name a side can be judged as (and a ``--profile`` may give)."""

KERNEL_STACKS = (IRDMA, SIW, CXGB4)
"""The stacks whose refusals are known from their kernel source."""


@dataclass(frozen=True, slots=True)
class StackFacts:
    """One stack's limits and timers as its source states them."""

    name: str
    title: str
    max_pd_length: int
    """Largest PD_Length it takes in a request or reply (RFC 6581 block included)."""
    pd_limit_fn: str
    reassembles: bool
    """Reads an MPA request/reply that TCP delivered over several segments."""
    reassembly_fn: str
    mpa_timer: str
    """Who times the MPA exchange, and how long."""
    mpa_timer_fix: str
    log_prefix: str
    """How its kernel log lines start (what to grep for)."""


FACTS: dict[str, StackFacts] = {
    IRDMA: StackFacts(
        name=IRDMA, title="Intel E810/X722 (irdma)",
        # irdma_parse_mpa: PD_Length > IETF_MAX_PRIV_DATA_LEN (512) -> -EOVERFLOW.
        max_pd_length=512, pd_limit_fn="irdma_parse_mpa",
        # irdma_parse_mpa reads one segment's payload: no reassembly, -EOVERFLOW.
        reassembles=False, reassembly_fn="irdma_parse_mpa",
        mpa_timer="no MPA timer: the initiator's wait for the reply is the CM "
                  "retransmission schedule of the request (irdma_cm_timer_tick: RST and "
                  "CONNECT_REPLY -ECONNRESET at expiry); a responder that never gets a "
                  "request waits for ever",
        mpa_timer_fix="find why the reply never came: the peer's kernel log, its "
                      "listener and its MPA checks",
        log_prefix="irdma", ),
    SIW: StackFacts(
        name=SIW, title="Soft-iWARP (siw)",
        # siw_recv_mpa_rr: PD_Length > MPA_MAX_PRIVDATA (RDMA_MAX_PRIVATE_DATA, 256).
        max_pd_length=256, pd_limit_fn="siw_recv_mpa_rr",
        reassembles=True, reassembly_fn="siw_recv_mpa_rr",
        # siw_cm.h: MPAREQ_TIMEOUT (HZ * 10) while AWAIT_MPAREP, MPAREP_TIMEOUT (HZ * 5)
        # while AWAIT_MPAREQ (siw_cm_queue_work).
        mpa_timer="siw's MPA timer (siw_cm_work_handler, SIW_CM_WORK_MPATIMEOUT): 10 s "
                  "for the initiator awaiting the reply (MPAREQ_TIMEOUT: CONNECT_REPLY "
                  "-ETIMEDOUT), 5 s for the responder awaiting the request "
                  "(MPAREP_TIMEOUT: the socket is closed, no upcall)",
        mpa_timer_fix="the timers are constants in siw_cm.h (a rebuilt siw changes "
                      "them); make the peer answer in time",
        log_prefix="siw", ),
    CXGB4: StackFacts(
        name=CXGB4, title="Chelsio T4/T5/T6 (iw_cxgb4)",
        # process_mpa_request / process_mpa_reply: plen > MPA_MAX_PRIVATE_DATA (256).
        max_pd_length=256, pd_limit_fn="process_mpa_request, process_mpa_reply",
        reassembles=True, reassembly_fn="process_mpa_request, process_mpa_reply",
        # ep_timeout_secs (module parameter, default 60): ep_timeout -> process_timeout.
        mpa_timer="cxgb4's endpoint timer (ep_timeout -> process_timeout, module "
                  "parameter ep_timeout_secs, 60 s by default): CONNECT_REPLY "
                  "-ETIMEDOUT for the initiator, an abort for the responder",
        mpa_timer_fix="iw_cxgb4 ep_timeout_secs=N (module parameter) if the peer is "
                      "slow, else make the peer answer",
        log_prefix="iw_cxgb4", ),
}


def limit_of(stack: str) -> int | None:
    """The PD_Length limit of a kernel stack, None for the others."""
    facts = FACTS.get(stack)
    return facts.max_pd_length if facts is not None else None
