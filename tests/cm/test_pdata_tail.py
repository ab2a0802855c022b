"""The v2 +4 quirk's 4 bytes: irdma_parse_mpa copies PD_Length bytes from after the
24-byte v2 header, so the last 4 lie past the frame. The emulator reports zeros there by
default, the segment's next bytes with ``Quirks(v2_pdata_tail="segment")``, and says
wherever it shows them that they come from past the frame."""

from __future__ import annotations

import pytest
from mpa_emu.stacks.contract.events import IwEvent, Upcall
from mpa_emu.stacks.irdma.config import CmConfig, Quirks
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether

from mpa_emu.net import Manual, Network
from mpa_emu.scenario import ScenarioError, loads
from mpa_emu.views.describe import upcall_label

US = 1_000
# RFC 5044 7.1 + RFC 6581 5: key, flags 0x50 (CRC, enhanced), rev 2, PD_Length 24;
# IRD word 0x8010 (P2P, 16), ORD word 0xC010 (Write and Read RTR, 16); 20 bytes of ULP data.
REQUEST = (b"MPA ID Req Frame" + bytes.fromhex("50020018" "8010c010")
           + b"hello from initiator")
TAIL = b"TAIL"


def _request_upcall(quirks: Quirks, trailing: bytes) -> Upcall:
    net = Network(1)
    alice = net.add_host("alice", "192.0.2.1")
    bob = net.add_host("bob", "192.0.2.2", config=CmConfig(quirks=quirks))
    bob.set_neighbour("192.0.2.9", alice.mac)
    bob.listen(31000, "192.0.2.2", policy=Manual())
    head = Ether(src=alice.mac.hex(":"), dst=bob.mac.hex(":")) / IP(
        src="192.0.2.9", dst="192.0.2.2", flags="DF", id=0)
    net.inject(head / TCP(sport=40000, dport=31000, flags="S", seq=5000, window=65535,
                          options=[("MSS", 1460), ("EOL", None)]), via="alice")
    net.run(until_ns=100 * US)
    synack = net.packet(2)[TCP]
    net.inject(head / TCP(sport=40000, dport=31000, flags="A", seq=5001, ack=synack.seq + 1,
                          window=65535) / (REQUEST + trailing), via="alice")
    net.run(until_ns=500 * US)
    (req,) = bob.events(IwEvent.CONNECT_REQUEST)
    return req


def test_default_reports_zeros_past_the_frame() -> None:
    req = _request_upcall(Quirks(), TAIL)
    assert req.private_data == b"hello from initiator" + bytes(4)
    assert req.private_data_len == 24 and req.private_data_past_frame == 4
    assert upcall_label(req).endswith(
        'pd="hello from initiator" +4 past the frame: 00000000')


def test_segment_choice_reports_the_bytes_that_follow_the_frame() -> None:
    req = _request_upcall(Quirks(v2_pdata_tail="segment"), TAIL)
    assert req.private_data == b"hello from initiator" + TAIL
    assert upcall_label(req).endswith(f"+4 past the frame: {TAIL.hex()}")
    # The segment ends with the frame: nothing follows, zeros.
    req = _request_upcall(Quirks(v2_pdata_tail="segment"), b"")
    assert req.private_data == b"hello from initiator" + bytes(4)


def test_without_the_quirk_nothing_lies_past_the_frame() -> None:
    req = _request_upcall(Quirks(v2_pdata_plus4=False, v2_pdata_tail="segment"), TAIL)
    assert req.private_data == b"hello from initiator"
    assert req.private_data_past_frame == 0
    assert "past the frame" not in upcall_label(req)


def test_the_choice_is_checked() -> None:
    with pytest.raises(ValueError, match="zeros, segment"):
        Quirks(v2_pdata_tail="garbage")
    text = ('[[host]]\nname = "a"\naddress = "192.0.2.1"\n[host.config.quirks]\n'
            'v2_pdata_tail = "garbage"\n')
    with pytest.raises(ScenarioError, match=r'<t>:5: .*v2_pdata_tail: expected "zeros" '
                                            r'or "segment"'):
        loads(text, "<t>")
    ok = loads(text.replace("garbage", "segment"), "<t>")
    assert ok.hosts[0].config.quirks.v2_pdata_tail == "segment"
