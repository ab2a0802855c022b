"""What other layers need to know about qedr, from qedr_iw_cm.c and qed_iwarp.c: the
judge's limits and timers, the CONNECT_REPLY statuses, the MPA framing of a peer that
copies qedr, the capture evidence, and where its connection life differs. The registry's
``STACKS["qedr"]`` carries them as typed fields of :class:`~mpa_emu.stacks.base.Stack`."""

from __future__ import annotations

import errno
from collections.abc import Mapping

from mpa_emu.stacks.base import (
    ESTABLISHED_AT_CHOSEN_RTR,
    OVERLAY_CRC_OFF,
    OVERLAY_CRC_ON,
    OVERLAY_MPA_V1,
    OVERLAY_RTR_READ,
    OVERLAY_RTR_SEND,
    OVERLAY_RTR_WRITE,
    RULED_OUT,
    Fingerprint,
    HostConfig,
    Lifecycle,
    MatrixFacts,
    Outcomes,
    PeerFraming,
    ReplayFacts,
    ReplyStatuses,
    StackFacts,
    Texts,
    Weights,
)
from mpa_emu.stacks.qedr.params import (
    PARAMS,
    QED_IWARP_IRD_DEFAULT,
    QED_IWARP_ORD_DEFAULT,
    QED_MAX_PRIV_DATA_LEN,
)
from mpa_emu.stacks.qedr.states import RtrType
from mpa_emu.wire.mpa import RtrBlock

_FW_MPA_TIMEOUT = int(next(p.default for p in PARAMS if p.name == "fw_mpa_timeout_secs"))
"""The model's firmware MPA timer (fw_mpa_timeout_secs' default): neither qed nor qedr
sets or reports the firmware's length (docs/stacks/qedr.md)."""

FACTS = StackFacts(
    name="qedr", title="Marvell/QLogic FastLinQ (qedr)",
    # qed_iwarp_mpa_offload / qed_iwarp_tcp_offload: incoming_ulp_buffer.len is
    # sizeof(in_pdata), QED_MAX_PRIV_DATA_LEN (512); the firmware refuses more (assumed:
    # IWARP_CONN_ERROR_MPA_INVALID_PACKET)
    max_pd_length=QED_MAX_PRIV_DATA_LEN,
    pd_limit_fn="qed_iwarp_mpa_offload (incoming_ulp_buffer of in_pdata[512])",
    # the firmware reads the frame off the stream (the driver sees only ulp_data_len)
    reassembles=True, reassembly_fn="firmware (qed_iwarp_mpa_received's ulp_data_len)",
    mpa_timer="the adapter firmware's MPA timer (IWARP_CONN_ERROR_MPA_TIMEOUT, mapped to "
              "CONNECT_REPLY -EBUSY by qed_iwarp_mpa_complete; its length is not in "
              "the driver, modelled as 60 s)",
    mpa_timer_fix="nothing in qedr or qed sets it: make the peer answer within the "
                  "firmware's timer",
    log_prefix="qedr",
)
"""qedr's MPA limits and timers (the judge's and the explanations')."""

STATUSES = ReplyStatuses(
    reject=-errno.ECONNREFUSED,
    reject_fn="qed_iwarp_mpa_complete (IWARP_CONN_ERROR_MPA_ERROR_REJECT)",
    # a RST is IWARP_CONN_ERROR_MPA_RST (-ECONNRESET); a FIN, IWARP_CONN_ERROR_MPA_FIN,
    # is -ECONNREFUSED ("MPA received FIN"), which this one status cannot tell
    reset=-errno.ECONNRESET,
    reset_fn="qed_iwarp_mpa_complete (IWARP_CONN_ERROR_MPA_RST; a FIN, "
             "IWARP_CONN_ERROR_MPA_FIN, is -ECONNREFUSED)",
    timeout=-errno.EBUSY, timeout_fn="qed_iwarp_mpa_complete (IWARP_CONN_ERROR_MPA_TIMEOUT)",
)
"""CONNECT_REPLY statuses of a qedr initiator (qedr_iw_active_complete passes
qed_iwarp_mpa_complete's status on)."""


