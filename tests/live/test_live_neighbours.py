"""The emulated host's ARP/ND against the real kernel neighbour code."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest
from helpers.live_lab import EMU_MAC, EMU_V4, EMU_V6, KERNEL_V4, KERNEL_V6, Lab, make_host, packed

from mpa_emu.live.neighbour import NeighbourResponder
from mpa_emu.wire import codec

pytestmark = pytest.mark.live


def _kernel_sends_udp(address: str, done: threading.Event) -> None:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        for _ in range(20):
            sock.sendto(b"probe", (address, 9))
            if done.wait(0.1):
                return


def _answer_one(lab: Lab, responder: NeighbourResponder,
                learned: dict[bytes, bytes]) -> bytes | None:
    """Read one frame from the TAP. An ARP/ND message is answered and what it teaches
    goes into ``learned``; any other frame is returned (None when nothing came)."""
    frame = lab.tap.read()
    if frame is None:
        time.sleep(0.01)
        return None
    answer = responder.handle(frame)
    if answer is None:
        return frame
    learned.update(answer.learned)
    for reply in answer.replies:
        lab.tap.write(reply)
    return None


@pytest.mark.parametrize(("kernel_ip", "emu_ip"), [(KERNEL_V4, EMU_V4), (KERNEL_V6, EMU_V6)])
def test_kernel_resolves_the_emulated_address_and_sends_to_its_mac(lab: Lab, kernel_ip: str,
                                                                    emu_ip: str) -> None:
    responder = NeighbourResponder(EMU_MAC)
    responder.add_address(packed(emu_ip))
    done = threading.Event()
    sender = lab.in_kernel(_kernel_sends_udp, emu_ip, done)
    learned: dict[bytes, bytes] = {}
    unicast_to_us = None
    deadline = time.monotonic() + 3.0
    while unicast_to_us is None and time.monotonic() < deadline:
        frame = _answer_one(lab, responder, learned)
        if frame is not None and frame[:6] == EMU_MAC:
            unicast_to_us = frame
    done.set()
    sender.result()
    assert unicast_to_us is not None, "the kernel never sent a unicast frame to our MAC"
    assert learned.get(packed(kernel_ip)) == lab.kernel_mac
    with pytest.raises(codec.DecodeError):  # UDP: not a frame for the CM
        codec.decode(unicast_to_us)


@pytest.mark.parametrize(("kernel_ip", "emu_ip"), [(KERNEL_V4, EMU_V4), (KERNEL_V6, EMU_V6)])
def test_our_solicitation_is_answered_by_the_kernel(lab: Lab, kernel_ip: str,
                                                    emu_ip: str) -> None:
    responder = NeighbourResponder(EMU_MAC)
    responder.add_address(packed(emu_ip))
    lab.tap.write(responder.solicit(packed(kernel_ip), packed(emu_ip)))
    deadline = time.monotonic() + 3.0
    learned: dict[bytes, bytes] = {}
    while packed(kernel_ip) not in learned and time.monotonic() < deadline:
        _answer_one(lab, responder, learned)
    assert learned.get(packed(kernel_ip)) == lab.kernel_mac


def _kernel_ping(address: str) -> bytes:
    """One echo request from a raw socket; returns the reply's ICMP message."""
    v6 = ":" in address
    family, proto = (socket.AF_INET6, socket.IPPROTO_ICMPV6) if v6 else \
        (socket.AF_INET, socket.IPPROTO_ICMP)
    with socket.socket(family, socket.SOCK_RAW, proto) as sock:
        sock.settimeout(3)
        body = struct.pack("!HH", 0x4D50, 1) + b"are you there"
        if v6:  # the kernel fills in the ICMPv6 checksum of raw sockets
            message = bytes((128, 0, 0, 0)) + body
        else:
            csum = codec.internet_checksum(bytes((8, 0, 0, 0)) + body)
            message = bytes((8, 0)) + struct.pack("!H", csum) + body
        sock.sendto(message, (address, 0))
        while True:
            data = sock.recv(2048)
            reply = data if v6 else data[(data[0] & 0x0F) * 4:]
            if reply[0] == (129 if v6 else 0):
                return reply


@pytest.mark.parametrize("emu_ip", [EMU_V4, EMU_V6])
def test_kernel_ping_gets_the_host_stack_echo_reply(lab: Lab, emu_ip: str) -> None:
    emu = make_host(lab, v6=":" in emu_ip)
    pinger = lab.in_kernel(_kernel_ping, emu_ip)
    assert emu.host.run_until(lambda: not pinger.is_alive(), 5)
    reply = pinger.result()
    assert reply[4:8] == struct.pack("!HH", 0x4D50, 1) and reply[8:] == b"are you there"
    assert "echo reply (host stack)" in [f.comment for f in emu.capture.frames]
    assert not list(emu.trace.of_kind("segment_received"))  # the CM never saw it
