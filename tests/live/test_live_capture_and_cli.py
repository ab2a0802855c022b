"""tshark on the TAP against the emulator's own capture, and the two commands end to end."""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.live_lab import EMU_V4, TAP_NAME, Lab, make_host
from helpers.signals import sigint_as_in_a_terminal
from mpa_emu.stacks.contract.events import IwEvent

from mpa_emu.capture.pcap import PcapngWriter, read_capture
from mpa_emu.live import peer
from mpa_emu.live.driver import Accept
from mpa_emu.live.netns import Namespace
from mpa_emu.wire import codec

pytestmark = pytest.mark.live

PORT = 4791
TSHARK_OPTS = ["-o", "tcp.try_heuristic_first:TRUE", "--enable-heuristic", "iwarp_mpa_tcp"]


def _wait_for_line(stream: object, needle: str, timeout_s: float) -> str:
    """Read lines from a pipe until one contains ``needle``; all text read so far."""
    fd = stream.fileno()  # type: ignore[attr-defined]
    seen = ""
    deadline = time.monotonic() + timeout_s
    while needle not in seen:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"no {needle!r} within {timeout_s} s; got {seen!r}")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 4096).decode(errors="replace")
            if not chunk:
                raise AssertionError(f"stream ended before {needle!r}; got {seen!r}")
            seen += chunk
    return seen


@contextlib.contextmanager
def _stopped(proc: subprocess.Popen[bytes]) -> Iterator[subprocess.Popen[bytes]]:
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def _tshark_lines(path: Path, *extra: str) -> list[str]:
    done = subprocess.run(["tshark", "-r", str(path), *TSHARK_OPTS, *extra],
                          capture_output=True, text=True, timeout=30, check=True)
    return done.stdout.splitlines()


@pytest.mark.tshark
def test_tshark_on_the_tap_sees_the_frames_of_our_own_capture(lab: Lab, tmp_path: Path) -> None:
    if shutil.which("tshark") is None:
        pytest.fail("tshark is required for this test (tools/test.sh installs it)")
    theirs = tmp_path / "tshark.pcapng"
    command = ["ip", "netns", "exec", lab.ns.name, "tshark", "-i", TAP_NAME, "-w", str(theirs),
               "-f", f"tcp port {PORT}"]
    with _stopped(subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   preexec_fn=sigint_as_in_a_terminal)) as tshark:
        _wait_for_line(tshark.stderr, "Capturing on", 30)
        time.sleep(0.5)  # dumpcap announces the capture a moment before it is attached
        emu = make_host(lab)
        emu.host.listen(PORT, policy=Accept(b"welcome"))
        client = lab.in_kernel(_initiate, EMU_V4)
        assert emu.host.run_until(
            lambda: not client.is_alive() and bool(emu.host.events(IwEvent.ESTABLISHED)), 8)
        assert client.result().accepted
        emu.host.run_for(0.5)
        tshark.send_signal(signal.SIGINT)
        _out, tshark_err = tshark.communicate(timeout=30)
    ours = [f.data for f in emu.capture.frames if _is_our_port(f.data)]
    seen = [r.frame for r in read_capture(str(theirs))]
    assert len(ours) >= 8  # handshake, MPA request/ACK, reply, RTR... at the least
    missing = [i for i, frame in enumerate(ours) if frame not in seen]
    assert sorted(seen) == sorted(ours), (
        f"tshark missed frames {missing} of {len(ours)}; it said {tshark_err.decode()!r}")

    # Both files decode the same way: the MPA exchange and the RTR are there.
    mine = tmp_path / "ours.pcapng"
    with open(mine, "wb") as handle:
        writer = PcapngWriter(handle)
        writer.add_interface(TAP_NAME)
        for frame in emu.capture.frames:
            if _is_our_port(frame.data):
                writer.write(frame.time_ns, frame.data, interface=0, comment=frame.comment)
    summary = _tshark_lines(mine)
    assert summary and len(summary) == len(_tshark_lines(theirs))
    text = "\n".join(summary)
    assert "MPA Request Frame" in text and "MPA Reply Frame" in text
    assert "Read Request" in text