def _rtr_word(rtr: int) -> str:
    both = RtrType.ZERO_WRITE | RtrType.ZERO_READ
    if rtr & both == both:
        return "both"
    if rtr & RtrType.ZERO_WRITE:
        return "write"
    if rtr & RtrType.ZERO_READ:
        return "read"
    return "none"


def peer_framing(p: Mapping[str, int | bool]) -> PeerFraming:
    """qed_iwarp_connect / qed_iwarp_mpa_v2_set_private with qed_iwarp_setup's constants:
    rev ``mpa_rev`` (2), C with ``crc_needed``, P2P and the ``rtr_type`` RTRs (Send,
    Write and Read) with ``peer2peer``; a u8 length through iw_cm leaves 255 bytes. The
    zero-length Send RTR has no PeerFraming word: Write and Read are "both". After a v1
    reply no RTR: the firmware raises no ENHANCED_MPA_REPLY_ARRIVED, so qedr_iw_mpa_reply
    never asks for one."""
    p2p = bool(p["peer2peer"])
    rtr = _rtr_word(int(p["rtr_type"])) if p2p else "none"
    return PeerFraming(int(p["mpa_rev"]), p2p, bool(p["crc_needed"]), rtr, 255, "none",
                       False, None)


FINGERPRINT = Fingerprint(
    # the SYN's layout and window are the firmware's (assumed, docs/stacks/qedr.md), so
    # no SYN signature is claimed
    syn=None,
    flag=None,  # qed sets no flag bit of its own
    revision=None,  # qed_iwarp.c: MPA revision 1 or 2 in RFC 5044's layout
    weights=Weights(
        syn_linux_options=0,  # a SYN with timestamps: TS_EN, but no SACK (not known)
        syn_mss_ws_only=-3,  # qed_iwarp_setup: QED_IWARP_TS_EN always
        no_crc=RULED_OUT,  # QED_IWARP_PARAM_CRC_NEEDED: crc_needed 1 in every frame
        own_crc=0,
        socket_request_crc=0,
        mpa_rev1=0,
        no_p2p=0,  # a reply to a request without P2P carries rtr_type NONE
        socket_request_p2p=0,
        request_write_and_read=0,  # qedr offers the Send RTR too
        request_read_only=-3,  # rtr_type SEND | WRITE | READ
        reply_read_over_both=0,
        reply_write_over_both=0,
        bitfield_terminate=0,
        rfc_terminate=0,
        # qed_iwarp_tcp_offload: TCP_OFFLOAD_PARAMS_OPT2_TS_EN from tcp_flags
        # (qed_iwarp_setup: QED_IWARP_TS_EN), and the offload parameters have no SACK bit
        syn_ts_no_sack=2,
        # qed_iwarp_setup: rtr_type MPA_RTR_TYPE_ZERO_SEND | _WRITE | _READ;
        # qed_iwarp_mpa_v2_set_private sets MPA_V2_SEND_RTR on the IRD word
        request_send_rtr=5,
        # qed_iwarp_mpa_received keeps every type both sides share (ep->rtr_type &=
        # iwarp_info->rtr_type) and qed_iwarp_mpa_v2_set_private sets each in the reply
        # qed_iwarp_mpa_received: no shared type leaves "our capabilities" (every type of
        # rtr_type) in the reply, never one type the request did not offer
        reply_unoffered_rtr=RULED_OUT,
        synack_unasked_mss_ws=1,  # TS_EN, but tcp options answer the SYN: MSS and WS only
        reply_several_rtrs=5,
    ),
)
"""qedr's evidence: a SYN with timestamps and no SACK (qed_iwarp_tcp_offload), a request
offering the Send RTR (qed_iwarp_mpa_v2_set_private with MPA_RTR_TYPE_ZERO_SEND), a
reply keeping several RTR types (qed_iwarp_mpa_received); ruled out where
qed_iwarp_setup's constants say it cannot be (a frame without C, a reply choosing one
type the request did not offer)."""

