"""Configuration of one emulated irdma host, including every kernel quirk as a switch.

Defaults follow the kernel (mainline cm.c, GEN_2/E810). Each quirk names the kernel
function where the behaviour lives; setting it to ``False`` models the fixed or
RFC-conforming behaviour instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal, get_args

from mpa_emu.stacks.irdma.limits import check_config

RtrPreference = Literal["read", "write"]
"""The zero-length operation a responder picks as RTR when the request offers both
(``enum send_rdma0`` as :class:`mpa_emu.stacks.irdma.mpa_policy.Rdma0Op`)."""

PdataTail = Literal["zeros", "segment"]
"""What :attr:`Quirks.v2_pdata_tail` reports in the 4 bytes past a v2 frame."""


@dataclass(frozen=True, slots=True)
class Quirks:
    """Kernel behaviours that differ from the RFC or are bugs. ``True`` = kernel."""

    v2_pdata_plus4: bool = True
    """irdma_parse_mpa: for rev 2 the upcall private data length includes the 4-byte
    RFC 6581 block and 4 bytes past the frame are reported (``priv_data_len`` is the
    frame's PD_Length, copied from after the 24-byte v2 header)."""

    v2_pdata_tail: PdataTail = "zeros"
    """What the emulator reports in those 4 bytes past the frame (with ``v2_pdata_plus4``).
    The kernel copies PD_Length bytes from after the 24-byte v2 header
    (``memcpy(cm_node->pdata_buf, buf + mpa_hdr_len, priv_data_len)`` in irdma_parse_mpa),
    so they are whatever follows the frame in the receive buffer: the next bytes of the
    segment when it carries more, otherwise memory no capture shows. ``"zeros"`` reports
    zeros; ``"segment"`` the bytes that follow the frame in the segment (zeros past its
    end)."""

    pdata_len_u8: bool = True
    """irdma_send_cm_event: ``event.private_data_len`` is a u8, so lengths wrap mod 256."""

    reject_pdata_u8: bool = True
    """rdma_reject/iw_cm_reject/irdma_reject: ``pdata_len`` is a u8, so a longer buffer's
    length wraps mod 256 (256 bytes go out as 0) and the ``pdata_len + 24 > 544`` check
    of irdma_reject can never fire; ``False`` refuses over-long data with -EINVAL."""

    conn_pdata_u8: bool = True
    """rdma_accept/rdma_connect: ``rdma_conn_param.private_data_len`` is a u8, copied
    into ``iw_cm_conn_param`` by cma_accept_iw/cma_connect_iw, so the length wraps mod
    256; ``False`` models a u16 length (iw_cm_conn_param) with today's refusals."""

    mpa_v1_fallback: bool = True
    """irdma_handle_rst_pkt: a RST in SYN_SENT/MPAREQ_SENT at rev 2 retries once at rev 1."""

    teardown_null_qp_oops: bool = True
    """irdma_cm_teardown_connections: a selected node without a QP is dereferenced. The
    emulator records "the kernel would oops here" and skips the node; ``False`` models a
    NULL check (the node is reset with a RST and freed instead)."""

    if_notify_lower_dev: bool = True
    """irdma_if_notify callers pass the lower (real) netdev, so the VLAN compared during
    teardown is 0xFFFF and nodes on VLAN sub-interfaces are not matched."""

    backoff_int_shift: bool = True
    """irdma_cm_timer_tick: the gap ``HZ << n`` is a C int shift (count mod 32, negative
    or zero results) as compiled on x86-64; ``False`` caps every gap cleanly at 12 s."""

    zero_len_option_loop: bool = True
    """irdma_process_options: an option of length 0 loops forever in the kernel. The
    emulator records it and treats the segment as lost (the CM thread is stuck);
    ``False`` rejects the options like a malformed MSS."""

    def __post_init__(self) -> None:
        if self.v2_pdata_tail not in PDATA_TAILS:
            raise ValueError(f"v2_pdata_tail must be one of {', '.join(PDATA_TAILS)}, "
                             f"not {self.v2_pdata_tail!r}")


PDATA_TAILS: Final[tuple[str, ...]] = get_args(PdataTail)
"""The choices of :attr:`Quirks.v2_pdata_tail`."""


@dataclass(frozen=True, slots=True)
class CmConfig:
    """Per-host CM settings. Times are in kernel jiffies of ``hz`` unless named ``_ns``.
    Integer fields are checked against :data:`mpa_emu.stacks.irdma.limits.CONFIG_RANGES` when the
    configuration is built (:class:`mpa_emu.ranges.RangeError`, a ValueError)."""

    gen: int = 2
    """Hardware generation: 2 = E810 (icrdma, AH framing), 1 = X722 (i40iw, UDA framing)."""
    hz: int = 1000
    retrans: int = 32
    """IRDMA_DEFAULT_RETRANS: 32 since v6.3 (commit 8385a875c9ee), 8 before."""
    mpa_rev: int = 2
    """IRDMA_CM_DEFAULT_MPA_VER."""
    max_ird: int = 127
    """max_hw_ird (GEN_2 Linux 127; GEN_1 63; FreeBSD 32)."""
    max_ord: int = 255
    """max_hw_ord (GEN_2 Linux 255; GEN_1 127; FreeBSD 64)."""
    mtu: int = 1500
    rcv_wscale: int = 2
    """IRDMA_CM_DEFAULT_RCV_WND_SCALE."""
    iw_ooo: bool = False
    """Out-of-order mode: sets M in MPA frames (mainline never sets it)."""
    dcb_vlan_mode: bool = False
    host_stack_rst: bool = False
    """A SYN matching no listener reaches the Linux host stack; ``True`` makes that stack
    answer with a RST (outside cm.c), ``False`` keeps it silent."""
    keep_addr_on_down: bool = False
    """net.ipv6.conf.*.keep_addr_on_down: when False (Linux's default) a link down makes
    addrconf remove the interface's IPv6 addresses, which reaches irdma_if_notify through
    the inet6addr notifier; IPv4 addresses always survive a link down."""
    ah_latency_ns: int = 0
    """Latency of the asynchronous AH create and qhash add before the passive SYN-ACK."""
    ah_create_fails: bool = False
    """GEN_2: the asynchronous AH creation of a passive node completes with an error
    (``irdma_ilq_ah_cb``): the qhash is still added but the SYN-ACK cannot be built, so
    the node stays in SYN_RCVD with no timer, holding a backlog slot
    (``irdma_send_syn_cqp_callback`` -> ``irdma_send_syn`` fails without an AH)."""
    rts_ae_timeout_ns: int = 12_000_000_000
    """irdma_accept waits up to 12 s for the RTS AE (the peer's RTR)."""
    quirks: Quirks = field(default_factory=Quirks)

    # Peer-profile knobs: irdma's values by default; other profiles (siw-like, plain
    # MPA v1) are built from these in mpa_emu.stacks.irdma.profiles.
    profile: str = "irdma"
    """Name shown in traces and summaries."""
    p2p: bool = True
    """irdma_build_mpa_v2 always advertises P2P and irdma_negotiate_mpa_v2_ird_ord
    requires it (-EOPNOTSUPP otherwise). siw's default is ``False``."""
    rtr_preference: RtrPreference = "read"
    """Responder RTR choice when both are offered: irdma_negotiate_mpa_v2_ird_ord picks
    ``"read"``; siw picks ``"write"``."""
    accept_markers: bool = True
    """irdma honours M in a received request; siw rejects a request with M set."""

    def __post_init__(self) -> None:
        # Every integer against the kernel type it is kept in (mpa_emu.stacks.irdma.limits): a
        # value no kernel could hold is refused here, before any host is built.
        check_config(self)

    def jiffies(self, seconds: float) -> int:
        """Convert seconds to jiffies of this host's HZ."""
        return round(seconds * self.hz)
