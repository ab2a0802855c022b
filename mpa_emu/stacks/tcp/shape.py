"""What a host TCP's segments look like: :class:`TcpShape`, and Linux's shape.

The values of :data:`LINUX` come from the Linux TCP stack (net/ipv4/tcp_output.c,
tcp_timer.c, include/net/tcp.h) with the default sysctls of a stock host, and match the
reference captures in ``pcaps/real/siw/`` taken over real Linux sockets.
"""

from __future__ import annotations

from dataclasses import dataclass

MS = 1_000_000
SECOND = 1_000_000_000


@dataclass(frozen=True, slots=True)
class TcpShape:
    """The options, windows and timers of one host TCP implementation."""

    name: str
    """``"linux"`` or another stack's name."""
    mss_option: bool = True
    sack_permitted: bool = True
    """SACK_PERM in SYN/SYN-ACK (net.ipv4.tcp_sack). SACK blocks are never sent."""
    timestamps: bool = True
    """RFC 7323 timestamps (net.ipv4.tcp_timestamps)."""
    window_scale: int | None = 7
    """The shift offered in the SYN; ``None`` sends no WS option. Linux picks 7 for the
    default net.ipv4.tcp_rmem maximum of 6 MiB (tcp_select_initial_window)."""
    syn_window: int = 64240
    """The active SYN's window: tcp_select_initial_window rounds 65535 down to a
    multiple of the MSS (44 * 1460 for MSS 1460)."""
    synack_window: int = 65160
    """The SYN-ACK's window: the same rounding with the MSS less the 12 timestamp bytes
    (45 * 1448), tcp_openreq_init_rwin."""
    active_window: int = 64256
    """Receive window the active side advertises once established: tcp_select_window
    aligns 64240 up to the scale unit (502 << 7), as captured."""
    passive_window: int = 65152
    """Receive window the passive side advertises once established (509 << 7), as
    captured."""
    rto_initial_ns: int = 1 * SECOND
    """TCP_TIMEOUT_INIT: the SYN's and SYN-ACK's first retransmission timeout, and the
    data RTO until an RTT is measured."""
    rto_min_ns: int = 200 * MS
    """TCP_RTO_MIN."""
    rto_max_ns: int = 120 * SECOND
    """TCP_RTO_MAX: the back-off doubles up to it."""
    syn_retries: int = 6
    """net.ipv4.tcp_syn_retries: the active open fails (ETIMEDOUT) 127 s after the SYN."""
    synack_retries: int = 5
    """net.ipv4.tcp_synack_retries: the request is dropped 63 s after the SYN-ACK."""
    retries2: int = 15
    """net.ipv4.tcp_retries2: data retransmissions before the connection fails."""
    delayed_ack_ns: int = 40 * MS
    """TCP_DELACK_MIN: the delayed ACK once quick ACKs are used up."""
    quick_acks: int = 16
    """TCP_MAX_QUICKACKS: data segments acknowledged at once at the start."""
    fin_timeout_ns: int = 60 * SECOND
    """net.ipv4.tcp_fin_timeout: an orphaned FIN_WAIT2 socket's lifetime."""
    time_wait_ns: int = 60 * SECOND
    """TCP_TIMEWAIT_LEN."""
    ttl: int = 64
    """net.ipv4.ip_default_ttl."""
    ephemeral_ports: tuple[int, int] = (32768, 60999)
    """net.ipv4.ip_local_port_range."""
    invalid_ratelimit_ns: int = 500 * MS
    """net.ipv4.tcp_invalid_ratelimit (HZ/2): at most one ACK per socket in this time
    for segments that break the sequence checks without carrying data (a challenge ACK
    for an in-window RST or a SYN, an ACK answering an ACK of unsent data outside
    ESTABLISHED): tcp_oow_rate_limited, __tcp_oow_rate_limited. 0 turns it off."""


LINUX = TcpShape(name="linux")
"""Linux's TCP with its default sysctls: what siw's sockets look like on the wire."""