LIFECYCLE = Lifecycle(
    # qed_iwarp_mpa_complete with RDMA_RETURN_OK: QED_IWARP_EP_ESTABLISHED
    connected_state="ESTABLISHED",
    # the firmware's MPA timer (fw_mpa_timeout_secs, the model's 60 s)
    reply_timeout_s=60,
    # qed_iwarp_mpa_complete IWARP_CONN_ERROR_MPA_RST: -ECONNRESET, no retry
    rst_retries_v1=False,
    # qedr_iw_disconnect_worker: "modifying to SQD is translated to graceful disconnect.
    # O/w reset is sent" (qed_iwarp_modify_fw IWARP_MODIFY_QP_STATE_ERROR)
    abort_sends_rst=True,
    # qed_iwarp_mpa_received / qed_iwarp_parse_private_data strip the 4-byte block
    upcall_pdata_extra=0,
)
"""qedr's connection life where it differs from another stack's."""

REPLAY = ReplayFacts(
    # qed_iwarp_setup: iwarp_info->mpa_rev = MPA_NEGOTIATION_TYPE_ENHANCED (2); 1 is
    # MPA_NEGOTIATION_TYPE_BASIC (a rebuilt qed)
    rev_param="mpa_rev",
    # qedr's Transmit.conn is the firmware TCP's socket: replay finds it by the ports
    conn_is_node=False,
    # qedr_iw_accept: params.ird = conn_param->ird, params.ord = conn_param->ord
    # (qed_iwarp_accept negotiates them)
    accept_takes_ird_ord=True,
    # the firmware model (firmware.py) carries the connection past MPA itself: no NIC
    # model raising irdma-style AEs
    nic_offload=False,
    aliases={},
    # the defaults, then the named sets (MATRIX), then a BASIC-only qed
    # (qed_iwarp_mpa_offload's mode MPA_NEGOTIATION_TYPE_BASIC)
    auto_labels=("qedr", "qedr(peer2peer=0)", "qedr(rtr_type=4)", "qedr(mpa_rev=1)"),
    # the firmware handles each segment as it comes
    frames_before_due_work=False,
)
"""How replay plays qedr."""


def _max_ird(params: Mapping[str, int | bool]) -> int:
    """qedr_query_device: ``max_qp_rd_atom = min(1 << (fls(max_qp_resp_rd_atomic_resc)
    - 1), max_qp_init_rd_atom)`` and ``max_qp_init_rd_atom = 1 << (fls(
    max_qp_req_rd_atomic_resc) - 1)``; qed_iwarp_init_devinfo sets both resources to
    QED_IWARP_IRD_DEFAULT / QED_IWARP_ORD_DEFAULT (32), whatever the parameters."""
    init = 1 << (QED_IWARP_ORD_DEFAULT.bit_length() - 1)
    return min(1 << (QED_IWARP_IRD_DEFAULT.bit_length() - 1), init)


MATRIX = MatrixFacts(
    # Mainline qed fixes all of these in qed_iwarp_setup; the vendor's out-of-tree qedr
    # makes peer2peer and rtr_type module parameters, and these are the two settings
    # users change (docs/stacks/qedr.md, "In the matrix"): peer2peer=0 for peers without
    # RFC 6581 P2P, rtr_type=4 (MPA_RTR_TYPE_ZERO_READ alone) so that the reply carries
    # one RTR type, as RFC 6581 section 5 asks, instead of every type both offer
    # (qed_iwarp_mpa_v2_set_private).
    named_sets=({"peer2peer": False}, {"rtr_type": 4}),
    overlays={
        # qed_iwarp_mpa_offload: mode ep->mpa_rev (MPA_NEGOTIATION_TYPE_BASIC 1)
        OVERLAY_MPA_V1: {"mpa_rev": 1},
        # qed_iwarp_mpa_offload: crc_needed (QED_IWARP_PARAM_CRC_NEEDED)
        OVERLAY_CRC_ON: {"crc_needed": True},
        OVERLAY_CRC_OFF: {"crc_needed": False},
        # qed_iwarp_connect: rtr_type MPA_RTR_TYPE_ZERO_WRITE 2, ZERO_READ 4, ZERO_SEND 1,
        # offered only with peer2peer; the mpa offload ramrod has no markers setting
        OVERLAY_RTR_WRITE: {"peer2peer": True, "rtr_type": int(RtrType.ZERO_WRITE)},
        OVERLAY_RTR_READ: {"peer2peer": True, "rtr_type": int(RtrType.ZERO_READ)},
        OVERLAY_RTR_SEND: {"peer2peer": True, "rtr_type": int(RtrType.ZERO_SEND)},
    },
    max_ird=_max_ird,
)
"""qedr in the matrix."""