def _initiate(address: str) -> peer.PeerReport:
    options = peer.PeerOptions(private_data=b"hello from the kernel side", timeout=5)
    with peer.open_connection(address, PORT, options.timeout) as sock:
        return peer.run_initiator(sock, options)


def _is_our_port(frame: bytes) -> bool:
    try:
        seg = codec.decode(frame)
    except codec.DecodeError:
        return False
    return PORT in (seg.sport, seg.dport)


@pytest.fixture
def bare_ns() -> Iterator[Namespace]:
    if os.geteuid() != 0:
        pytest.skip("live tests need root for network namespaces and /dev/net/tun "
                    "(CI runs them as root)")
    with Namespace(f"mpaemu{os.getpid()}cli") as ns:
        yield ns


def test_live_and_peer_commands_reject_then_shut_down_on_sigint(bare_ns: Namespace,
                                                                tmp_path: Path) -> None:
    capture = tmp_path / "live.pcapng"
    live_cmd = ["ip", "netns", "exec", bare_ns.name, sys.executable, "-m", "mpa_emu", "live",
                "--tap", "mpacli0", "--address", "192.0.2.130",
                "--host-address", "192.0.2.129/25", "--listen", str(PORT), "--reject",
                "--private-data", "nope", "-o", str(capture), "--duration", "15"]
    with _stopped(subprocess.Popen(live_cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   preexec_fn=sigint_as_in_a_terminal)) as live:
        _wait_for_line(live.stdout, f"listening on port {PORT}", 10)
        peer_cmd = ["ip", "netns", "exec", bare_ns.name, sys.executable, "-m", "mpa_emu",
                    "peer", "--connect", f"192.0.2.130:{PORT}", "--private-data", "hi",
                    "--timeout", "4"]
        done = subprocess.run(peer_cmd, capture_output=True, text=True, timeout=20, check=False)
        time.sleep(0.3)
        live.send_signal(signal.SIGINT)
        out, _ = live.communicate(timeout=10)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "received MPA reject: rev 2, flags 0x70 (C R S)" in done.stdout
    assert '6e6f7065 "nope"' in done.stdout
    assert "received FIN" in done.stdout
    text = out.decode()
    assert live.returncode == 130, text  # Ctrl-C (SIGINT): 128 + 2
    assert "CONNECT_REQUEST" in text and "shutting down" in text
    records = list(read_capture(str(capture)))
    comments = [r.comment or "" for r in records]
    assert any("reject" in c for c in comments), comments
    assert any(c.startswith("received") for c in comments)
    assert all(r.interface_name == "mpacli0" for r in records)


def test_live_command_connects_to_a_kernel_peer_listener(bare_ns: Namespace) -> None:
    # Both commands enter the namespace themselves (--netns) rather than via ip netns exec.
    peer_cmd = [sys.executable, "-m", "mpa_emu", "peer", "--netns", bare_ns.name,
                "--listen", "4000", "--private-data", "welcome", "--timeout", "8"]
    with _stopped(subprocess.Popen(peer_cmd, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT)) as listener:
        _wait_for_line(listener.stdout, "listening on port 4000", 10)
        live_cmd = [sys.executable, "-m", "mpa_emu", "live", "--netns", bare_ns.name,
                    "--tap", "mpacli1", "--address", "192.0.2.130",
                    "--host-address", "192.0.2.129/25", "--connect", "192.0.2.129:4000",
                    "--private-data", "hello", "--ird", "8", "--ord", "4", "--duration", "2"]
        live = subprocess.run(live_cmd, capture_output=True, text=True, timeout=20, check=False)
        out, _ = listener.communicate(timeout=10)
    assert live.returncode == 0, live.stdout + live.stderr
    assert "CONNECT_REPLY conn 1 192.0.2.130:" in live.stdout
    assert "status" not in live.stdout.split("CONNECT_REPLY", 1)[1].splitlines()[0]
    text = out.decode()
    assert listener.returncode == 0, text
    assert "received MPA request: rev 2, flags 0x50 (C S), PD_Length 9" in text
    assert "RFC 6581: IRD 8, ORD 4, P2P write0 read0" in text
    assert '68656c6c6f "hello"' in text
    assert "received FPDU: RDMA Read Request (zero-length, RTR read), good CRC" in text
