"""iw_cxgb4's endpoint states and the RTR types of its firmware interface.

``EpState`` is ``enum c4iw_ep_state`` (iw_cxgb4.h) with the kernel's values; ``STATE_TEXT``
the ``states[]`` table of cm.c that the debug lines print. ``P2pType`` is ``enum
fw_ri_init_p2ptype`` (t4fw_ri_api.h), whose values are the firmware's work request
opcodes.
"""

from __future__ import annotations

from enum import IntEnum


class EpState(IntEnum):
    """``enum c4iw_ep_state``."""

    IDLE = 0
    LISTEN = 1
    CONNECTING = 2
    MPA_REQ_WAIT = 3
    MPA_REQ_SENT = 4
    MPA_REQ_RCVD = 5
    MPA_REP_SENT = 6
    FPDU_MODE = 7
    ABORTING = 8
    CLOSING = 9
    MORIBUND = 10
    DEAD = 11


STATE_TEXT: dict[EpState, str] = dict(zip(EpState, (
    "idle", "listen", "connecting", "mpa_wait_req", "mpa_req_sent", "mpa_req_rcvd",
    "mpa_rep_sent", "fpdu_mode", "aborting", "closing", "moribund", "dead"), strict=True))
"""The ``states[]`` strings of cm.c, as ``state_set`` and ``c4iw_ep_disconnect`` print them."""


class P2pType(IntEnum):
    """``enum fw_ri_init_p2ptype``: the RTR the firmware sends (``build_rtr_msg``)."""

    RDMA_WRITE = 0  # FW_RI_RDMA_WRITE
    READ_REQ = 1  # FW_RI_READ_REQ
    DISABLED = 0xF


class QpState(IntEnum):
    """``enum c4iw_qp_state`` (iw_cxgb4.h): the QP states ``c4iw_modify_qp`` moves between."""

    IDLE = 0
    RTS = 1
    ERROR = 2
    TERMINATE = 3
    CLOSING = 4


# The MPA constants of iw_cxgb4.h that differ from the RFC names in mpa_emu.wire.mpa.
MPA_MAX_PRIVATE_DATA = 256
"""``MPA_MAX_PRIVATE_DATA``: PD_Length above this fails the connection, and
``mpa_pkt[sizeof(struct mpa_message) + MPA_MAX_PRIVATE_DATA]`` is the receive buffer."""
MPA_PKT_SIZE = 20 + MPA_MAX_PRIVATE_DATA

# Terminate codes (iw_cxgb4.h: enum c4iw_layers_types, enum c4iw_mpa_ecodes).
LAYER_MPA = 0x20
DDP_LLP = 0x03
MPA_INSUFF_IRD = 0x06
MPA_NOMATCH_RTR = 0x07

RTR_STAG = 1
"""``build_rtr_msg`` writes STag 1 and TO 1 into both zero-length RTRs."""
RTR_TO = 1
