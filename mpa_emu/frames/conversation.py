"""A small builder of whole TCP conversations as scapy frames, with consistent sequence
and acknowledgement numbers, for captures that tshark and the stream dissector read as
real iWARP traffic (IPv4, IPv6, optionally 802.1Q tagged).

It knows nothing of the CM's policy: it writes what it is told, one segment per call,
with timestamps on a fixed virtual clock so the same calls give the same capture.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scapy.layers.inet import IP, TCP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import Packet, Raw

from mpa_emu.wire import seq as seq_space


@dataclass
class Endpoint:
    """One side of the conversation and its next sequence number."""

    mac: str
    ip: str
    port: int
    seq: int


@dataclass
class Conversation:
    """Frames between an initiator and a responder, in order.

    ``vlan`` tags every frame with 802.1Q; ``step`` is the virtual time between frames.
    """

    initiator: Endpoint = field(default_factory=lambda: Endpoint(
        "02:00:00:00:00:01", "192.168.10.1", 40001, 0x159BF75F))
    responder: Endpoint = field(default_factory=lambda: Endpoint(
        "02:00:00:00:00:02", "192.168.10.2", 31000, 0x2A3B4C5D))
    vlan: int | None = None
    step: float = 0.001
    packets: list[Packet] = field(default_factory=list)

    @classmethod
    def ipv6(cls, vlan: int | None = None) -> Conversation:
        """A conversation between two documentation IPv6 addresses."""
        return cls(initiator=Endpoint("02:00:00:00:00:01", "2001:db8::1", 40001, 0x159BF75F),
                   responder=Endpoint("02:00:00:00:00:02", "2001:db8::2", 31000, 0x2A3B4C5D),
                   vlan=vlan)

    def segment(self, from_initiator: bool, flags: str, payload: bytes = b"") -> Packet:
        """Append one segment and advance the sender's sequence number (SYN and FIN
        count one); the ACK number is the peer's next sequence number."""
        src, dst = ((self.initiator, self.responder) if from_initiator
                    else (self.responder, self.initiator))
        l2 = Ether(src=src.mac, dst=dst.mac)
        if self.vlan is not None:
            l2 = l2 / Dot1Q(vlan=self.vlan)
        l3 = IPv6(src=src.ip, dst=dst.ip) if ":" in src.ip else IP(src=src.ip, dst=dst.ip)
        ack = dst.seq if "A" in flags else 0
        tcp = TCP(sport=src.port, dport=dst.port, seq=src.seq, ack=ack, flags=flags,
                  window=64240)
        pkt = l2 / l3 / tcp
        if payload:
            pkt = pkt / Raw(payload)
        pkt.time = len(self.packets) * self.step
        src.seq = seq_space.add(src.seq, len(payload) + ("S" in flags) + ("F" in flags))
        self.packets.append(pkt)
        return pkt

    def handshake(self) -> None:
        """SYN, SYN/ACK, ACK."""
        self.segment(True, "S")
        self.segment(False, "SA")
        self.segment(True, "A")

    def data(self, from_initiator: bool, payload: bytes, *, ack: bool = True) -> None:
        """A PSH/ACK segment with ``payload``, then (if ``ack``) the peer's pure ACK."""
        self.segment(from_initiator, "PA", payload)
        if ack:
            self.segment(not from_initiator, "A")

    def close(self, from_initiator: bool = True) -> None:
        """FIN/ACK from one side, FIN/ACK back, final ACK."""
        self.segment(from_initiator, "FA")
        self.segment(not from_initiator, "FA")
        self.segment(from_initiator, "A")

    def wire(self) -> list[bytes]:
        """The frames as bytes."""
        return [bytes(p) for p in self.packets]