def _crc_on(kind: str, config: HostConfig | None) -> str:
    # qed_iwarp_mpa_offload: the ramrod's crc_needed is iwarp_info->crc_needed
    # (QED_IWARP_PARAM_CRC_NEEDED, qed_iwarp_setup) for a request and a reply alike.
    return ("sets C (qed_iwarp_mpa_offload: crc_needed, QED_IWARP_PARAM_CRC_NEEDED in "
            "qed_iwarp_setup)" if kind == "request" else
            "sets C (qed_iwarp_mpa_offload: crc_needed, QED_IWARP_PARAM_CRC_NEEDED in "
            "qed_iwarp_setup, whatever the request's C)")


def _flag_off(flag: str, kind: str) -> str:
    if flag == "C":
        return (" (the firmware sets C from qed_iwarp_mpa_offload's crc_needed, "
                "QED_IWARP_PARAM_CRC_NEEDED (1) in qed_iwarp_setup)")
    if flag == "M":
        return (" (qed_iwarp_mpa_offload's ramrod has crc_needed and reject, no markers "
                "setting: the firmware never sets M)")
    return ""


def _rtr(kind: str, ours: RtrBlock, theirs: RtrBlock, config: HostConfig | None
         ) -> list[str]:
    out: list[str] = []
    request = kind == "request"
    if (ours.ird, ours.ord) != (theirs.ird, theirs.ord):
        out.append("qed_iwarp_connect puts the application's IRD/ORD in the block (ORD 0 "
                   "raised to 1 with the Read RTR offered; qed_iwarp_mpa_v2_set_private)"
                   if request else
                   "qed_iwarp_accept takes the application's IRD/ORD, the ORD lowered to "
                   "the request's IRD and an IRD of 0 raised to 1 with the Read RTR "
                   "(qed_iwarp_mpa_v2_set_private)")
    if (ours.write0, ours.read0, ours.zero_len_send) != (theirs.write0, theirs.read0,
                                                         theirs.zero_len_send):
        out.append("qed_iwarp_connect offers every type of rtr_type (Send, Write and Read "
                   "in qed_iwarp_setup) with peer2peer" if request else
                   "qed_iwarp_mpa_received keeps every type both offer (all of rtr_type "
                   "when none match) and qed_iwarp_mpa_v2_set_private puts them all in "
                   "the reply")
    if ours.peer_to_peer != theirs.peer_to_peer:
        out.append("qed_iwarp_mpa_v2_set_private sets P2P with peer2peer (rtr_type not "
                   "MPA_RTR_TYPE_NONE)" if request else
                   "qed_iwarp_mpa_v2_set_private sets P2P when the request had it "
                   "(qed_iwarp_mpa_received: ep->rtr_type)")
    return out


