"""The capture builder the inspect and diagram tests write their pcaps with."""

from __future__ import annotations

from helpers.inspect_builders import Conversation
from scapy.layers.inet import TCP


def test_builder_keeps_sequence_numbers_consistent() -> None:
    conv = Conversation().handshake().client_sends(b"x" * 10).ack_from_server()
    syn, synack, ack, data, ack2 = conv.frames
    assert synack[TCP].ack == syn[TCP].seq + 1
    assert data[TCP].seq == ack[TCP].seq == syn[TCP].seq + 1
    assert ack2[TCP].ack == data[TCP].seq + 10
