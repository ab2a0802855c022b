"""``mpa-emu live`` end to end without root: a datagram socket pair stands in for the TAP,
and a second emulated irdma host (the real CM core on the pair's other end, polled in a
thread) is the peer. Checks the console lines for what the NIC did, the exit code of a
--connect whose CONNECT_REPLY carries an error, and the exit code of Ctrl-C."""

from __future__ import annotations

import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from errno import ECONNREFUSED
from typing import Any

import pytest
from helpers.pair_tap import PairTap
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.contract.trace import TraceRecord
from mpa_emu.stacks.irdma.config import CmConfig
from mpa_emu.stacks.irdma.core import CmCore

from mpa_emu.cli import live as live_command
from mpa_emu.cli import main
from mpa_emu.live import tap as tap_module
from mpa_emu.live.console import nic_line
from mpa_emu.live.driver import Accept, LiveHost, LivePolicy, Reject
from mpa_emu.wire.addr import ip_bytes, mac_bytes

PEER_IP, CLI_IP = "192.0.2.1", "192.0.2.2"
PEER_MAC = mac_bytes("02:00:00:00:00:01")
PORT = 4000


@dataclass
class Peer:
    host: LiveHost
    stop: threading.Event
    thread: threading.Thread


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[socket.socket, socket.socket]]:
    """The CLI's TAP is one end of a socket pair; the other end is returned to the test."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    monkeypatch.setattr(tap_module, "Tap", lambda name: PairTap(ours, name))
    monkeypatch.setattr(tap_module, "set_link_up", lambda name: None)
    yield ours, theirs
    theirs.close()


def _peer(sock: socket.socket, policy: LivePolicy) -> Iterator[Peer]:
    core = CmCore("peer", PEER_MAC, CmConfig(), seed=3)
    host = LiveHost(PairTap(sock, "peer0"), core, PEER_MAC)
    host.add_address(ip_bytes(PEER_IP))
    host.listen(PORT, policy=policy)
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            host.poll(0.02)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    yield Peer(host, stop, thread)
    stop.set()
    thread.join(5)


def _live(*extra: str) -> list[str]:
    return ["live", "--tap", "pair0", "--address", CLI_IP, "--grace", "1", *extra]


def test_connect_refused_by_the_peer_exits_1(
        wire: tuple[socket.socket, socket.socket], capsys: pytest.CaptureFixture[str]) -> None:
    for peer in _peer(wire[1], Reject(b"no")):
        code = main(_live("--connect", f"{PEER_IP}:{PORT}", "--duration", "1.5"))
        out = capsys.readouterr().out
        assert code == 1, out
        # irdma_cm_event_handler, IRDMA_CM_EVENT_MPA_REJECT: CONNECT_REPLY with
        # -ECONNREFUSED, a non-zero status, which the live command turns into exit 1.
        reply = [line for line in out.splitlines() if "CONNECT_REPLY" in line]
        assert len(reply) == 1 and f"status {-ECONNREFUSED}" in reply[0]
        assert peer.host.events(IwEvent.CONNECT_REQUEST)


def test_accepted_connect_prints_the_nic_events_and_exits_0(
        wire: tuple[socket.socket, socket.socket], capsys: pytest.CaptureFixture[str]) -> None:
    for _peer_host in _peer(wire[1], Accept(b"ok")):
        code = main(_live("--connect", f"{PEER_IP}:{PORT}", "--duration", "1"))
        out = capsys.readouterr().out
        assert code == 0, out
        lines = out.splitlines()
        reply = next(i for i, line in enumerate(lines) if "CONNECT_REPLY conn 1" in line)
        assert "status" not in lines[reply]
        # The initiator's NIC raises IRDMA_AE_LLP_CONNECTION_ESTABLISHED once it sent
        # the RTR (irdma_sc_send_rtt); the driver waits for it before CONNECT_REPLY.
        rts = next(i for i, line in enumerate(lines)
                   if "conn 1 AE IRDMA_AE_LLP_CONNECTION_ESTABLISHED" in line)
        assert rts < reply
        # Shutdown: irdma_modify_qp to SQD moves the QP to CLOSING (FIN); the end of the
        # FIN exchange is IRDMA_AE_LLP_CLOSE_COMPLETE; irdma_cm_disconn_true issues CLOSE.
        shut = next(i for i, line in enumerate(lines) if line.startswith("shutting down"))
        after = lines[shut:]
        closing = next(i for i, line in enumerate(after)
                       if "conn 1 QP to CLOSING (irdma_modify_qp)" in line)
        complete = next(i for i, line in enumerate(after)
                        if "conn 1 AE IRDMA_AE_LLP_CLOSE_COMPLETE" in line)
        close = next(i for i, line in enumerate(after)
                     if "conn 1 QP closing:" in line and "CLOSE" in line)
        assert closing < complete < close


def _listen_until(signum: int) -> int:
    """Exit code of a 20 s listening run that gets ``signum`` after half a second."""
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signum))
    timer.start()
    try:
        return main(_live("--listen", str(PORT), "--duration", "20"))
    finally:
        timer.cancel()


@pytest.fixture
def sigint_disposition() -> Iterator[Callable[[Any], None]]:
    """Sets SIGINT's disposition for the test (the run under test starts from it, whatever
    the test run inherited: a suite started with `&` from a script gets SIGINT ignored)
    and puts the inherited one back afterwards."""
    inherited = signal.getsignal(signal.SIGINT)
    yield lambda handler: signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGINT, inherited)


def test_ctrl_c_stops_the_run_and_exits_130(
        wire: tuple[socket.socket, socket.socket], capsys: pytest.CaptureFixture[str],
        sigint_disposition: Callable[[Any], None]) -> None:
    sigint_disposition(signal.default_int_handler)  # what Python installs in a terminal
    code = _listen_until(signal.SIGINT)
    out = capsys.readouterr().out
    assert code == 130, out
    assert f"listening on port {PORT}" in out and "shutting down" in out
    # The handler is the previous one again: a later Ctrl-C is not swallowed.
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_sigint_ignored_from_the_start_stays_ignored_and_sigterm_stops(
        wire: tuple[socket.socket, socket.socket], capsys: pytest.CaptureFixture[str],
        sigint_disposition: Callable[[Any], None]) -> None:
    # A job started with `&` from a script: Python leaves SIGINT ignored, and so does live.
    sigint_disposition(signal.SIG_IGN)
    interrupt = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    interrupt.start()
    try:
        code = _listen_until(signal.SIGTERM)  # SIGTERM at 0.5 s, after the SIGINT
    finally:
        interrupt.cancel()
    assert code == 0, capsys.readouterr().out  # stopped by SIGTERM, not by Ctrl-C
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_sigterm_stops_the_run_and_exits_0(
        wire: tuple[socket.socket, socket.socket], capsys: pytest.CaptureFixture[str]) -> None:
    code = _listen_until(signal.SIGTERM)
    assert code == 0, capsys.readouterr().out


@pytest.mark.parametrize(("record", "line"), [
    (TraceRecord(1_500_000_000, "h", "ae", "irdma_process_aeq",
                 {"conn": 3, "ae": "IRDMA_AE_LLP_RECEIVED_MPA_CRC_ERROR",
                  "tcp_state": "ESTABLISHED", "iwarp_state": "RTS"}),
     "t=1.500s conn 3 AE IRDMA_AE_LLP_RECEIVED_MPA_CRC_ERROR (NIC: TCP ESTABLISHED, "
     "iWARP RTS)"),
    # RFC 5040 section 4.8: Layer 2 is LLP (MPA), EType 3 of the DDP_LLP class, code 0x02.
    (TraceRecord(2_000_000, "h", "terminate", "irdma_terminate_connection",
                 {"conn": 3, "ae": "IRDMA_AE_LLP_RECEIVED_MPA_CRC_ERROR", "layer": 2,
                  "etype": 3, "error_code": 2}),
     "t=0.002s conn 3 Terminate sent for IRDMA_AE_LLP_RECEIVED_MPA_CRC_ERROR: layer 2 "
     "(LLP/MPA), etype 3, error code 0x02"),
    # Layer/EType byte 0x11: layer 1 (DDP), EType 1 (tagged buffer error).
    (TraceRecord(0, "h", "terminate_received", "irdma_terminate_received",
                 {"conn": 1, "layer_etype": 0x11, "error_code": 0x00, "closes_now": False}),
     "t=0.000s conn 1 Terminate received: layer 1 (DDP), etype 1, error code 0x00; "
     "terminate timer started, FIN sent"),
    (TraceRecord(0, "h", "qp_modify", "irdma_next_iw_state",
                 {"conn": 1, "target": "ERROR", "reset_tcp_conn": True, "rst": True}),
     "t=0.000s conn 1 QP to ERROR (irdma_next_iw_state), RST sent"),
    (TraceRecord(0, "h", "qp_modify", "irdma_next_iw_state",
                 {"conn": 1, "target": "ERROR", "reset_tcp_conn": True, "rst": False}),
     "t=0.000s conn 1 QP to ERROR (irdma_next_iw_state), reset_tcp_conn (TCP already "
     "closed: no RST)"),
    (TraceRecord(0, "h", "disconnect_decision", "irdma_cm_disconn_true",
                 {"conn": 1, "issue_disconn": True, "issue_close": True,
                  "hw_tcp_state": "CLOSED", "last_ae": "IRDMA_AE_LLP_CLOSE_COMPLETE"}),
     "t=0.000s conn 1 QP closing: DISCONNECT and CLOSE (irdma_cm_disconn_true, NIC TCP "
     "CLOSED, last AE IRDMA_AE_LLP_CLOSE_COMPLETE)"),
])
def test_nic_line_for_each_kind(record: TraceRecord, line: str) -> None:
    assert nic_line(record) == line


def test_nic_line_ignores_other_records() -> None:
    assert nic_line(TraceRecord(0, "h", "state_changed", "x", {"conn": 1})) is None
    assert nic_line(TraceRecord(0, "h", "disconnect_decision", "irdma_cm_disconn_true",
                                {"conn": 1, "issue_disconn": False,
                                 "issue_close": False})) is None


def test_help_states_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["live", "--help"])
    text = capsys.readouterr().out
    assert "130 stopped by" in text and "non-zero CONNECT_REPLY" in text
    epilog = " ".join(live_command.EPILOG.split())
    assert "130 stopped by Ctrl-C (SIGINT) with no connect failure" in epilog
    assert live_command.EPILOG.strip().endswith("SIGTERM stops it.")
