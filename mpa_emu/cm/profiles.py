"""Peer profiles: the CM configuration of kinds of iWARP peer other than irdma.

Each profile is a function returning a :class:`~mpa_emu.stacks.irdma.config.CmConfig`; keyword
arguments override any field (``siw(retrans=8)``). A scenario names a profile per host
(``profile = "siw"``). The differences are listed in each docstring with their source:
the reference's section 10 (a reading of ``drivers/infiniband/sw/siw/siw_cm.c``) and
section 4 for irdma itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, replace
from typing import Any

from mpa_emu.stacks.irdma.config import CmConfig, Quirks


def _build(base: CmConfig, overrides: dict[str, Any]) -> CmConfig:
    known = {f.name for f in fields(CmConfig)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"unknown CmConfig field(s): {', '.join(unknown)}")
    return replace(base, **overrides)


def irdma(**overrides: Any) -> CmConfig:
    """The Linux irdma driver, mainline cm.c on GEN_2 (E810): the default.

    - MPA rev 2 requests, falling back to rev 1 once on a RST (irdma_handle_rst_pkt).
    - Always advertises P2P and requires it in any received v2 frame
      (irdma_build_mpa_v2, irdma_negotiate_mpa_v2_ird_ord: -EOPNOTSUPP otherwise).
    - Offers both zero-length RDMA Write and Read as RTR and, as responder, picks Read.
    - Reports v2 private data with the 4-byte block and 4 bytes more (irdma_parse_mpa).
    - Honours M in a received request by adding send markers.
    Source: reference sections 4.2 to 4.5.
    """
    return _build(CmConfig(), overrides)


def siw(**overrides: Any) -> CmConfig:
    """irdma's CM configured to behave like a soft-iWARP (siw) peer with its defaults.

    This is an approximation kept for replay (``--profile siw``) and for scenarios that
    set ``profile = "siw"`` on an irdma host. The real siw stack, with siw_cm.c's own
    states, MPA timers and Linux TCP underneath, is ``stack = "siw"``
    (:mod:`mpa_emu.stacks.siw`, docs/stacks/siw.md).

    Differences from irdma (reference section 10, from siw_cm.c):

    - ``p2p = False``: siw's ``peer_to_peer`` parameter defaults to false, so its v2
      frames carry no A bit; an irdma responder resets such a request.
    - ``rtr_preference = "write"``: on a P2P request siw picks the zero-length RDMA Write
      RTR when offered, then Read (irdma picks Read first).
    - ``quirks.v2_pdata_plus4 = False``: siw hands the ULP the private data without the
      4-byte RFC 6581 block (``pd_len - 4``); irdma reports it and 4 bytes more.
    - ``accept_markers = False``: siw rejects a request with M set.
    - ``quirks.mpa_v1_fallback = False``: the v2 -> v1 retry on a RST is irdma's
      (irdma_handle_rst_pkt); siw has none: a peer close while awaiting the reply is
      CONNECT_REPLY(-ECONNRESET) (siw_cm_work_handler, SIW_CM_WORK_PEER_CLOSE).
    - MPA rev 2 (``mpa_version = 2``), like irdma.

    Not modelled: siw's own MPA timers (10 s request, 5 s reply timeouts) and its TCP
    stack (the emulated siw peer keeps irdma's retransmission schedule); a reject
    reported as CONNECT_REPLY(-ECONNRESET) rather than -ECONNREFUSED
    (siw_proc_mpareply); and, as responder, echoing P2P whenever the request carries it
    (siw_proc_mpareq): the emulated peer sets the A bit from ``p2p``, so a siw responder
    facing a P2P initiator needs ``p2p=True``.
    Source: reference section 10 (siw_cm.c defaults and responder choice).
    """
    base = CmConfig(profile="siw", p2p=False, rtr_preference="write", accept_markers=False,
                    quirks=Quirks(v2_pdata_plus4=False, mpa_v1_fallback=False))
    return _build(base, overrides)


def mpa_v1(**overrides: Any) -> CmConfig:
    """A plain RFC 5044 peer: MPA rev 1, no RFC 6581 block, no IRD/ORD negotiation.

    - ``mpa_rev = 1``: requests and replies carry Rev 1, flags C only, no enhanced flag
      and no block (irdma_build_mpa_v1).
    - As responder it refuses a rev 2 request (irdma_parse_mpa step 4: a rev above its
      own is -EINVAL, answered with a RST); an irdma initiator then retries once at rev 1
      on the same ports (irdma_handle_rst_pkt, ``quirks.mpa_v1_fallback``).
    Source: reference sections 4.2, 4.5 and 2.2 (RST row).
    """
    return _build(CmConfig(profile="mpa-v1", mpa_rev=1), overrides)


PROFILES: dict[str, Callable[..., CmConfig]] = {
    "irdma": irdma,
    "siw": siw,
    "mpa-v1": mpa_v1,
}
"""Profile name -> function, as named in scenario files."""


def profile(name: str, **overrides: Any) -> CmConfig:
    """The configuration of profile ``name`` with ``overrides``; ValueError for an unknown
    name or field."""
    try:
        make = PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown profile {name!r}; expected one of "
                         f"{', '.join(PROFILES)}") from None
    return make(**overrides)
