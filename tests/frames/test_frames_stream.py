"""From wire frames to MPA layers: the TCP binding (Ether(raw) over IPv4, IPv6 and
802.1Q), the fallback for other payloads, and stream reassembly with per-conversation
state (dissect_stream and scapy's TCPSession via the tcp_reassemble hook)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.golden_ddp import READ_RTR_FPDU, SEND_FPDU, WRITE_RTR_FPDU
from helpers.golden_mpa import V1_REQUEST, V2_REJECT, V2_REPLY, V2_REQUEST
from scapy.layers.http import HTTP, HTTPRequest
from scapy.layers.inet import IP, TCP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import Packet, Raw
from scapy.sendrecv import sniff
from scapy.sessions import TCPSession
from scapy.utils import wrpcap

from mpa_emu.frames import (
    MPA,
    MPAFPDU,
    DDPUntagged,
    MPAReply,
    MPARequest,
    RDMAPReadRequest,
    dissect_stream,
    install_bindings,
    uninstall_bindings,
)
from mpa_emu.frames.conversation import Conversation

pytestmark = pytest.mark.usefixtures("strict_dissection")


ENVELOPES = {
    "ipv4": lambda: Ether() / IP(src="192.168.10.1", dst="192.168.10.2"),
    "ipv6": lambda: Ether() / IPv6(src="2001:db8::1", dst="2001:db8::2"),
    "dot1q": lambda: Ether() / Dot1Q(vlan=100, prio=3) / IP(src="10.0.0.1", dst="10.0.0.2"),
}


@pytest.mark.parametrize("envelope", sorted(ENVELOPES))
@pytest.mark.parametrize(("golden", "cls"), [(V2_REQUEST, MPARequest), (V2_REPLY, MPAReply),
                                             (V2_REJECT, MPAReply), (V1_REQUEST, MPARequest)])
def test_ether_raw_dissects_mpa_frames_with_no_extra_call(envelope: str, golden: bytes,
                                                          cls: type[Packet]) -> None:
    frame = ENVELOPES[envelope]() / TCP(sport=40001, dport=31000, flags="PA") / Raw(golden)
    wire = bytes(frame)
    assert wire.endswith(golden)
    pkt = Ether(wire)
    layer = pkt[TCP].payload
    assert type(layer) is cls
    assert bytes(layer) == golden and layer.problem is None
    assert bytes(pkt) == wire


@pytest.mark.parametrize("envelope", sorted(ENVELOPES))
@pytest.mark.parametrize("golden", [READ_RTR_FPDU, WRITE_RTR_FPDU, SEND_FPDU])
def test_fpdus_need_the_conversation_or_an_explicit_class(envelope: str,
                                                          golden: bytes) -> None:
    wire = bytes(ENVELOPES[envelope]() / TCP(sport=40001, dport=31000, flags="PA") /
                 Raw(golden))
    payload = Ether(wire)[TCP].payload
    assert type(payload) is Raw  # no key: plain Ether(raw) cannot know it is an FPDU
    fpdu = MPAFPDU(payload.load)
    assert fpdu.crc_ok is True and bytes(fpdu) == golden


def test_building_through_the_envelope_keeps_scapy_lengths_right() -> None:
    pkt = Ether(bytes(ENVELOPES["ipv4"]() / TCP() / MPARequest(flags="CS", rev=2, ird=1,
                                                                 ord=1, read0=1)))
    assert pkt[IP].len == 20 + 20 + 24
    assert pkt[MPARequest].pd_length == 4


def test_other_tcp_payloads_keep_the_class_tcp_would_choose() -> None:
    http = Ether(bytes(Ether() / IP() / TCP(sport=1234, dport=80) /
                       Raw(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")))
    assert http.haslayer(HTTP) and http.haslayer(HTTPRequest)
    assert MPA(b"not mpa at all") .__class__ is Raw


def test_mpa_is_tried_before_port_bindings() -> None:
    pkt = Ether(bytes(Ether() / IP() / TCP(sport=1234, dport=80) / Raw(V1_REQUEST)))
    assert isinstance(pkt[TCP].payload, MPARequest)


def test_bindings_can_be_removed_and_restored() -> None:
    wire = bytes(Ether() / IP() / TCP(sport=40001, dport=31000) / Raw(V1_REQUEST))
    uninstall_bindings()
    try:
        assert type(Ether(wire)[TCP].payload) is Raw
        install_bindings()
        install_bindings()  # idempotent
        assert sum(cls is MPA for _, cls in TCP.payload_guess) == 1
    finally:
        install_bindings()
    assert type(Ether(wire)[TCP].payload) is MPARequest


@pytest.mark.parametrize(("key", "cls"), [(b"MPA ID Rex Frame", MPARequest),
                                          (b"MPA ID Rep Frams", MPAReply)])
def test_a_near_miss_key_is_shown_with_its_problem(key: bytes, cls: type[Packet]) -> None:
    wire = bytes(Ether() / IP() / TCP(sport=40001, dport=31000) /
                 Raw(key + bytes.fromhex("40010000")))
    layer = Ether(wire)[TCP].payload
    assert type(layer) is cls
    assert f"key {key!r} is not" in layer.problem


def test_a_reply_with_a_bad_key_does_not_start_fpdus() -> None:
    conv = Conversation()
    conv.handshake()
    conv.data(True, V2_REQUEST)
    conv.data(False, b"MPA ID Rep Frams" + V2_REPLY[16:])
    conv.data(True, READ_RTR_FPDU)
    layers = _payload_layers(dissect_stream(conv.packets))
    assert [type(x) for x in layers] == [MPARequest, MPAReply, Raw]
    assert "is not b'MPA ID Rep Frame'" in layers[1].problem


def test_a_payload_merely_starting_with_mpa_stays_raw() -> None:
    wire = bytes(Ether() / IP() / TCP(sport=40001, dport=31000) / Raw(b"MPA is fun, right? ok"))
    assert type(Ether(wire)[TCP].payload) is Raw


def test_mpa_entry_point_returns_request_or_reply() -> None:
    assert type(MPA(V2_REQUEST)) is MPARequest
    assert type(MPA(V2_REPLY)) is MPAReply


def _accepted_conversation(conv: Conversation) -> Conversation:
    conv.handshake()
    conv.data(True, V2_REQUEST)
    conv.data(False, V2_REPLY)
    return conv


def _payload_layers(packets: list[Packet]) -> list[Packet]:
    return [p[TCP].payload for p in packets if TCP in p and p[TCP].payload]


@pytest.mark.parametrize("conv", [Conversation(), Conversation.ipv6(),
                                  Conversation(vlan=7)], ids=["ipv4", "ipv6", "dot1q"])
def test_dissect_stream_turns_payloads_after_an_accepting_reply_into_fpdus(
        conv: Conversation) -> None:
    _accepted_conversation(conv)
    conv.data(True, READ_RTR_FPDU)
    conv.data(False, SEND_FPDU)
    conv.close()
    out = dissect_stream(conv.packets)
    assert len(out) == len(conv.packets)  # handshake, ACKs and FINs come through too
    layers = _payload_layers(out)
    assert [type(x) for x in layers] == [MPARequest, MPAReply, MPAFPDU, MPAFPDU]
    assert layers[2][RDMAPReadRequest].sink_stag == 0xABCD
    assert layers[3][DDPUntagged].opcode == 3 and layers[3].crc_ok is True
    assert [bytes(p) for p in out] == conv.wire()


def test_request_split_over_segments_is_reassembled() -> None:
    conv = Conversation()
    conv.handshake()
    first = conv.segment(True, "PA", V2_REQUEST[:10])
    conv.data(True, V2_REQUEST[10:])
    out = dissect_stream(conv.packets)
    layers = _payload_layers(out)
    assert len(layers) == 1 and bytes(layers[0]) == V2_REQUEST
    assert layers[0].underlayer.seq == first[TCP].seq
    assert Ether(bytes(layers[0].underlayer.underlayer.underlayer))[MPARequest].problem is None
    assert layers[0].private_data == b"hello from initiator"


def test_fpdu_split_over_segments_is_reassembled() -> None:
    conv = _accepted_conversation(Conversation())
    conv.data(True, READ_RTR_FPDU[:7], ack=False)
    conv.data(True, READ_RTR_FPDU[7:30], ack=False)
    conv.data(True, READ_RTR_FPDU[30:])
    layers = _payload_layers(dissect_stream(conv.packets))
    assert type(layers[-1]) is MPAFPDU and layers[-1].crc_ok is True
    assert bytes(layers[-1]) == READ_RTR_FPDU


def test_coalesced_fpdus_come_out_stacked() -> None:
    conv = _accepted_conversation(Conversation())
    conv.data(False, SEND_FPDU + SEND_FPDU + READ_RTR_FPDU)
    last = _payload_layers(dissect_stream(conv.packets))[-1]
    assert [type(x) for x in (last, last.payload, last.payload.payload)] == [MPAFPDU] * 3
    assert bytes(last) == SEND_FPDU + SEND_FPDU + READ_RTR_FPDU


def test_after_a_reject_payloads_are_not_fpdus() -> None:
    conv = Conversation()
    conv.handshake()
    conv.data(True, V2_REQUEST)
    conv.data(False, V2_REJECT)
    conv.data(True, SEND_FPDU)
    layers = _payload_layers(dissect_stream(conv.packets))
    assert [type(x) for x in layers] == [MPARequest, MPAReply, Raw]


def test_retransmitted_segment_is_not_dissected_twice() -> None:
    conv = _accepted_conversation(Conversation())
    conv.data(True, READ_RTR_FPDU)
    resend = conv.packets[-2].copy()
    conv.packets.append(resend)
    conv.data(True, SEND_FPDU)
    layers = _payload_layers(dissect_stream(conv.packets))
    fpdus = [x for x in layers if isinstance(x, MPAFPDU)]
    assert len(fpdus) == 2 and all(f.crc_ok for f in fpdus)


def test_a_new_syn_on_the_same_ports_forgets_the_old_connection() -> None:
    conv = _accepted_conversation(Conversation())
    conv.segment(False, "RA")
    conv.handshake()  # irdma's v1 retry reuses the ports
    conv.data(True, SEND_FPDU)
    layers = _payload_layers(dissect_stream(conv.packets))
    assert [type(x) for x in layers] == [MPARequest, MPAReply, Raw]


def test_conversation_state_does_not_leak_to_another_connection() -> None:
    first = _accepted_conversation(Conversation())
    second = Conversation()
    second.initiator.port = 40002
    second.handshake()
    second.data(True, SEND_FPDU)
    layers = _payload_layers(dissect_stream(first.packets + second.packets))
    assert type(layers[-1]) is Raw


def test_frame_cut_short_by_fin_is_returned_truncated() -> None:
    conv = Conversation()
    conv.handshake()
    partial = conv.segment(True, "PA", V2_REQUEST[:30])
    conv.segment(True, "FA")
    out = dissect_stream(conv.packets)
    assert len(out) == len(conv.packets) - 1  # the partial segment rides on the FIN
    req = out[-1][MPARequest]
    assert "only 10 bytes" in req.problem
    assert out[-1][TCP].flags.F and out[-1][TCP].seq == partial[TCP].seq


def test_tcpsession_sniff_uses_the_reassembly_hook(tmp_path: Path) -> None:
    conv = _accepted_conversation(Conversation())
    conv.data(True, READ_RTR_FPDU[:20], ack=False)
    conv.data(True, READ_RTR_FPDU[20:])
    path = tmp_path / "split.pcap"
    wrpcap(str(path), conv.packets)
    layers = _payload_layers(list(sniff(offline=str(path), session=TCPSession)))
    assert [type(x) for x in layers] == [MPARequest, MPAReply, MPAFPDU]
    assert layers[-1].crc_ok is True


def test_same_input_gives_the_same_dissection() -> None:
    def run() -> list[str]:
        conv = _accepted_conversation(Conversation())
        conv.data(True, READ_RTR_FPDU)
        return [p.show(dump=True) for p in dissect_stream(conv.packets)]

    assert run() == run()


def test_crc_is_ignored_when_neither_side_set_c() -> None:
    conv = Conversation()
    conv.handshake()
    conv.data(True, bytes(MPARequest(flags="", rev=1)))
    conv.data(False, bytes(MPAReply(flags="", rev=1)))
    conv.data(True, READ_RTR_FPDU[:-4] + bytes(4))  # siw sends 0 when CRC is off
    fpdu = _payload_layers(dissect_stream(conv.packets))[-1]
    assert type(fpdu) is MPAFPDU
    assert fpdu.crc_ok is None and fpdu.problem is None


def test_crc_is_checked_when_the_reply_sets_c() -> None:
    conv = Conversation()
    conv.handshake()
    conv.data(True, bytes(MPARequest(flags="", rev=1)))
    conv.data(False, bytes(MPAReply(flags="C", rev=1)))
    conv.data(True, READ_RTR_FPDU[:-4] + bytes(4))
    fpdu = _payload_layers(dissect_stream(conv.packets))[-1]
    assert fpdu.crc_ok is False and "should be 0x5d1eaa90" in fpdu.problem
