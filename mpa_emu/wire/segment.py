"""The core's value for one TCP segment on the wire, with its L2 and L3 envelope.

The state machine never touches scapy objects: it consumes and produces ``Segment``
values, and :mod:`mpa_emu.wire.codec` turns them into wire bytes and back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

# TCP flag bits (RFC 9293 section 3.1).
FIN: Final = 0x01
SYN: Final = 0x02
RST: Final = 0x04
PSH: Final = 0x08
ACK: Final = 0x10
URG: Final = 0x20
ECE: Final = 0x40
CWR: Final = 0x80

FLAGS: Final = ((FIN, "FIN"), (SYN, "SYN"), (RST, "RST"), (PSH, "PSH"), (ACK, "ACK"), (URG, "URG"),
         (ECE, "ECE"), (CWR, "CWR"))
"""Each TCP flag bit with its name, in bit order. A flag's letter (scapy's way of
writing flags) is its name's first."""

# Reports list SYN before FIN, as Wireshark's Info column does ("[SYN, ACK]").
_NAMED_ORDER: Final = (FLAGS[1], FLAGS[0], *FLAGS[2:])


def flag_names(flags: int) -> list[str]:
    """The names of the TCP flags set in ``flags``: ``["SYN", "ACK"]``."""
    return [name for bit, name in _NAMED_ORDER if flags & bit]


def _render_flags(flags: int) -> str:
    return "".join(name[0] for bit, name in FLAGS if flags & bit)


# Every value of the 12 flag bits of the TCP header (RFC 9293 section 3.1: 4 reserved
# bits, then the 8 named ones), rendered once: a kept trace names the flags of every frame.
_FLAGS_TEXT: Final = tuple(_render_flags(f) for f in range(1 << 12))


def flags_text(flags: int) -> str:
    """Render TCP flags the way scapy does (``"SA"``, ``"FA"``, ``"RA"``)."""
    if 0 <= flags < 4096:
        return _FLAGS_TEXT[flags]
    return _render_flags(flags)


@dataclass(slots=True, unsafe_hash=True)
class Segment:
    """One Ethernet frame carrying IPv4 or IPv6 and a TCP segment.

    Addresses are packed bytes: ``src_ip``/``dst_ip`` are 4 bytes (IPv4) or 16 bytes
    (IPv6), MACs are 6 bytes. ``vlan`` is the 802.1Q VLAN id or ``None`` when untagged;
    ``pcp`` the 802.1Q priority. ``options`` are the raw TCP option bytes (padded to a
    multiple of 4 by the codec), ``payload`` the TCP payload.

    A value: hashable and compared by its fields, never changed once made (a plain
    slotted class rather than a frozen one, so that its ``__init__`` stores straight into
    the slots in both builds; ``dataclasses.replace`` makes a changed copy).
    """

    src_mac: bytes
    dst_mac: bytes
    src_ip: bytes
    dst_ip: bytes
    sport: int
    dport: int
    seq: int
    ack: int
    flags: int
    window: int = 65535
    options: bytes = b""
    payload: bytes = b""
    vlan: int | None = None
    pcp: int = 0
    ttl: int = 64
    tos: int = 0
    ip_id: int = 0
    df: bool = True
    urg_ptr: int = 0
    flow_label: int = 0  # IPv6 flow label (20 bits); Linux peers set it by default

    def __init__(self, src_mac: bytes, dst_mac: bytes, src_ip: bytes, dst_ip: bytes, sport: int,
                 dport: int, seq: int, ack: int, flags: int, window: int = 65535,
                 options: bytes = b"", payload: bytes = b"", vlan: int | None = None,
                 pcp: int = 0, ttl: int = 64, tos: int = 0, ip_id: int = 0, df: bool = True,
                 urg_ptr: int = 0, flow_label: int = 0) -> None:
        self.src_mac = src_mac
        self.dst_mac = dst_mac
        self.src_ip = src_ip
        self.dst_ip = dst_ip
        self.sport = sport
        self.dport = dport
        self.seq = seq
        self.ack = ack
        self.flags = flags
        self.window = window
        self.options = options
        self.payload = payload
        self.vlan = vlan
        self.pcp = pcp
        self.ttl = ttl
        self.tos = tos
        self.ip_id = ip_id
        self.df = df
        self.urg_ptr = urg_ptr
        self.flow_label = flow_label

    @property
    def ipv4(self) -> bool:
        """True when the segment is carried in IPv4."""
        return len(self.src_ip) == 4

    @property
    def flag_text(self) -> str:
        """TCP flags as letters, for traces and summaries."""
        return flags_text(self.flags)

    def four_tuple(self) -> tuple[bytes, int, bytes, int]:
        """(src_ip, sport, dst_ip, dport)."""
        return (self.src_ip, self.sport, self.dst_ip, self.dport)


@dataclass(slots=True, unsafe_hash=True)
class Transmit:
    """A frame a host puts on the wire (or loops back internally).

    ``comment`` names the kernel function and the state transition behind the frame,
    e.g. ``"irdma_send_mpa_reject: MPAREQ_RCVD -> FIN_WAIT1"``; it becomes the pcapng
    frame comment. ``loopback`` frames never reach the wire: ``irdma_ipv4_is_lpb`` /
    ``irdma_ipv6_is_lpb`` connections are delivered inside the host (``do_lpb`` in
    ``irdma_make_cm_node``).
    """

    segment: Segment
    comment: str
    loopback: bool = False
    conn: int | None = None

    def __init__(self, segment: Segment, comment: str, loopback: bool = False,
                 conn: int | None = None) -> None:
        self.segment = segment
        self.comment = comment
        self.loopback = loopback
        self.conn = conn
