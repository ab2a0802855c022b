"""What other layers need to know about erdma, from erdma_cm.c and erdma_cm.h: the
judge's limits and timers, the CONNECT_REPLY statuses, the MPA framing of a peer that
copies erdma, the capture evidence, and where its connection life differs. The
registry's ``STACKS["erdma"]`` carries them as typed fields of
:class:`~mpa_emu.stacks.base.Stack`."""

from __future__ import annotations

import errno
from collections.abc import Mapping

from mpa_emu.stacks.base import (
    RULED_OUT,
    Fingerprint,
    Lifecycle,
    PeerFraming,
    ReplyStatuses,
    StackFacts,
    Weights,
)
from mpa_emu.wire.erdma_mpa import MAX_PRIVDATA, REVISION_EXT_1

FACTS = StackFacts(
    name="erdma", title="Alibaba Elastic RDMA (erdma)",
    # erdma_recv_mpa_rr: PD_Length > MPA_MAX_PRIVDATA (RDMA_MAX_PRIVATE_DATA, 256) or a
    # revision other than MPA_REVISION_EXT_1 is -EPROTO.
    max_pd_length=MAX_PRIVDATA, pd_limit_fn="erdma_recv_mpa_rr",
    reassembles=True, reassembly_fn="erdma_recv_mpa_rr",
    # erdma_cm_queue_work: MPAREP_TIMEOUT (HZ * 10) in AWAIT_MPAREP, MPAREQ_TIMEOUT
    # (HZ * 20) otherwise; CONNECT_TIMEOUT (HZ * 10) on the TCP handshake.
    mpa_timer="erdma's MPA timer (erdma_cm_work_handler, ERDMA_CM_WORK_MPATIMEOUT): 10 s "
              "for the initiator awaiting the reply (MPAREP_TIMEOUT: CONNECT_REPLY "
              "-ETIMEDOUT), 20 s for the responder awaiting the request "
              "(MPAREQ_TIMEOUT: the socket is closed, no upcall); 10 s on the TCP "
              "handshake (CONNECT_TIMEOUT: CONNECT_REPLY -ETIMEDOUT)",
    mpa_timer_fix="the timers are constants in erdma_cm.h (a rebuilt erdma changes "
                  "them); make the peer answer in time, and in erdma's MPA dialect "
                  "(revision 129 with its extension): erdma takes no other",
    # erdma_cm.c writes no log line of its own (ibdev_* lines come from erdma_main.c)
    log_prefix="erdma",
)
"""erdma's MPA limits and timers (the judge's and the explanations')."""

STATUSES = ReplyStatuses(
    reject=-errno.ECONNRESET,
    reject_fn="erdma_proc_mpareply (MPA_RR_FLAG_REJECT)",
    reset=-errno.ECONNRESET,
    reset_fn="erdma_cm_work_handler (ERDMA_CM_WORK_PEER_CLOSE in AWAIT_MPAREP)",
    timeout=-errno.ETIMEDOUT,
    timeout_fn="erdma_cm_work_handler (ERDMA_CM_WORK_MPATIMEOUT in AWAIT_MPAREP)",
)
"""CONNECT_REPLY statuses of an erdma initiator."""


def peer_framing(p: Mapping[str, int | bool]) -> PeerFraming:
    """erdma_newconn_connected: ``bits`` 0 with MPA_REVISION_EXT_1 (129): no C, no M, no
    P2P, no RFC 6581 block, no RTR at any revision (erdma has no other); private data up
    to MPA_MAX_PRIVDATA (256). The 8-byte extension after the header is
    :mod:`mpa_emu.wire.erdma_mpa`'s, which an RFC 5044 framing cannot express."""
    del p
    return PeerFraming(REVISION_EXT_1, False, False, "none", MAX_PRIVDATA, "none", False)


FINGERPRINT = Fingerprint(
    syn=None,  # a kernel socket (erdma_connect: sock_create): tcp_syn_options
    # erdma sets no flag bit of its own; its mark is the revision byte, 129 (erdma_cm.h
    # MPA_REVISION_EXT_1), which no Weights field expresses yet.
    flag=None,
    weights=Weights(
        syn_linux_options=1,  # kernel_bindconnect on a kernel socket
        syn_mss_ws_only=0,
        no_crc=1,  # erdma_newconn_connected: bits 0, C never set
        own_crc=-3,  # erdma_proc_mpareq/erdma_proc_mpareply refuse C
        socket_request_crc=-3,
        mpa_rev1=-3,  # erdma speaks revision 129 only (erdma_recv_mpa_rr)
        no_p2p=RULED_OUT,  # erdma sends no RFC 6581 block at all
        socket_request_p2p=-3,
        request_write_and_read=-3,
        request_read_only=-3,
        reply_read_over_both=-3,
        reply_write_over_both=-3,
        bitfield_terminate=0,  # the device's Terminate is not in the driver
        rfc_terminate=0,
    ),
)
"""erdma's evidence: a Linux socket's SYN and MPA frames of revision 129."""

LIFECYCLE = Lifecycle(
    # erdma_accept and erdma_proc_mpareply: ERDMA_EPSTATE_RDMA_MODE
    connected_state="RDMA_MODE",
    # erdma_cm_queue_work: MPAREP_TIMEOUT (HZ * 10) while AWAIT_MPAREP
    reply_timeout_s=10,
    # ERDMA_CM_WORK_PEER_CLOSE in AWAIT_MPAREP: CONNECT_REPLY(-ECONNRESET), no retry
    rst_retries_v1=False,
    # erdma_qp_cm_drop -> sock_release: a FIN (the parameter abort_sends_rst says else)
    abort_sends_rst=False,
    # erdma_cm_upcall passes PD_Length bytes of mpa.pdata: nothing added
    upcall_pdata_extra=0,
)
"""erdma's connection life where it differs from another stack's."""
