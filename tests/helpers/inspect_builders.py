"""Hand-made TCP conversations for the inspect, diagram and Lua plugin tests.

Frames are built with scapy from the layouts of RFC 5044 section 7.1 and RFC 6581 section 5,
with consistent sequence numbers, so tshark decodes them like real iWARP traffic
(``tests/views/test_conversation_builder.py`` checks the builder itself).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from scapy.layers.inet import IP, TCP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import Packet, Raw
from scapy.utils import PcapNgWriter, wrpcap

CLIENT_MAC = "02:00:00:00:00:01"
SERVER_MAC = "02:00:00:00:00:02"


@dataclass
class Conversation:
    """One TCP connection between a client and a server, frame by frame."""

    client: str = "192.168.10.1"
    server: str = "192.168.10.2"
    cport: int = 40001
    sport: int = 31000
    vlan: int | None = None
    client_isn: int = 1000
    server_isn: int = 5000
    frames: list[Packet] = field(default_factory=list)
    c_nxt: int = 0
    s_nxt: int = 0

    def __post_init__(self) -> None:
        self.c_nxt = self.client_isn
        self.s_nxt = self.server_isn

    def _frame(self, from_client: bool, flags: str, payload: bytes = b"",
               options: list[tuple[str, object]] | None = None, seq: int | None = None,
               ack: int | None = None, chksum: int | None = None) -> Packet:
        src, dst = (self.client, self.server) if from_client else (self.server, self.client)
        smac, dmac = (CLIENT_MAC, SERVER_MAC) if from_client else (SERVER_MAC, CLIENT_MAC)
        sp, dp = (self.cport, self.sport) if from_client else (self.sport, self.cport)
        my_seq = self.c_nxt if from_client else self.s_nxt
        their = self.s_nxt if from_client else self.c_nxt
        tcp = TCP(sport=sp, dport=dp, flags=flags, seq=my_seq if seq is None else seq,
                  ack=(their if "A" in flags else 0) if ack is None else ack,
                  window=65535, options=options or [])
        if chksum is not None:
            tcp.chksum = chksum
        l3 = IPv6(src=src, dst=dst) if ":" in src else IP(src=src, dst=dst)
        pkt: Packet = Ether(src=smac, dst=dmac)
        if self.vlan is not None:
            pkt = pkt / Dot1Q(vlan=self.vlan)
        pkt = pkt / l3 / tcp
        if payload:
            pkt = pkt / Raw(payload)
        advance = len(payload) + (1 if "S" in flags else 0) + (1 if "F" in flags else 0)
        if seq is None:
            if from_client:
                self.c_nxt += advance
            else:
                self.s_nxt += advance
        self.frames.append(pkt)
        return pkt

    def handshake(self, client_opts: list[tuple[str, object]] | None = None,
                  server_opts: list[tuple[str, object]] | None = None) -> Conversation:
        """SYN, SYN-ACK, ACK (irdma's options by default: MSS 1460, WS 2)."""
        self._frame(True, "S", options=client_opts or [("MSS", 1460), ("WScale", 2)])
        self._frame(False, "SA", options=server_opts or [("MSS", 1460), ("WScale", 2)])
        self._frame(True, "A")
        return self

    def client_sends(self, payload: bytes, flags: str = "A", **kw: object) -> Conversation:
        """The client sends ``payload`` (an ACK segment unless told otherwise)."""
        self._frame(True, flags, payload, **kw)  # type: ignore[arg-type]
        return self

    def server_sends(self, payload: bytes, flags: str = "A", **kw: object) -> Conversation:
        """The server sends ``payload``."""
        self._frame(False, flags, payload, **kw)  # type: ignore[arg-type]
        return self

    def ack_from_client(self) -> Conversation:
        return self.client_sends(b"")

    def ack_from_server(self) -> Conversation:
        return self.server_sends(b"")

    def graceful_close(self) -> Conversation:
        """FIN from the client, FIN from the server, last ACK."""
        self._frame(True, "FA")
        self._frame(False, "FA")
        self._frame(True, "A")
        return self


def write_pcap(path: Path, *convs: Conversation) -> Path:
    """Write every conversation's frames, in order, as classic pcap."""
    frames = [f for c in convs for f in c.frames]
    for i, f in enumerate(frames):
        f.time = 1_700_000_000 + i / 1000
    wrpcap(str(path), frames)
    return path


def write_pcapng(path: Path, *convs: Conversation) -> Path:
    """Write every conversation's frames, in order, as pcapng."""
    frames = [f for c in convs for f in c.frames]
    with PcapNgWriter(str(path)) as w:
        for i, f in enumerate(frames):
            f.time = 1_700_000_000 + i / 1000
            w.write(f)
    return path
