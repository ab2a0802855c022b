"""erdma's settings, named as the driver names them.

erdma has no module parameter that touches its connection manager: its MPA revision,
timers and limits are constants of erdma_cm.h and erdma_verbs.h. The one setting that
changes the frames is the device's congestion-control algorithm, ``dev->attrs.cc``,
which erdma_dev_attrs_init reads from the device's capabilities (``DEFAULT_CC``) and the
driver never sets: the firmware decides it, so it is a parameter here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mpa_emu.stacks.base import StackParam

MPA_MAX_PRIVDATA = 256
"""erdma_cm.h: MPA_MAX_PRIVDATA (RDMA_MAX_PRIVATE_DATA): the longest PD_Length
erdma_recv_mpa_rr takes and the longest private data erdma_connect and erdma_accept
take."""
ERDMA_MAX_IRD = 128
ERDMA_MAX_ORD = 128
"""erdma_verbs.h: the device's max_ird / max_ord (erdma_dev_attrs_init): what
erdma_connect and erdma_accept check against and what CONNECT_REQUEST reports."""
MPAREQ_TIMEOUT_NS = 20_000_000_000
"""erdma_cm.h: MPAREQ_TIMEOUT (HZ * 20). erdma_cm_queue_work arms it for an endpoint
*not* in AWAIT_MPAREP: the responder's wait for the request."""
MPAREP_TIMEOUT_NS = 10_000_000_000
"""erdma_cm.h: MPAREP_TIMEOUT (HZ * 10), armed in AWAIT_MPAREP: the initiator's wait for
the reply."""
CONNECT_TIMEOUT_NS = 10_000_000_000
"""erdma_cm.h: CONNECT_TIMEOUT (HZ * 10), erdma_connect's wait for the TCP handshake
(ERDMA_CM_WORK_CONNECTTIMEOUT)."""

_FW = ("device capability (erdma_dev_attrs_init: dev->attrs.cc = DEFAULT_CC of the "
       "device's cap1): the firmware's choice, not the driver's")
_RST = ("firmware: after RTS the device carries the connection (erdma_modify_qp_state_"
        "to_rts hands it snd_nxt/rcv_nxt); what it puts on the wire when the QP is "
        "stopped is not in the driver")

PARAMS: tuple[StackParam, ...] = (
    StackParam("cc", int, 0, 0, 4, _FW,
               "the device's congestion-control algorithm (enum erdma_cc_alg: 0 NewReno, "
               "1 Cubic, 2 HPCC-RTT, 3 HPCC-ECN, 4 HPCC-INT), written into the MPA "
               "extension of every request and reply (__mpa_ext_set_cc); a QP whose "
               "peer names another runs COMPROMISE_CC, Cubic (erdma_accept, "
               "erdma_proc_mpareply). The default 0 is an assumption."),
    StackParam("abort_sends_rst", bool, False, 0, 1, _RST,
               "an abortive disconnect (QP to ERROR, erdma_qp_cm_drop) resets the "
               "connection; off: the model shows what the kernel socket's sock_release "
               "does, a FIN (a RST only with unread bytes)."),
)


@dataclass(frozen=True, slots=True)
class ErdmaParams:
    """The parameters of one erdma host, typed."""

    cc: int = 0
    abort_sends_rst: bool = False

    @classmethod
    def from_mapping(cls, values: Mapping[str, int | bool]) -> ErdmaParams:
        """From :func:`mpa_emu.stacks.parse_params` output (missing keys: defaults)."""
        return cls(cc=int(values.get("cc", 0)),
                   abort_sends_rst=bool(values.get("abort_sends_rst", False)))
