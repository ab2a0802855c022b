"""replay's text on captures shaped like third-party traffic (helpers.third_party_captures):
what the host sent is counted from the capture's own frames, the outcome lines agree
with the upcalls and NIC events listed beside them, a refused verb says why, and errno
values carry the kernel's names (include/uapi/asm-generic/errno.h: EOPNOTSUPP is 95)."""

from __future__ import annotations

import re
from pathlib import Path

from helpers.replay_cli import replay
from helpers.third_party_captures import CLIENT, SERVER, siw_terminate, smb_direct_siw
from scapy.layers.inet import IP, TCP
from scapy.utils import rdpcap


def sent_by(path: Path, ip: str) -> tuple[int, int]:
    """(frames ``ip`` sent, of which pure ACKs), read from the capture with scapy."""
    frames = [p for p in rdpcap(str(path)) if p[IP].src == ip]
    acks = [p for p in frames if p[TCP].flags == "A" and not bytes(p[TCP].payload)]
    return len(frames), len(acks)


def test_frames_are_counted_as_the_host_sent_them(tmp_path: Path) -> None:
    path = siw_terminate(tmp_path / "t.pcap")
    sent, acks = sent_by(path, CLIENT)
    assert (sent, acks) == (4, 1)
    _rc, out, report = replay(path, "--emulate", CLIENT, "--semantic", tmp_path=tmp_path)
    verdict = out.splitlines()[0]
    match = re.search(r"(\d+)/(\d+) frames of " + re.escape(CLIENT) + r" matched", verdict)
    assert match is not None and int(match.group(2)) == sent
    assert f"({acks} pure ACK(s) not compared)" in verdict
    assert report["sent"] == sent and report["compared"] == sent - acks
    _rc, out, _report = replay(path, "--emulate", CLIENT, tmp_path=tmp_path)
    assert f"/{sent} frames of {CLIENT} matched," in out.splitlines()[0]


def test_the_initiator_outcome_lists_the_terminate_its_nic_sent(tmp_path: Path) -> None:
    path = siw_terminate(tmp_path / "t.pcap")
    _rc, out, report = replay(path, "--emulate", CLIENT, "--semantic", tmp_path=tmp_path)
    aes = [ev["ae"] for ev in report["nic_events"]]
    assert "IRDMA_AE_TERMINATE_SENT" in aes
    (conn,) = report["semantic"]["connections"]
    events = [ev["event"] for ev in conn["emulated"]["nic"]]
    assert any(ev.startswith("Terminate (") for ev in events)
    emulated = next(line for line in out.splitlines() if line.strip().startswith("emulated"))
    assert "Terminate (" in emulated


def test_an_upcall_after_the_capture_is_named_not_nothing_more(tmp_path: Path) -> None:
    path = siw_terminate(tmp_path / "t.pcap")
    _rc, out, report = replay(path, "--emulate", SERVER, "--semantic", tmp_path=tmp_path)
    late = [u for u in report["upcalls"] if u["event"] == "ESTABLISHED" and u["status"]]
    assert late, report["upcalls"]
    differences = out.split("differences in outcome:")[1]
    assert "nothing more" not in differences
    status = late[0]["status"]
    assert f"ESTABLISHED status {status} (-ECONNRESET) (at t={late[0]['time']:.3f} s" \
        in differences


def test_refused_accept_says_why_and_no_notes_after_the_node_is_freed(
        tmp_path: Path) -> None:
    # siw's request carries no P2P: irdma_negotiate_mpa_v2_ird_ord fails it with
    # -EOPNOTSUPP and the responder resets, freeing its node before the scripted accept.
    path = smb_direct_siw(tmp_path / "smb.pcap")
    for args in ((), ("--semantic",)):
        _rc, out, report = replay(path, "--emulate", SERVER, *args, tmp_path=tmp_path)
        if args:  # the peer's acknowledgements were moved, but only after the node died
            assert report["rebases"] and min(r["frame"] for r in report["rebases"]) > 4
        refused = [line for line in out.splitlines() if "refused: no connection" in line]
        assert refused
        for line in refused:
            assert "its node was freed at frame 4 after irdma_parse_mpa" in line
            assert "-EOPNOTSUPP" in line
        assert "ENOTSUP)" not in out
        assert "re-based" not in out
