"""``mpa-emu inspect`` reads erdma's request and reply in erdma's layout (erdma_cm.h:
revision 129, the 8-byte ``struct erdma_mpa_ext`` PD_Length does not count, then the
private data), where an RFC 5044 reading takes the extension for private data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mpa_emu.cli import main
from mpa_emu.net.network import Network
from mpa_emu.net.policy import Accept
from mpa_emu.wire import erdma_mpa


def capture(tmp_path: Path, stack: str) -> tuple[Path, Network]:
    net = Network(seed=6)
    a = net.add_host("a", "192.0.2.1", stack=stack)
    b = net.add_host("b", "192.0.2.2", stack=stack)
    b.listen(31000, policy=Accept(private_data=b"welcome"))
    a.connect(b, 31000, private_data=b"hello")
    net.run_for(1_000_000_000)
    path = tmp_path / f"{stack}.pcapng"
    net.write_pcapng(path)
    return path, net


def test_inspect_names_the_extension_and_the_real_private_data(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, net = capture(tmp_path, "erdma")
    request = next(erdma_mpa.parse(f.segment.payload) for f in net.frames
                   if f.sender == "a" and erdma_mpa.looks_like_erdma(f.segment.payload))
    main(["inspect", str(path)])
    out = capsys.readouterr().out
    assert f"erdma extension: cookie 0x{request.cookie:08x}, CC 0 (NewReno)" in out
    assert 'private data (5 bytes) 68656c6c6f "hello"' in out
    assert 'private data (7 bytes) 77656c636f6d65 "welcome"' in out
    assert "unknown MPA revision" not in out
    assert "MPA request in erdma's dialect" in out
    # the stream after the frames holds no FPDU: nothing is cut from the extension
    assert "FPDUs" not in out
    main(["inspect", "--json", str(path)])
    conn = json.loads(capsys.readouterr().out)["connections"][0]
    assert (conn["request"]["erdma_cookie"], conn["request"]["erdma_cc"]) == (
        request.cookie, 0)
    assert conn["reply"]["private_data"] == b"welcome".hex()


def test_an_rfc_frame_s_json_has_no_erdma_fields(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, _net = capture(tmp_path, "siw")
    main(["inspect", "--json", str(path)])
    conn = json.loads(capsys.readouterr().out)["connections"][0]
    assert "erdma_cookie" not in conn["request"] and "erdma_cc" not in conn["reply"]
