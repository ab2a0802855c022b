"""A peer that negotiates MPA without CRC and then sends FPDUs whose CRC field is zero,
against the emulated irdma host through a TAP device.

irdma sets C in its reply (RFC 5044 section 7.1: either side's C bit makes CRC
mandatory), so each of the peer's FPDUs fails the NIC's CRC check:
IRDMA_AE_LLP_RECEIVED_MPA_CRC_ERROR -> irdma_terminate_connection sends a Terminate
(irdma_bld_terminate_hdr: layer LLP, EType DDP_LLP, error code MPA_CRC) and, on
IRDMA_AE_TERMINATE_SENT, a FIN (irdma_terminate_send_fin). The peer's FIN then ends the
exchange (IRDMA_AE_LLP_CLOSE_COMPLETE -> irdma_terminate_done). The peer is a plain
socket: every byte it sends and every byte it expects is written out below from RFC 5040,
5041 and 5044, not taken from the emulator.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import time
from dataclasses import dataclass

import pytest
from helpers.live_lab import EMU_V4, Lab, make_host

from mpa_emu.live.driver import Accept
from mpa_emu.live.netns import Namespace, entered
from mpa_emu.wire.segment import FIN, RST

pytestmark = pytest.mark.live

PORT = 4791
KEY_REQ = b"MPA ID Req Frame"  # RFC 5044 section 7.1
KEY_REP = b"MPA ID Rep Frame"
FLAG_C = 0x40  # RFC 5044 section 7.1: M=0x80, C=0x40, R=0x20; RFC 6581: S=0x10


def crc32c(data: bytes) -> int:
    """Bitwise CRC32c (reflected polynomial 0x82F63B78, RFC 3385)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def request(rev: int) -> bytes:
    """An MPA request with C=0 (and M=0). Revision 2 carries the RFC 6581 block: P2P
    (0x8000 in IRD), IRD 8, ORD 8, Read RTR offered (0x4000 in ORD)."""
    if rev == 1:
        return KEY_REQ + bytes([0x00, 1]) + struct.pack("!H", 0)
    block = struct.pack("!HH", 0x8000 | 8, 0x4000 | 8)
    return KEY_REQ + bytes([0x10, 2]) + struct.pack("!H", len(block)) + block


def fpdu_without_crc(ulpdu: bytes) -> bytes:
    """RFC 5044 section 4.1 framing with the CRC field zero: ULPDU_LENGTH, ULPDU, pad to
    a multiple of 4, four zero bytes."""
    body = struct.pack("!H", len(ulpdu)) + ulpdu
    return body + bytes(-len(body) % 4) + bytes(4)


# RFC 5041 section 4.3 untagged header (T=0, L=1, DV=1; RV=1) + RFC 5040 section 4.4.
READ_RTR = (bytes([0x41, 0x41]) + struct.pack("!IIII", 0, 1, 1, 0)
            + struct.pack("!IQIIQ", 0xABCD, 0, 0, 0x1234, 0))
SEND = bytes([0x41, 0x43]) + struct.pack("!IIII", 0, 0, 1, 0) + b"no CRC here"


@dataclass
class PeerResult:
    reply: bytes
    sent: list[bytes]
    received: bytes
    ending: str


def crc_less_peer(address: str, rev: int) -> PeerResult:
    """Connect, negotiate without CRC, send FPDUs with a zero CRC field, read until the
    other side closes, then close."""
    with socket.create_connection((address, PORT), timeout=5) as sock:
        sock.sendall(request(rev))
        header = _read(sock, 20)
        assert header[:16] == KEY_REP, header
        reply = header + _read(sock, struct.unpack_from("!H", header, 18)[0])
        # Revision 2: the RTR the reply chose first (a zero-length Read), then a Send.
        sent = [fpdu_without_crc(READ_RTR)] if rev == 2 else []
        sent.append(fpdu_without_crc(SEND))
        for frame in sent:
            sock.sendall(frame)
        received = b""
        ending = "timeout"
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(4096)
            except ConnectionResetError:
                ending = "reset"
                break
            except TimeoutError:
                continue
            if not chunk:
                ending = "eof"
                break
            received += chunk
    return PeerResult(reply, sent, received, ending)


