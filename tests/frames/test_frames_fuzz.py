"""Bad bytes never raise: any payload behind a TCP header, any input to the MPA layers,
dissects without an exception (scapy's dissector errors re-raised, not hidden), and
building the dissected packet gives back exactly the bytes that went in."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.inet import IP, TCP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import Packet, Raw

from mpa_emu.frames import (
    DDP,
    MPAFPDU,
    MPAReply,
    MPARequest,
    RDMAPReadRequest,
    RDMAPTerminate,
    dissect_stream,
)
from mpa_emu.frames.conversation import Conversation
from mpa_emu.wire.mpa import KEY_REP, KEY_REQ

pytestmark = pytest.mark.usefixtures("strict_dissection")


# Payloads that reach every branch: random bytes, a key followed by random bytes, and a
# well-formed header with random flags, rev and PD_Length.
headers = st.builds(lambda key, f, r, pd, tail: key + bytes([f, r]) + pd.to_bytes(2, "big")
                    + tail, st.sampled_from([KEY_REQ, KEY_REP]), st.integers(0, 255),
                    st.integers(0, 255), st.integers(0, 0xFFFF), st.binary(max_size=80))
payloads = st.one_of(st.binary(max_size=120),
                     st.builds(lambda k, t: k + t, st.sampled_from([KEY_REQ, KEY_REP]),
                               st.binary(max_size=60)),
                     headers)
envelopes = st.sampled_from(["ipv4", "ipv6", "dot1q"])


def _frame(envelope: str, payload: bytes) -> bytes:
    l3: Packet
    if envelope == "ipv6":
        l3 = Ether() / IPv6()
    elif envelope == "dot1q":
        l3 = Ether() / Dot1Q(vlan=5) / IP()
    else:
        l3 = Ether() / IP()
    return bytes(l3 / TCP(sport=40001, dport=31000, flags="PA") / Raw(payload))


@settings(max_examples=200, deadline=None)
@given(envelope=envelopes, payload=payloads)
def test_any_tcp_payload_dissects_without_raising_and_rebuilds(envelope: str,
                                                               payload: bytes) -> None:
    wire = _frame(envelope, payload)
    pkt = Ether(wire)
    assert bytes(pkt[TCP].payload) == payload
    assert bytes(pkt) == wire
    pkt.summary()
    pkt.show(dump=True)


@settings(max_examples=200, deadline=None)
@given(cls=st.sampled_from([MPARequest, MPAReply, MPAFPDU, DDP, RDMAPReadRequest,
                            RDMAPTerminate]),
       data=st.one_of(st.binary(min_size=1, max_size=120), headers))
def test_every_layer_takes_any_bytes(cls: type[Packet], data: bytes) -> None:
    # (Empty input is scapy's "build the default packet", so it is left out.)
    pkt = cls(data)
    assert bytes(pkt) == data
    pkt.show(dump=True)
    pkt.summary()


@st.composite
def fpdu_like(draw: st.DrawFn) -> bytes:
    ulen = draw(st.integers(0, 80))
    body = draw(st.binary(min_size=0, max_size=ulen + 8))
    return ulen.to_bytes(2, "big") + body


@settings(max_examples=200, deadline=None)
@given(data=fpdu_like())
def test_fpdus_with_lying_lengths_never_raise(data: bytes) -> None:
    pkt = MPAFPDU(data)
    assert bytes(pkt) == data
    if not pkt.truncated:
        assert isinstance(pkt.crc_ok, bool)


@settings(max_examples=100, deadline=None)
@given(chunks=st.lists(st.one_of(payloads, fpdu_like()), min_size=1, max_size=6),
       reply=st.booleans())
def test_stream_dissection_of_garbage_never_raises(chunks: list[bytes], reply: bool) -> None:
    conv = Conversation()
    conv.handshake()
    conv.data(True, KEY_REQ + bytes([0x40, 1, 0, 0]))
    if reply:
        conv.data(False, KEY_REP + bytes([0x40, 1, 0, 0]))
    for i, chunk in enumerate(chunks):
        conv.data(i % 2 == 0, chunk, ack=False)
    conv.close()
    out = dissect_stream(conv.packets)
    for pkt in out:
        pkt.show(dump=True)
