"""The TCP the Chelsio adapter runs for iw_cxgb4, as the shared host TCP shaped by what
``send_connect`` and ``accept_cr`` write into opt0/opt2.

* options: MSS always; window scale ``cxgb_compute_wscale(rcv_win)`` when
  ``enable_tcp_window_scaling``; SACK-permitted and timestamps only when their module
  parameters are on (all three are what ``WND_SCALE_EN_F``, ``SACK_EN_F`` and
  ``TSTAMPS_EN_F`` enable);
* MSS: the adapter MTU ``cxgb_best_mtu`` picks from :data:`MTU_TABLE` (1488 for a path
  MTU of 1500 over IPv4), less the IP and TCP headers;
* ISS: ``(random & ~7) - 1``, plus 4 with ``peer2peer`` (T5/T6 ``T5_ISS_F``);
* receive window: ``rcv_win`` (``RCV_BUFSIZ`` plus the credits ``update_rx_credits``
  returns).

Assumed where the driver does not say: the SYN's 16-bit window is 65535; retransmission,
delayed-ACK, FIN_WAIT2 and TIME_WAIT timers are the shared TCP's (Linux's values). So is
the answer to segments breaking the sequence checks: an ACK of unsent data dropped in
ESTABLISHED, challenge ACKs limited to one per socket per 500 ms (Linux's
tcp_oow_rate_limited). The adapter's TCP is firmware: iw_cxgb4 neither configures nor
reports its out-of-window handling (no opt0/opt2 bit, no CPL for it), so the source
cannot say what it does; the shared limit keeps two adapters out of an endless ACK
exchange, as any TCP must. Data
after our FIN is taken, not reset (``send_halfclose`` is a half close).
"""

from __future__ import annotations

from typing import Any

from mpa_emu.stacks.contract.trace import Trace
from mpa_emu.stacks.cxgb4.params import Cxgb4Params
from mpa_emu.stacks.tcp.shape import TcpShape
from mpa_emu.stacks.tcp.stack import TcpStack

MTU_TABLE = (88, 88, 256, 512, 576, 1024, 1280, 1488, 1500, 2002, 2048, 4096, 4352, 8192,
             9000, 9600)
"""The adapter's MTU table: the firmware's default, whose 1492 the cxgb4 base driver
rewrites to 1488 (``adap_init0``) so that MTU 1500 without TCP options keeps a TCP
payload that is a multiple of 8."""


def best_aligned_mtu(mtu: int, header: int, table: tuple[int, ...] = MTU_TABLE) -> int:
    """``cxgb4_best_aligned_mtu(mtus, header, mtu - header, 8)``: the largest table MTU
    not above ``mtu``, or an earlier one at most one entry below whose payload
    (MTU - ``header``) is a multiple of 8."""
    max_mtu = mtu
    aligned = -1
    idx = 0
    while idx < len(table):
        if (table[idx] - header) & 7 == 0:
            aligned = idx
        if idx + 1 < len(table) and table[idx + 1] > max_mtu:
            break
        idx += 1
    if idx == len(table):
        idx -= 1
    if aligned >= 0 and idx - aligned <= 1:
        idx = aligned
    return table[idx]


def advertised_mss(mtu: int, *, ipv6: bool, timestamps: bool) -> int:
    """The MSS option of a cxgb4 SYN or SYN-ACK: the MTU ``cxgb_best_mtu`` picks (its
    header counts IP, TCP and the rounded-up timestamp option) less the IP and TCP
    headers (the MSS option never counts TCP options, RFC 6691)."""
    base = (40 if ipv6 else 20) + 20
    return best_aligned_mtu(mtu, base + (12 if timestamps else 0)) - base


def cxgb4_shape(params: Cxgb4Params) -> TcpShape:
    """The :class:`TcpShape` of the adapter's TCP with these module parameters."""
    return TcpShape(
        name="cxgb4",
        sack_permitted=params.enable_tcp_sack,
        timestamps=params.enable_tcp_timestamps,
        window_scale=params.wscale if params.enable_tcp_window_scaling else None,
        syn_window=65535,
        synack_window=65535,
        active_window=params.rcv_win,
        passive_window=params.rcv_win,
    )


def cxgb4_iss(draw: int, peer2peer: bool) -> int:
    """``(prandom_u32() & ~7UL) - 1``, ``+ 4`` when ``peer2peer`` (``send_connect``,
    ``accept_cr``)."""
    isn = ((draw & ~7) - 1) & 0xFFFFFFFF
    return (isn + 4) & 0xFFFFFFFF if peer2peer else isn


class Cxgb4Tcp(TcpStack):
    """The shared host TCP with the adapter's MSS choice, ISS and frame comments."""

    # send_halfclose is CPL_CLOSE_CON_REQ, a half close: the offloaded connection in
    # FIN_WAIT1/2 still takes the peer's data (ACKed, handed to rx_data), it is no
    # orphaned Linux socket.
    data_after_close_resets = False

    def __init__(self, host: str, mac: bytes, params: Cxgb4Params, *, seed: int,
                 mtu: int = 1500, trace: Trace | None = None) -> None:
        super().__init__(host, mac, cxgb4_shape(params), seed=seed, mtu=mtu, trace=trace)
        self.params = params

    def _adv_mss(self, s: Any) -> int:
        return advertised_mss(self.mtu, ipv6=len(s.local_ip) == 16,
                              timestamps=self.params.enable_tcp_timestamps)

    def _new_sock(self, local_ip: bytes, local_port: int, remote_ip: bytes,
                  remote_port: int, *, passive: bool, listener: int | None) -> Any:
        s = super()._new_sock(local_ip, local_port, remote_ip, remote_port,
                              passive=passive, listener=listener)
        s.iss = cxgb4_iss(s.iss, self.params.peer2peer)
        s.snd_una = s.iss
        return s

    def _emit(self, s: Any, flags: int, seq: int, payload: bytes, comment: str,
              ack: int | None = None) -> None:
        # The shared TCP names Linux functions; on this host they are the adapter's.
        if comment.startswith("tcp_"):
            comment = f"adapter TCP ({comment})"
        super()._emit(s, flags, seq, payload, comment, ack)

    def _fn(self, s: Any, name: str) -> str:
        if name == "connect":
            return "send_connect: CPL_ACT_OPEN_REQ"
        if name == "send_synack":
            return "accept_cr: CPL_PASS_ACCEPT_RPL"
        return f"adapter TCP ({name})"