def _read(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, f"connection closed after {len(data)} of {size} bytes"
        data += chunk
    return data


def check_terminate(data: bytes, offending: bytes) -> None:
    """Decode a Terminate FPDU by hand (RFC 5044 section 4.1, RFC 5041 section 4.3,
    RFC 5040 section 4.8) and check it reports an MPA CRC error on ``offending``."""
    (ulpdu_len,) = struct.unpack_from("!H", data)
    padded = 2 + ulpdu_len + (-(2 + ulpdu_len) % 4)
    assert len(data) == padded + 4, "exactly one FPDU before the end of the stream"
    # irdma always sends the CRC it negotiated (C set in its reply).
    assert struct.unpack_from("<I", data, padded)[0] == crc32c(data[:padded])
    ulpdu = data[2:2 + ulpdu_len]
    ddp_ctl, rdmap_ctl = ulpdu[0], ulpdu[1]
    assert ddp_ctl == 0x41  # untagged, last, DDP version 1
    assert rdmap_ctl == 0x47  # RDMAP version 1, opcode 7: Terminate
    _rsvd, qn, msn, mo = struct.unpack_from("!IIII", ulpdu, 2)
    assert (qn, msn, mo) == (2, 1, 0)  # the Terminate queue, its first message
    layer_etype, error_code, hdrct = ulpdu[18], ulpdu[19], ulpdu[20]
    # Layer 2 (LLP), EType 3 (DDP_LLP in irdma's enum), error code 2 (MPA CRC error).
    assert (layer_etype >> 4, layer_etype & 0xF, error_code) == (2, 3, 0x02)
    # M (DDP segment length valid) and D (DDP header included); R for a Read Request.
    read_request = offending[3] & 0x0F == 1
    assert hdrct == (0xE0 if read_request else 0xC0)
    (seg_len,) = struct.unpack_from("!H", ulpdu, 22)
    assert seg_len == struct.unpack_from("!H", offending)[0]
    copied = 18 + (28 if read_request else 0)
    assert ulpdu[24:24 + copied] == offending[2:2 + copied]


@pytest.mark.parametrize("rev", [1, 2])
def test_crc_less_peer_gets_a_terminate_and_an_orderly_close(lab: Lab, rev: int) -> None:
    emu = make_host(lab)
    emu.host.listen(PORT, policy=Accept())
    peer = lab.in_kernel(crc_less_peer, EMU_V4, rev)
    assert emu.host.run_until(lambda: not peer.is_alive(), 10)
    result: PeerResult = peer.result()
    # What follows the peer's close: the kernel would retransmit an unanswered FIN
    # within this second (its RTO starts at 200 ms).
    emu.host.run_for(1.0)

    assert result.reply[16] & FLAG_C and result.reply[17] == rev
    assert result.ending == "eof"
    check_terminate(result.received, result.sent[0])

    tx = emu.segments("tx")
    rx = emu.segments("rx")
    terminates = [i for i, (_f, seg) in enumerate(tx) if seg.payload == result.received]
    assert len(terminates) == 1  # sent once: the kernel acknowledged it
    fins = [i for i, (_f, seg) in enumerate(tx) if seg.flags & FIN]
    assert len(fins) == 1 and fins[0] > terminates[0]
    assert not [seg for _f, seg in tx if seg.flags & RST]
    # The peer's FIN arrived once (never retransmitted) and was acknowledged.
    peer_fins = [(f, seg) for f, seg in rx if seg.flags & FIN]
    assert len(peer_fins) == 1
    fin_frame, fin = peer_fins[0]
    later = [seg for f, seg in tx if f.time_ns >= fin_frame.time_ns]
    assert any(seg.ack == (fin.seq + len(fin.payload) + 1) % 2**32 for seg in later)
    # Nothing the kernel sent was retransmitted into silence.
    sent_data = [(seg.seq, seg.payload) for _f, seg in rx if seg.payload]
    assert len(sent_data) == len(set(sent_data))
    # The driver's side, from the trace: the AE, the Terminate and the QP in ERROR.
    aes = [r.fields["ae"] for r in emu.trace.of_kind("ae")]
    assert "IRDMA_AE_LLP_RECEIVED_MPA_CRC_ERROR" in aes
    assert "IRDMA_AE_TERMINATE_SENT" in aes and "IRDMA_AE_LLP_CLOSE_COMPLETE" in aes
    assert [r.fields["target"] for r in emu.trace.of_kind("qp_modify")][-1] == "ERROR"


def test_live_command_prints_the_crc_error_the_terminate_and_the_close() -> None:
    if os.geteuid() != 0:
        pytest.skip("live tests need root for network namespaces and /dev/net/tun "
                    "(CI runs them as root)")
    with Namespace(f"mpaemu{os.getpid()}term") as ns:
        live_cmd = [sys.executable, "-m", "mpa_emu", "live", "--netns", ns.name,
                    "--tap", "mpaterm0", "--address", "192.0.2.130",
                    "--host-address", "192.0.2.129/25", "--listen", str(PORT),
                    "--duration", "4"]
        with subprocess.Popen(live_cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) as live:
            try:
                assert live.stdout is not None
                line = live.stdout.readline()
                while line and f"listening on port {PORT}" not in line:
                    line = live.stdout.readline()
                with entered(ns.name):
                    result = crc_less_peer("192.0.2.130", 2)
                out, _ = live.communicate(timeout=20)
            finally:
                if live.poll() is None:
                    live.kill()
                    live.wait(5)
    assert live.returncode == 0, out
    assert result.ending == "eof"
    lines = out.splitlines()

    def index(text: str) -> int:
        found = [i for i, line in enumerate(lines) if text in line]
        assert found, f"{text!r} not in {out!r}"
        return found[0]

    crc = index("AE IRDMA_AE_LLP_RECEIVED_MPA_CRC_ERROR")
    term = index("Terminate sent for IRDMA_AE_LLP_RECEIVED_MPA_CRC_ERROR: layer 2 "
                 "(LLP/MPA), etype 3, error code 0x02")
    sent = index("AE IRDMA_AE_TERMINATE_SENT")
    error = index("QP to ERROR (irdma_next_iw_state)")
    assert crc < term < sent < error
