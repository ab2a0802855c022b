"""``mpa-emu live`` refuses bad input with one line and exit 2, before touching any device."""

from __future__ import annotations

import pytest
from mpa_emu.stacks.contract.events import IwEvent, Upcall

from mpa_emu.cli import main
from mpa_emu.views.describe import upcall_line
from mpa_emu.wire.addr import ip_bytes


@pytest.mark.parametrize(("argv", "message"), [
    (["--address", "192.0.2.300"], "not an IPv4 or IPv6 address"),
    (["--address", "192.0.2.2", "--listen", "70000"], "--listen port must be 1..65535"),
    (["--address", "192.0.2.2", "--connect", "192.0.2.1"], "IP:PORT"),
    (["--address", "192.0.2.2", "--host-address", "192.0.2.1"], "IP/PREFIX"),
    (["--address", "192.0.2.2", "--duration", "0"], "--duration must be a finite number of "
                                                    "seconds, more than 0"),
    (["--address", "192.0.2.2", "--private-data", "x" * 256], "255 bytes"),
    (["--address", "192.0.2.2", "--mac", "02:00:00"], "not a MAC address"),
    (["--address", "192.0.2.2@5000"], "VLAN id must be 0..4094"),
    (["--address", "192.0.2.2@x"], "VLAN id must be 0..4094"),
    (["--address", "192.0.2.2", "--device-reset-at", "-1"],
     "--device-reset-at must be a finite number of seconds, 0 or more"),
])
def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str],
                                          message: str) -> None:
    # An invalid TAP name: should validation ever let the input through, the command
    # still stops before creating a device (and the message check fails the test).
    assert main(["live", "--tap", "bad/name", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(("argv", "message"), [
    (["--listen", "0"], "--listen port must be 1..65535"),
    (["--listen", "70000"], "--listen port must be 1..65535"),
    (["--connect", "192.0.2.1:4000", "--count", "-1"], "--count must be 0"),
    (["--connect", "192.0.2.1:4000", "--private-data-hex", "zz"], "not hex"),
    (["--connect", "192.0.2.1:4000", "--ird", "20000"], "--ird must be 0..16383"),
    (["--connect", "192.0.2.1:4000", "--timeout", "0"], "--timeout must be a finite number of "
                                                        "seconds, more than 0"),
])
def test_peer_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str],
                                               argv: list[str], message: str) -> None:
    assert main(["peer", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("command", [
    ["live", "--netns", "mpa-no-such-ns", "--tap", "mpabad0", "--address", "192.0.2.2"],
    ["peer", "--netns", "mpa-no-such-ns", "--connect", "192.0.2.1:4000"],
])
def test_unknown_namespace_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str],
                                                  command: list[str]) -> None:
    assert main(command) == 2
    err = capsys.readouterr().err
    assert "no network namespace named 'mpa-no-such-ns'" in err and "Traceback" not in err


def test_tap_name_too_long_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["live", "--tap", "x" * 16, "--address", "192.0.2.2"]) == 2
    assert "bad interface name" in capsys.readouterr().err


def test_upcall_line_shows_event_addresses_ird_ord_and_private_data() -> None:
    upcall = Upcall(IwEvent.CONNECT_REQUEST, 1, 0, 12_000_000, ip_bytes("192.0.2.2"), 4791,
                    ip_bytes("192.0.2.1"), 40000, private_data=b"hi\x00\x00\x00\x00",
                    private_data_len=6, ird=127, ord=0)
    assert upcall_line(upcall) == ("t=0.012s CONNECT_REQUEST conn 1 192.0.2.2:4791 <-> "
                                "192.0.2.1:40000 ird 127 ord 0 private data len 6: "
                                '686900000000 "hi...."')


def test_failed_connect_reply_shows_the_status() -> None:
    upcall = Upcall(IwEvent.CONNECT_REPLY, 2, -104, 0, ip_bytes("2001:db8::2"), 5000,
                    ip_bytes("2001:db8::1"), 4999)
    assert upcall_line(upcall).startswith("t=0.000s CONNECT_REPLY conn 2 status -104 "
                                       "2001:db8::2:5000 <-> 2001:db8::1:4999")