TEXTS = Texts(
    crc_on=_crc_on, flag_off=_flag_off, rtr=_rtr,
    # DP_NOTICE (qed.h): pr_notice("[%s:%d(%s)]" ...) at the default dp_level; DP_VERBOSE
    # needs the QED_MSG_RDMA module bit and the verbose level (qede's debug msglevel)
    debug_log="qed: {fn} (DP_NOTICE lines, KERN_NOTICE and on by default, start "
              "\"[function:line(device)]\"; the DP_VERBOSE ones need qede's debug "
              "msglevel with QED_MSG_RDMA)",
    # the firmware reads the frame; qed logs what it reports
    parse_fn="qed_iwarp_tcp_connect_unsuccessful, qed_iwarp_mpa_complete",
    logs={
        "mpa-timeout": "qed: Active(0x%x) MPA timeout (qed_iwarp_mpa_complete, "
                       "DP_NOTICE)",
        "rejected": "qed: Active(0x%x) MPA Reject (qed_iwarp_mpa_complete, DP_NOTICE)",
        "reset": "qed: %s(0x%x) MPA reset(tcp cid: 0x%x), or %s(0x%x) MPA received FIN "
                 "(qed_iwarp_mpa_complete, DP_NOTICE)",
        "rtr-mismatch": "qed: Active(0x%x) MPA RTR MISMATCH (qed_iwarp_mpa_complete, "
                        "DP_NOTICE)",
        "ird-ord": "qed: Active(0x%x) MPA insufficient ird (qed_iwarp_mpa_complete, "
                   "DP_NOTICE)",
        "pd-over-limit": "qed: %s(0x%x) MPA Invalid Packet (qed_iwarp_mpa_complete, "
                         "qed_iwarp_tcp_connect_unsuccessful; DP_NOTICE)",
        "revision": "qed: Passive(0x%x) MPA not supported VER "
                    "(qed_iwarp_tcp_connect_unsuccessful, DP_NOTICE)",
        "wrong-key": "qed: %s(0x%x) MPA Invalid Packet (qed_iwarp_mpa_complete, "
                     "qed_iwarp_tcp_connect_unsuccessful; DP_NOTICE)",
    },
    # the firmware's MPA timer (IWARP_CONN_ERROR_MPA_TIMEOUT): its length is the
    # firmware's, fw_mpa_timeout_secs the model's choice, for the reply and the request
    reply_timer_s=_FW_MPA_TIMEOUT, request_timer_s=_FW_MPA_TIMEOUT,
)
"""qedr's cause texts and kernel log lines (qed's DP_NOTICE)."""

OUTCOMES = Outcomes(
    # qed_iwarp_tcp_connect_unsuccessful: IWARP_CONN_ERROR_TCP_CONNECTION_RST ->
    # -ECONNRESET, IWARP_CONN_ERROR_TCP_CONNECT_TIMEOUT -> -EBUSY (DP_NOTICE "TCP
    # timeout"); qedr_iw_active_complete passes them on as CONNECT_REPLY
    syn_refused=-errno.ECONNRESET, syn_timeout=-errno.EBUSY,
    connect_note="qedr's failed TCP connect is qed_iwarp_tcp_connect_unsuccessful's: a "
                 "RST is -ECONNRESET (RDMA_CM_EVENT_REJECTED), the firmware's SYN "
                 "timeout -EBUSY (RDMA_CM_EVENT_CONNECT_ERROR, not UNREACHABLE)",
    # a set-up the firmware ends with a Terminate is IWARP_CONN_ERROR_MPA_TERMINATE (or
    # _RTR_MISMATCH, _INSUF_IRD): qed_iwarp_mpa_complete gives -ECONNREFUSED for each
    setup_terminate=-errno.ECONNREFUSED,
    # with an RTR negotiated the firmware completes the passive handshake when the RTR
    # arrives (fw_passive_waits_rtr, the model's choice), else right after the reply:
    # qedr_iw_passive_complete gives ESTABLISHED then
    responder_established=ESTABLISHED_AT_CHOSEN_RTR,
    # qed_iwarp_mpa_complete IWARP_CONN_ERROR_MPA_RST: -ECONNRESET, no retry
    rst_retry="",
    tcp_findings=(),
)
"""What qedr's applications see where explain tells outcomes apart."""
