"""A fixture changed in one place must be reported at the right frame, in the right field.

Mutations are made with scapy on copies of the fixtures (checksums recomputed, so the
NIC would deliver the frames)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from helpers.replay_cli import PCAPS, replay
from scapy.layers.inet import IP, TCP
from scapy.packet import Packet, Raw
from scapy.utils import rdpcap, wrpcap

A, P = "192.168.10.1", "192.168.10.2"


def mutated(tmp_path: Path, name: str, number: int, change: Callable[[Packet], None]) -> Path:
    """A copy of fixture ``name`` with frame ``number`` (1-based) changed."""
    pkts = rdpcap(str(PCAPS / name))
    pkt = pkts[number - 1]
    change(pkt)
    del pkt[IP].chksum
    del pkt[TCP].chksum
    out = tmp_path / f"mutated-{name}"
    wrpcap(str(out), pkts)
    return out


def first(report: dict[str, Any]) -> dict[str, Any]:
    errors = [d for d in report["divergences"] if d["severity"] == "error"]
    assert errors
    return errors[0]


def flip_psh(pkt: Packet) -> None:
    pkt[TCP].flags = int(pkt[TCP].flags) | 0x08


def test_unmodified_fixture_matches(tmp_path: Path) -> None:
    rc, text, _ = replay(PCAPS / "v2_accept.pcap", "--emulate", P, tmp_path=tmp_path)
    assert rc == 0, text


def test_one_flag_in_the_synack_is_reported_at_frame_2(tmp_path: Path) -> None:
    cap = mutated(tmp_path, "v2_accept.pcap", 2, flip_psh)
    rc, text, report = replay(cap, "--emulate", P, tmp_path=tmp_path)
    assert rc == 1
    d = first(report)
    assert (d["frame"], d["kind"]) == (2, "mismatch")
    assert [f["name"] for f in d["fields"]] == ["flags"]
    assert d["fields"][0] == {"name": "flags", "expected": "SYN|PSH|ACK", "actual": "SYN|ACK"}
    assert "DIVERGENCE at frame 2: flags differs" in text.splitlines()[0]


def test_one_flag_in_an_injected_frame_changes_what_follows(tmp_path: Path) -> None:
    # A's third ACK turned into ACK|RST: the passive node is closed (passive_open_err),
    # so its ACK of the MPA request (frame 5) is never sent.
    cap = mutated(tmp_path, "v2_accept.pcap", 3,
                  lambda p: setattr(p[TCP], "flags", int(p[TCP].flags) | 0x04))
    rc, _, report = replay(cap, "--emulate", P, tmp_path=tmp_path)
    assert rc == 1
    assert (first(report)["frame"], first(report)["kind"]) == (5, "missing")


def test_one_ack_in_a_recorded_frame_is_reported_at_that_frame(tmp_path: Path) -> None:
    cap = mutated(tmp_path, "v2_accept.pcap", 5, lambda p: setattr(p[TCP], "ack", p[TCP].ack + 1))
    rc, _, report = replay(cap, "--emulate", P, tmp_path=tmp_path)
    assert rc == 1
    d = first(report)
    assert (d["frame"], d["kind"]) == (5, "mismatch")
    assert [f["name"] for f in d["fields"]] == ["ack"]
    assert int(d["fields"][0]["expected"]) == int(d["fields"][0]["actual"]) + 1


def test_one_ack_in_an_injected_frame_makes_check_seq_drop_it(tmp_path: Path) -> None:
    # The MPA request acks one byte too many: irdma_check_seq drops it silently, so the
    # passive node never ACKs it (frame 5 missing).
    cap = mutated(tmp_path, "v2_accept.pcap", 4, lambda p: setattr(p[TCP], "ack", p[TCP].ack + 1))
    rc, text, report = replay(cap, "--emulate", P, tmp_path=tmp_path)
    assert rc == 1
    d = first(report)
    assert (d["frame"], d["kind"]) == (5, "missing")
    assert "check_seq" in text


def _payload_byte(index: int, xor: int) -> Callable[[Packet], None]:
    # The payload may dissect as an MPA layer (mpa_emu.frames binds it on TCP), so edit
    # the TCP payload's bytes rather than a Raw layer.
    def change(pkt: Packet) -> None:
        data = bytearray(bytes(pkt[TCP].payload))
        data[index] ^= xor
        pkt[TCP].remove_payload()
        pkt[TCP].add_payload(Raw(bytes(data)))
    return change


def test_one_private_data_byte_of_the_reply_is_reported_at_frame_6(tmp_path: Path) -> None:
    # Byte 21 of the reply is the low byte of the IRD word in the RFC 6581 block, the
    # first bytes of the private data on the wire: irdma advertises IRD 127 (0x7f).
    cap = mutated(tmp_path, "v2_accept.pcap", 6, _payload_byte(21, 0x01))
    rc, _, report = replay(cap, "--emulate", P, tmp_path=tmp_path)
    assert rc == 1
    d = first(report)
    assert (d["frame"], d["kind"]) == (6, "mismatch")
    assert d["fields"] == [{"name": "payload byte 21", "expected": "0x7e", "actual": "0x7f"}]


def test_request_bytes_chosen_by_the_cm_are_reported_when_emulating_the_initiator(
        tmp_path: Path) -> None:
    # Byte 23 is the low byte of the ORD word: the initiator offers ORD 16 (0x10).
    cap = mutated(tmp_path, "v2_accept.pcap", 4, _payload_byte(23, 0x02))
    rc, _, report = replay(cap, "--emulate", A, tmp_path=tmp_path)
    # The application connects with the recorded IRD/ORD, so the rebuilt request carries
    # ORD 18 too and nothing diverges: IRD/ORD are the application's choice.
    assert rc == 0
    # The M flag is the CM's choice (set only with iw_ooo, irdma_build_mpa_v2): a divergence.
    cap = mutated(tmp_path, "v2_accept.pcap", 4, _payload_byte(16, 0x80))
    rc, _, report = replay(cap, "--emulate", A, tmp_path=tmp_path)
    assert rc == 1
    d = first(report)
    assert (d["frame"], d["kind"]) == (4, "mismatch")
    assert d["fields"] == [{"name": "payload byte 16", "expected": "0xd0", "actual": "0x50"}]


def test_reject_private_data_byte_in_the_rtr_block_is_reported(tmp_path: Path) -> None:
    cap = mutated(tmp_path, "v2_reject.pcap", 6, _payload_byte(22, 0x80))
    rc, _, report = replay(cap, "--emulate", P, tmp_path=tmp_path)
    assert rc == 1
    d = first(report)
    assert (d["frame"], d["kind"]) == (6, "mismatch")
    assert d["fields"][0]["name"] == "payload byte 22"


def test_json_explains_a_missing_frame_by_the_last_injected_one(tmp_path: Path) -> None:
    cap = mutated(tmp_path, "v2_accept.pcap", 4, lambda p: setattr(p[TCP], "ack", p[TCP].ack + 1))
    _, _, report = replay(cap, "--emulate", P, tmp_path=tmp_path)
    d = first(report)
    assert d["last_injected"]["frame"] == 4
    assert "irdma_check_seq" in d["last_injected"]["outcome"]
