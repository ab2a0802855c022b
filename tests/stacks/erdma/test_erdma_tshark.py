"""What tshark (Wireshark's iwarp_mpa dissector) makes of erdma's frames.

Its heuristic (dissect_iwarp_mpa_heur) looks at the key, not at the revision: erdma's
request, reply and reject decode as MPA, revision 129, with the request's "Rev field is
NOT set to one" warning. It takes PD_Length bytes after the 20-byte header as the
private data, so what it shows is erdma's extension (the cookie, then the CC word) and
the head of the real private data; the rest of the segment is not shown. No malformed
packet.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from mpa_emu.net.network import Network
from mpa_emu.net.policy import Accept, Reject
from mpa_emu.wire import erdma_mpa

OPTS = ["-o", "tcp.try_heuristic_first:TRUE", "--enable-heuristic", "iwarp_mpa_tcp"]

pytestmark = pytest.mark.tshark


@pytest.fixture(autouse=True)
def _need_tshark() -> None:
    if shutil.which("tshark") is None:
        pytest.fail("tshark is required (tools/test.sh installs it)")


def tshark(path: Path, *args: str) -> str:
    return subprocess.run(["tshark", "-r", str(path), *OPTS, *args], capture_output=True,
                          text=True, check=True).stdout


def capture(tmp_path: Path) -> tuple[Path, Network]:
    net = Network(seed=2)
    a = net.add_host("a", "192.0.2.1", stack="erdma", params={"cc": 2})
    b = net.add_host("b", "192.0.2.2", stack="erdma", params={"cc": 2})
    b.listen(31000, policy=Accept(private_data=b"welcome"))
    b.listen(31001, policy=Reject(private_data=b"not today"))
    a.connect(b, 31000, private_data=b"hello")
    a.connect(b, 31001)
    net.run_for(1_000_000_000)
    cap = tmp_path / "erdma.pcapng"
    net.write_pcapng(cap)
    return cap, net


def test_erdma_frames_decode_as_mpa_with_the_extension_as_private_data(
        tmp_path: Path) -> None:
    cap, net = capture(tmp_path)
    ours = [erdma_mpa.parse(f.segment.payload) for f in net.frames
            if f.segment is not None and erdma_mpa.looks_like_erdma(f.segment.payload)]
    assert len(ours) == 4
    rows = [line.split("\t") for line in tshark(
        cap, "-Y", "iwarp_mpa", "-T", "fields", "-e", "iwarp_mpa.key.req",
        "-e", "iwarp_mpa.rej_flag", "-e", "iwarp_mpa.rev", "-e", "iwarp_mpa.pdlength",
        "-e", "iwarp_mpa.privatedata", "-e", "_ws.malformed").splitlines()]
    assert len(rows) == 4
    for row, frame in zip(rows, ours, strict=True):
        assert row[2] == "129"
        assert row[3] == str(len(frame.private_data))
        # the first PD_Length bytes after the header: the extension, then our data
        ext = frame.cookie.to_bytes(4, "big") + frame.ext_bits.to_bytes(4, "big")
        assert row[4] == (ext + frame.private_data)[:len(frame.private_data)].hex()
        assert row[5] == ""
    assert [r[1] for r in rows] == ["0", "0", "0", "1"]


def test_only_the_request_revision_warning(tmp_path: Path) -> None:
    cap, _net = capture(tmp_path)
    expert = tshark(cap, "-q", "-z", "expert")
    assert "Rev field is NOT set to one as required by RFC 5044" in expert
    assert "Malformed" not in expert
    assert "Errors (" not in expert
