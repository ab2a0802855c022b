"""``mpa-emu fuzz --live --accept`` and IPv6 ``--live``: the emulated side listens and
``mpa_emu.live.peer``'s initiator (on the Linux TCP stack, looped in a namespace the test
creates) connects; and the initiate mode over IPv6 against ``mpa-emu peer --listen``.
Bounded in cases and time; every address and device is inside the namespace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.campaign_lab import cli
from helpers.live_peer_loop import ConnectLoop
from scapy.layers.inet import TCP
from scapy.layers.inet6 import IPv6
from scapy.utils import rdpcap

from mpa_emu.live.netns import Namespace

pytestmark = pytest.mark.live

PORT = 31000
V4 = ("192.0.2.1", "192.0.2.2", "24")
V6 = ("2001:db8::1", "2001:db8::2", "64")


@pytest.fixture
def namespace() -> Iterator[str]:
    if os.geteuid() != 0:
        pytest.skip("live tests need root for network namespaces and /dev/net/tun "
                    "(CI runs them as root)")
    ns = Namespace(f"mpafa{os.getpid()}")
    try:
        yield ns.name
    finally:
        ns.close()


def _target(peer: str) -> str:
    return f"[{peer}]:{PORT}" if ":" in peer else f"{peer}:{PORT}"


def _fuzz(ns: str, tmp_path: Path, family: tuple[str, str, str], *extra: str
          ) -> tuple[int, str, list[dict[str, object]]]:
    peer, us, prefix = family
    report = tmp_path / "live.json"
    rc, out, err = cli("fuzz", "--live", _target(peer), "--tap", f"fa{os.getpid()}",
                       "--netns", ns, "--address", us, "--host-address", f"{peer}/{prefix}",
                       "--bound", "0.2", "--out", str(tmp_path / "kept"), "--json",
                       str(report), *extra)
    assert not err, err
    return rc, out, json.loads(report.read_text())


def _accept(ns: str, tmp_path: Path, family: tuple[str, str, str], cases: int
            ) -> tuple[int, str, list[dict[str, object]]]:
    loop = ConnectLoop(ns, family[1], PORT)
    loop.start()  # it retries until the fuzzer's TAP and address exist
    try:
        return _fuzz(ns, tmp_path, family, "--accept", "--cases", str(cases),
                     "--time-budget", "90")
    finally:
        loop.stop.set()
        loop.join(10)


@pytest.mark.slow(10)
def test_accept_mode_records_the_initiators_reactions(namespace: str,
                                                      tmp_path: Path) -> None:
    rc, out, cases = _accept(namespace, tmp_path, V4, 40)
    assert rc == 0, out
    assert len(cases) == 40 and all(c["answers_after"] for c in cases)
    by_name = {c["name"]: c["reaction"] for c in cases}
    # a well-formed reply offering a read RTR (RFC 6581 section 3): the initiator sends
    # its RTR FPDU and its message, then closes
    assert by_name["answer reply"] == "data+FIN"
    # after a reject it waits (1 s) for our FIN: nothing within the 0.2 s bound
    assert by_name["answer reject"] == "silence"
    # a bad key is seen in the 20-byte header with the 4 bytes of private data unread:
    # Linux resets a socket closed with unread data (RFC 2525 section 2.17)
    assert by_name["answer bad key"] == "RST"
    # revision 0 is refused once the whole frame is read: a plain close, FIN
    assert by_name["answer rev 0"] == "FIN"
    # PD_Length 40 with 4 bytes sent: it waits for private data that never come
    assert by_name["answer pd_length beyond the bytes"] == "silence"
    lines = out.splitlines()
    assert lines[0].startswith(f"fuzz --live 192.0.2.1:{PORT} --accept (listening on port "
                               f"{PORT}; the peer connects)")
    header = lines.index("reaction  cases  examples")
    assert lines[header + 1].split()[0] in {c["reaction"] for c in cases}
    silent = sorted(c["case"] for c in cases if c["reaction"] == "silence")
    kept = sorted(int(p.stem.split("-")[1]) for p in (tmp_path / "kept").glob("*.pcapng"))
    assert silent and kept == silent


def test_accept_mode_over_ipv6(namespace: str, tmp_path: Path) -> None:
    rc, out, cases = _accept(namespace, tmp_path, V6, 20)
    assert rc == 0, out
    by_name = {c["name"]: c["reaction"] for c in cases}
    assert by_name["answer reply"] == "data+FIN" and by_name["answer bad key"] == "RST"
    index = next(c["case"] for c in cases if c["name"] == "answer reject")
    packets = rdpcap(str(tmp_path / "kept" / f"live-{index}.pcapng"))
    tcp6 = [p for p in packets if IPv6 in p and TCP in p]
    assert tcp6 and {p[IPv6].dst for p in tcp6 if p[TCP].sport == PORT} == {V6[0]}
    # our SYN-ACK carries MSS 1440: 1500 less the IPv6 and TCP headers (RFC 8200)
    synack = next(p for p in tcp6 if p[TCP].flags == "SA")
    assert ("MSS", 1440) in synack[TCP].options
    # the reject as sent: the reply key and the R bit (RFC 5044 section 7.1, 0x20)
    answers = [bytes(p[TCP].payload) for p in tcp6 if p[TCP].sport == PORT
               and bytes(p[TCP].payload).startswith(b"MPA ID Rep Frame")]
    assert answers and answers[0][16] & 0x20


def test_initiate_mode_over_ipv6(namespace: str, tmp_path: Path) -> None:
    peer = subprocess.Popen([sys.executable, "-m", "mpa_emu", "peer", "--listen", str(PORT),
                             "--netns", namespace, "--count", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert peer.stdout is not None
    assert peer.stdout.readline().strip() == f"listening on port {PORT}"
    try:
        rc, out, cases = _fuzz(namespace, tmp_path, V6, "--cases", "25")
    finally:
        peer.terminate()
        peer.wait(10)
    assert rc == 0, out
    by_name = {c["name"]: c["reaction"] for c in cases}
    assert by_name["mpa request"] == "reply"
    assert by_name["mpa pd_length beyond the bytes"] == "silence"
    assert by_name["mpa reply key on a request"] == "RST"
    assert out.splitlines()[0].startswith(f"fuzz --live [2001:db8::1]:{PORT}: seed 0")
