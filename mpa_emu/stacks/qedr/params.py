"""qedr's settings: the constants qed_iwarp.c gives the firmware, and the firmware
behaviour the driver does not show, each a named parameter.

The first group are compiled-in constants of drivers/net/ethernet/qlogic/qed/qed_iwarp.c
(``qed_iwarp_setup``, ``qed_iwarp_tcp_offload``, the ``QED_IWARP_*`` defines): qed has no
module parameter for any of them, so a value other than the default means a rebuilt qed.
The second group is what the FastLinQ firmware decides on its own (its MPA timer, the RTR
it picks, its SYN window): the driver neither sets nor reports it, so the default is the
model's choice of the most likely behaviour (docs/stacks/qedr.md says why).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

from mpa_emu.stacks.base import StackParam

_QED = "constant in qed_iwarp.c (qed_iwarp_setup): a non-default value means a rebuilt qed"
_DEF = "#define in qed_iwarp.c: a non-default value means a rebuilt qed"
_FW = ("firmware behaviour the driver does not show: the model's choice "
       "(docs/stacks/qedr.md)")

QED_IWARP_ORD_DEFAULT = 32
QED_IWARP_IRD_DEFAULT = 32
"""qed_iwarp.c: the device's max_qp_req/resp_rd_atomic_resc (qed_iwarp_init_devinfo), the
limit qed_iwarp_connect and qed_iwarp_accept check and qed_iwarp_mpa_received caps a
request's values to; also what a v1 request's IRD/ORD are taken as."""
QED_IWARP_MAX_FW_MSS = 4120
"""qed_iwarp.c: the largest MSS qed_iwarp_connect and qed_iwarp_ll2_comp_syn_pkt pass."""


def fw_mss(max_mtu: int, *, ipv6: bool) -> int:
    """The MSS the firmware is given: ``dev->iwarp_max_mtu`` (the port MTU) less the IP and
    TCP headers (qedr_iw_connect; qed_iwarp_ll2_comp_syn_pkt's 40 or 60), then
    ``min_t(u16, QED_IWARP_MAX_FW_MSS, ...)`` (qed_iwarp_connect, the SYN path)."""
    return min(QED_IWARP_MAX_FW_MSS, max_mtu - (60 if ipv6 else 40))
QED_MAX_PRIV_DATA_LEN = 512
"""qed_iwarp.h: ``in_pdata``/``out_pdata`` of ``struct qed_iwarp_ep_memory``, the incoming
ULP buffer qed_iwarp_mpa_offload and qed_iwarp_tcp_offload hand the firmware."""
QED_IWARP_RCV_WND_SIZE_MIN = 0xFFFF
QED_IWARP_PREALLOC_CNT = 256
"""qed_iwarp.h: passive endpoints qed_iwarp_alloc preallocates (the free list a SYN takes
from in qed_iwarp_ll2_comp_syn_pkt; qed_iwarp_accept adds one back)."""
QED_IWARP_TTL = 0x40
"""qed_iwarp_tcp_offload: ``tcp->ttl = 0x40``."""
QED_IWARP_DEF_CWND_FACTOR = 4
QED_IWARP_DEF_KA_TIMEOUT_MS = 1200000
QED_IWARP_DEF_KA_INTERVAL_MS = 1000
QED_IWARP_DEF_KA_MAX_PROBE_CNT = 5
QED_IWARP_MAX_FIN_RT_DEFAULT = 2
"""qed_iwarp_init_fw_ramrod: ``tcp.max_fin_rt``, the FIN retransmissions."""

RTR_ORDERS = {0: ("write", "read", "send"), 1: ("read", "write", "send"),
              2: ("send", "write", "read")}
"""``fw_rtr_order``: the order in which the initiator's firmware picks the RTR it sends
(after IWARP_RAMROD_CMD_ID_MPA_OFFLOAD_SEND_RTR) among the types both sides share."""

PARAMS: tuple[StackParam, ...] = (
    StackParam("mpa_rev", int, 2, 1, 2, _QED,
               "iwarp_info->mpa_rev: 2 MPA_NEGOTIATION_TYPE_ENHANCED (RFC 6581, the "
               "default), 1 MPA_NEGOTIATION_TYPE_BASIC (RFC 5044, no IRD/ORD block)"),
    StackParam("crc_needed", bool, True, 0, 1, _QED,
               "iwarp_info->crc_needed (QED_IWARP_PARAM_CRC_NEEDED): the mpa offload "
               "ramrod's crc_needed; the firmware sets C in its frames"),
    StackParam("peer2peer", bool, True, 0, 1, _QED,
               "iwarp_info->peer2peer (QED_IWARP_PARAM_P2P): qed_iwarp_connect offers the "
               "RTR types of rtr_type (else MPA_RTR_TYPE_NONE)"),
    StackParam("rtr_type", int, 7, 0, 7, _QED,
               "iwarp_info->rtr_type: MPA_RTR_TYPE_ZERO_SEND 1 | ZERO_WRITE 2 | ZERO_READ "
               "4, all three by default"),
    StackParam("timestamps", bool, True, 0, 1, _QED,
               "iwarp_info->tcp_flags QED_IWARP_TS_EN: TCP_OFFLOAD_PARAMS_OPT2_TS_EN, the "
               "TCP timestamps option"),
    StackParam("delayed_ack", bool, False, 0, 1, _QED,
               "iwarp_info->tcp_flags QED_IWARP_DA_EN (not set by qed_iwarp_setup): "
               "TCP_OFFLOAD_PARAMS_OPT2_DA_EN, delayed ACKs"),
    StackParam("rcv_wnd_size", int, 256 * 1024, QED_IWARP_RCV_WND_SIZE_MIN, 1 << 29, _DEF,
               "QED_IWARP_RCV_WND_SIZE_DEF: the receive window in bytes; qed_iwarp_setup "
               "derives rcv_wnd_scale = ilog2(size) - ilog2(0xffff) (at most 512 MiB: "
               "a larger size gives a scale above RFC 7323's 14)"),
    StackParam("fw_mpa_timeout_secs", int, 60, 1, 86400, _FW,
               "the firmware's MPA timer (IWARP_CONN_ERROR_MPA_TIMEOUT): the initiator's "
               "wait for the reply, the responder's for the request and the RTR"),
    StackParam("fw_rtr_order", int, 0, 0, 2, _FW,
               "the RTR the initiator's firmware sends among the types both sides offer: "
               "0 Write, Read, Send; 1 Read, Write, Send; 2 Send, Write, Read"),
    StackParam("fw_passive_waits_rtr", bool, True, 0, 1, _FW,
               "a responder that negotiated an RTR completes the handshake "
               "(IWARP_EVENT_TYPE_ASYNC_MPA_HANDSHAKE_COMPLETE) only when the RTR arrives"),
    StackParam("fw_syn_window", int, 65535, 1, 65535, _FW,
               "the 16-bit window of the firmware's SYN and SYN-ACK"),
)
"""qedr's parameters (defaults as qed_iwarp.c sets them, then the firmware's)."""


@dataclass(frozen=True, slots=True)
class QedrParams:
    """One qedr host's settings, every field named as in :data:`PARAMS`."""

    mpa_rev: int = 2
    crc_needed: bool = True
    peer2peer: bool = True
    rtr_type: int = 7
    timestamps: bool = True
    delayed_ack: bool = False
    rcv_wnd_size: int = 256 * 1024
    fw_mpa_timeout_secs: int = 60
    fw_rtr_order: int = 0
    fw_passive_waits_rtr: bool = True
    fw_syn_window: int = 65535

    @classmethod
    def from_mapping(cls, values: Mapping[str, int | bool]) -> QedrParams:
        """Build from checked values (:func:`mpa_emu.stacks.parse_params`); missing names
        keep their defaults, unknown names are ignored."""
        known = {f.name for f in fields(cls)}
        kept = {k: v for k, v in values.items() if k in known}
        return cls(**kept)  # type: ignore[arg-type]

    @property
    def rcv_wnd_scale(self) -> int:
        """qed_iwarp_setup: ``ilog2(rcv_wnd_size) - ilog2(QED_IWARP_RCV_WND_SIZE_MIN)``
        (0 for sizes below 64 KiB: ilog2 of both is 15)."""
        return max(0, self.rcv_wnd_size.bit_length() - 1
                   - (QED_IWARP_RCV_WND_SIZE_MIN.bit_length() - 1))

    @property
    def rcv_wnd(self) -> int:
        """qed_iwarp_setup: ``rcv_wnd_size >> rcv_wnd_scale``, the u16 the mpa offload
        ramrod passes (``rcv_wnd``)."""
        return (self.rcv_wnd_size >> self.rcv_wnd_scale) & 0xFFFF

    def as_dict(self) -> dict[str, int | bool]:
        """Every setting by name."""
        return {f.name: getattr(self, f.name) for f in fields(self)}
