"""What other layers need to know about cxgb4, from drivers/infiniband/hw/cxgb4/cm.c: the
judge's limits and timers, the CONNECT_REPLY statuses, the MPA framing of a peer that
copies cxgb4, and the capture evidence that names cxgb4 alone. The registry's
``STACKS["cxgb4"]`` carries them as typed fields of :class:`~mpa_emu.stacks.base.Stack`."""

from __future__ import annotations

import errno
from collections.abc import Mapping

from mpa_emu.stacks.base import (
    Fingerprint,
    Lifecycle,
    PeerFraming,
    ReplyStatuses,
    StackFacts,
    Weights,
)

FACTS = StackFacts(
    name="cxgb4", title="Chelsio T4/T5/T6 (iw_cxgb4)",
    # process_mpa_request / process_mpa_reply: plen > MPA_MAX_PRIVATE_DATA (256).
    max_pd_length=256, pd_limit_fn="process_mpa_request, process_mpa_reply",
    reassembles=True, reassembly_fn="process_mpa_request, process_mpa_reply",
    # ep_timeout_secs (module parameter, default 60): ep_timeout -> process_timeout.
    mpa_timer="cxgb4's endpoint timer (ep_timeout -> process_timeout, module "
              "parameter ep_timeout_secs, 60 s by default): CONNECT_REPLY "
              "-ETIMEDOUT for the initiator, an abort for the responder",
    mpa_timer_fix="iw_cxgb4 ep_timeout_secs=N (module parameter) if the peer is "
                  "slow, else make the peer answer",
    log_prefix="iw_cxgb4",
)
"""cxgb4's MPA limits and timers (the judge's and the explanations')."""

STATUSES = ReplyStatuses(
    reject=-errno.ECONNREFUSED, reject_fn="process_mpa_reply (MPA_REJECT)",
    reset=-errno.ECONNRESET, reset_fn="peer_abort / peer_close in MPA_REQ_SENT",
    timeout=-errno.ETIMEDOUT, timeout_fn="process_timeout in MPA_REQ_SENT",
)
"""CONNECT_REPLY statuses of a cxgb4 initiator."""


def peer_framing(p: Mapping[str, int | bool]) -> PeerFraming:
    """send_mpa_req / send_mpa_reply: rev ``mpa_rev``, C with ``crc_enabled``, P2P with
    ``peer2peer`` and the RTR of ``p2p_type`` (1 Read, 0 Write, else none);
    MPA_MAX_PRIVATE_DATA 256 and a u8 length through iw_cm leave 255. Under v1,
    process_mpa_reply / process_mpa_request take ``p2p_type`` as the RTR with
    ``peer2peer`` (pre-RFC 6581 Chelsio peer-to-peer), which rdma_init has the
    initiator's firmware send (build_rtr_msg); what the responder's firmware does
    without it is not in the source, so it is not waited for."""
    rtr = {0: "write", 1: "read"}.get(int(p["p2p_type"]), "none")
    return PeerFraming(max(int(p["mpa_rev"]), 1), bool(p["peer2peer"]),
                       bool(p["crc_enabled"]), rtr, 255,
                       rtr if p["peer2peer"] else "none", False)


FINGERPRINT = Fingerprint(
    syn=None,
    flag=None,
    weights=Weights(
        # send_connect / accept_cr: TSTAMPS_EN_F and SACK_EN_F only with
        # enable_tcp_timestamps / enable_tcp_sack (0), WND_SCALE_EN_F by default
        syn_linux_options=-2,
        syn_mss_ws_only=1,
        no_crc=-1,  # send_mpa_req: MPA_CRC with crc_enabled (1)
        own_crc=1,
        socket_request_crc=0,
        mpa_rev1=0,  # mpa_rev 2
        no_p2p=-1,  # send_mpa_req: P2P with peer2peer (1)
        socket_request_p2p=0,
        request_write_and_read=0,
        request_read_only=2,  # p2p_type FW_RI_INIT_P2PTYPE_READ_REQ: the Read RTR only
        reply_read_over_both=0,
        reply_write_over_both=1,  # process_mpa_request: Write before Read
        bitfield_terminate=0,
        rfc_terminate=0,
    ),
)
"""Nothing on the wire names cxgb4 alone (its SYN options follow module parameters,
enable_tcp_timestamps, enable_tcp_sack, enable_tcp_window_scaling; its MPA flags are
RFC 5044's); the weights say what the rest of the evidence says for it."""

LIFECYCLE = Lifecycle(
    # process_mpa_reply and c4iw_accept_cr: FPDU_MODE
    connected_state="FPDU_MODE",
    # start_ep_timer: ep_timeout_secs (module parameter, 60) -> process_timeout
    reply_timeout_s=60,
    # peer_abort in MPA_REQ_SENT with mpa_rev 2, not yet tried with v1:
    # retry_with_mpa_v1, c4iw_reconnect, no upcall
    rst_retries_v1=True,
    # c4iw_ep_disconnect(abrupt) -> send_abort: CPL_ABORT_REQ, a RST
    abort_sends_rst=True,
    # connect_request_upcall / connect_reply_upcall: plen - sizeof(mpa_v2_conn_params)
    upcall_pdata_extra=0,
)
"""cxgb4's connection life where it differs from another stack's."""
