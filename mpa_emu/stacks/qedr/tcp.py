"""The TCP the FastLinQ firmware runs for an offloaded iWARP connection, as the shared
host TCP shaped by what qed_iwarp_tcp_offload writes into ``struct
tcp_offload_params_opt2`` and qed_iwarp_setup into ``iwarp_info``.

From the driver:

* options: MSS always; timestamps with ``QED_IWARP_TS_EN`` (qed_iwarp_setup sets it:
  TCP_OFFLOAD_PARAMS_OPT2_TS_EN); window scale ``rcv_wnd_scale`` = ilog2(256 KiB) -
  ilog2(0xffff) = 3; no SACK (the offload parameters have no SACK bit); no keepalive
  (KA_EN is never set, so ka_timeout/ka_interval/ka_max_probe_cnt are carried unused);
  no delayed ACK (``QED_IWARP_DA_EN`` is not in tcp_flags): every data segment is
  acknowledged at once;
* MSS: the port MTU less 40 (IPv4) or 60 (IPv6), at most ``QED_IWARP_MAX_FW_MSS`` 4120
  (qedr_iw_connect, qed_iwarp_ll2_comp_syn_pkt);
* receive window: ``QED_IWARP_RCV_WND_SIZE_DEF`` 256 KiB, advertised scaled by 3;
* TTL: ``tcp->ttl = 0x40``.

Assumed where the driver does not say (docs/stacks/qedr.md): the options are laid out as
RFC 7323 appendix A suggests (MSS, NOP NOP TS, NOP WS), the SYN's 16-bit window is
``fw_syn_window`` (65535), and the retransmission, FIN_WAIT2 and TIME_WAIT timers and the
answer to out-of-window segments are the shared TCP's (Linux's values); the firmware
retransmits a FIN ``max_fin_rt`` (2) times, which the shared TCP does not count.

A SYN that finds no qed listener is not the firmware's: qed_iwarp_ll2_comp_syn_pkt loops
it back to the host (QED_LL2_TX_DEST_LB), whose Linux TCP answers it; with no socket
listening there either that is tcp_v4_send_reset's RST.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mpa_emu.stacks.contract.trace import Trace
from mpa_emu.stacks.qedr.params import QED_IWARP_TTL, QedrParams, fw_mss
from mpa_emu.stacks.tcp.shape import TcpShape
from mpa_emu.stacks.tcp.stack import TcpStack
from mpa_emu.wire.segment import ACK, RST, SYN, Segment


def qed_shape(params: QedrParams) -> TcpShape:
    """The :class:`TcpShape` of the firmware's TCP with these settings."""
    return TcpShape(
        name="qedr",
        sack_permitted=False,
        timestamps=params.timestamps,
        window_scale=params.rcv_wnd_scale,
        syn_window=params.fw_syn_window,
        synack_window=params.fw_syn_window,
        active_window=params.rcv_wnd_size,
        passive_window=params.rcv_wnd_size,
        quick_acks=1 << 30 if not params.delayed_ack else 16,
        ttl=QED_IWARP_TTL,
    )


class QedTcp(TcpStack):
    """The shared host TCP with the firmware's MSS, frame comments and the SYN path of
    qed_iwarp_ll2_comp_syn_pkt."""

    # The firmware's close of an offloaded connection is a half close (the QP goes to
    # CLOSING): data that still arrives is taken, not reset.
    data_after_close_resets = False

    def __init__(self, host: str, mac: bytes, params: QedrParams, *, seed: int,
                 mtu: int = 1500, trace: Trace | None = None) -> None:
        super().__init__(host, mac, qed_shape(params), seed=seed, mtu=mtu, trace=trace)
        self.params = params
        self.syn_hook: Callable[[Segment], bool] | None = None
        """qed_iwarp_ll2_comp_syn_pkt's checks on a SYN for a listener: False drops it
        (no SYN-ACK)."""

    def _passive_open(self, listener: int, seg: Segment) -> None:
        if self.syn_hook is not None and not self.syn_hook(seg):
            return
        super()._passive_open(listener, seg)

    def _adv_mss(self, s: Any) -> int:
        return fw_mss(self.mtu, ipv6=len(s.local_ip) == 16)

    def _no_socket(self, seg: Segment) -> None:
        """qed_iwarp_ll2_comp_syn_pkt: a SYN without a qed listener ("SYN received on
        tuple not listened on") goes back to the host's own TCP stack."""
        if seg.flags & SYN and not seg.flags & (ACK | RST) \
                and self._find_listener(seg.dst_ip, seg.dport) is None:
            self._note("segment_dropped", "qed_iwarp_ll2_comp_syn_pkt",
                       reason="SYN received on tuple not listened on: passed to the host "
                              "TCP stack (QED_LL2_TX_DEST_LB)")
        super()._no_socket(seg)

    def _fn(self, s: Any, name: str) -> str:
        if name == "connect":
            return "qed_iwarp_tcp_offload (TCP_CONNECT_ACTIVE)"
        if name == "send_synack":
            return "qed_iwarp_tcp_offload (TCP_CONNECT_PASSIVE)"
        return f"firmware TCP ({name})"

    def _emit(self, s: Any, flags: int, seq: int, payload: bytes, comment: str,
              ack: int | None = None) -> None:
        if comment.startswith("tcp_"):
            comment = f"firmware TCP ({comment})"
        super()._emit(s, flags, seq, payload, comment, ack)
