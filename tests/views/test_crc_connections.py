"""The CRC memory of a capture's ladder: which connections negotiated CRC (RFC 5044
section 7.1), forgotten once closed (RFC 9293 section 3.6) and lingered."""

from __future__ import annotations

from pathlib import Path

from helpers.real_like_captures import KEY_REP, KEY_REQ, fpdu, send
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.utils import wrpcap

from mpa_emu.views.crc_connections import CrcConnections, connection_key
from mpa_emu.views.diagram import from_capture

A = bytes([10, 0, 0, 1])
B = bytes([10, 0, 0, 2])
FIN, RST = 0x01, 0x04


def test_one_key_for_both_directions_and_the_sides_differ() -> None:
    conn, side = connection_key(A, 5000, B, 6000)
    back, other = connection_key(B, 6000, A, 5000)
    assert conn == back == A + bytes([0x13, 0x88]) + B + bytes([0x17, 0x70])
    assert {side, other} == {1, 2}
    assert connection_key(A, 5000, B, 6001)[0] != conn


def test_fins_from_both_sides_close_and_the_linger_then_forgets() -> None:
    conn, low = connection_key(A, 5000, B, 6000)
    _, high = connection_key(B, 6000, A, 5000)
    crc = CrcConnections(linger=3)
    crc.negotiated(conn)
    crc.ending(conn, low, FIN, number=10)
    crc.ending(conn, low, FIN, number=11)  # the same side again: still half-closed
    crc.expire(1000)
    assert conn in crc
    crc.ending(conn, high, FIN, number=20)
    for number in (21, 22):
        crc.expire(number)
        assert conn in crc  # late retransmissions still see CRC
    crc.expire(23)
    assert conn not in crc and len(crc) == 0


def test_a_rst_closes_and_a_new_syn_forgets_at_once() -> None:
    one = connection_key(A, 5000, B, 6000)[0]
    two = connection_key(A, 5001, B, 6000)[0]
    crc = CrcConnections(linger=5)
    crc.negotiated(one)
    crc.negotiated(two)
    crc.ending(one, 1, RST, number=7)
    crc.expire(11)
    assert one in crc
    crc.expire(12)
    assert one not in crc and two in crc
    crc.started(two)
    assert two not in crc
    crc.ending(two, 1, RST, number=13)  # not remembered: nothing to close
    crc.expire(10_000)
    assert len(crc) == 0


def test_a_connection_without_c_is_never_remembered() -> None:
    crc = CrcConnections()
    crc.ending(b"x", 1, FIN, number=1)
    assert b"x" not in crc and len(crc) == 0


def _frame(src: str, dst: str, sport: int, dport: int, seq: int, ack: int, flags: str,
           payload: bytes = b"") -> Ether:
    pkt = Ether() / IP(src=src, dst=dst) / TCP(sport=sport, dport=dport, seq=seq, ack=ack,
                                               flags=flags)
    return Ether(bytes(pkt / Raw(payload) if payload else pkt))


def test_a_stray_fpdu_after_both_fins_keeps_its_crc_verdict(tmp_path: Path) -> None:
    c, s = "10.0.0.1", "10.0.0.2"
    req = KEY_REQ + bytes.fromhex("50020000")  # flags C and S (0x50), rev 2, no data
    rep = KEY_REP + bytes.fromhex("40020000")  # flags C (0x40), rev 2, no data
    bad = fpdu(send(1, b"abcd"), "wrong")
    frames = [
        _frame(c, s, 5000, 6000, 1, 0, "S"),
        _frame(s, c, 6000, 5000, 1, 2, "SA"),
        _frame(c, s, 5000, 6000, 2, 2, "PA", req),
        _frame(s, c, 6000, 5000, 2, 2 + len(req), "PA", rep),
        _frame(c, s, 5000, 6000, 2 + len(req), 2 + len(rep), "PA", bad),
        _frame(c, s, 5000, 6000, 2 + len(req) + len(bad), 2 + len(rep), "FA"),
        _frame(s, c, 6000, 5000, 2 + len(rep), 3 + len(req) + len(bad), "FA"),
        _frame(c, s, 5000, 6000, 2 + len(req), 2 + len(rep), "PA", bad),  # a stray copy
    ]
    path = tmp_path / "closed.pcap"
    wrpcap(str(path), frames)
    text = from_capture(path).text()
    assert text.count("bad CRC") == 2
