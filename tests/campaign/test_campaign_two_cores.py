"""``mpa-emu fuzz --two-cores``: the same report whatever the executor, a planted defect
found, shrunk to the handshake that shows it and written as a reproducer that runs; the
middlebox does what its steps say; each invariant is checked on both cores."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers.campaign_lab import cli, dask_cluster
from mpa_emu.stacks.irdma.core import CmCore
from mpa_emu.stacks.irdma.states import CmState
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether
from scapy.utils import rdpcap

from mpa_emu.campaign import fuzz, two_core
from mpa_emu.campaign.generators import Wait
from mpa_emu.campaign.two_core import Net, SideVerb, TwoScript, execute_two
from mpa_emu.wire.segment import Segment


def _stable(out: str) -> list[str]:
    return [re.sub(r" in [\d.]+ s \(\d+ cases/s\)", "", line) for line in out.splitlines()]


def _tcp(raw: bytes) -> TCP:
    return Ether(raw)[TCP]


def test_clean_two_core_campaign() -> None:
    rc, out, _ = cli("fuzz", "--two-cores", "--cases", "300", "--seed", "2")
    assert rc == 0, out
    lines = out.splitlines()
    assert lines[0] == ("fuzz (two cores through a hostile middlebox): seed 2, 300 cases "
                        "on 1 process")
    assert lines[-1].startswith("300 cases in ")
    assert lines[-1].endswith("cases/s): 0 escapes; failing cases by invariant: none")


@pytest.mark.slow(7)
def test_planted_two_core_campaign_same_report_on_every_executor(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(fuzz.PLANT_ENV, "reply-checksum")
    reports = []
    with dask_cluster() as address:
        for extra in ([], ["-j", "2"], ["--scheduler", address]):
            out_dir = tmp_path / str(len(reports))
            rc, out, _ = cli("fuzz", "--two-cores", "--cases", "250", "--seed", "4",
                             "--out", str(out_dir), *extra)
            assert rc == 1
            reports.append(_stable(out.replace(str(out_dir), "DIR"))[1:])
            assert len(list(out_dir.glob("*.json"))) == 1
    assert reports[0] == reports[1] == reports[2]
    assert any(line.startswith("FAIL frame") for line in reports[0])


def test_planted_defect_shrunk_to_the_accept_and_reproduced(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(fuzz.PLANT_ENV, "reply-checksum")
    rc, out, _ = cli("fuzz", "--two-cores", "--cases", "200", "--seed", "1", "--out",
                     str(tmp_path))
    assert rc == 1
    fail = next(line for line in out.splitlines() if line.startswith("FAIL "))
    m = re.match(r"FAIL frame \(case (\d+), shrunk from (\d+) to (\d+) steps\): P: emitted "
                 r"A does not decode: bad TCP checksum", fail)
    assert m, fail
    [repro] = tmp_path.glob("*.json")
    data = json.loads(repro.read_text())
    assert data["mode"] == "two-cores" and data["invariant"] == "frame"
    steps = data["script"]["steps"]
    # the MPA reply only leaves P after P accepted a request that reached it: SYN,
    # SYN-ACK, ACK and the request delivered (RFC 5044 section 7.1), then the accept
    assert steps[-1]["verb"] == "accept" and steps[-1]["side"] == "P"
    assert sum(s.get("net") == "pass" for s in steps) >= 4
    assert int(m.group(3)) == len(steps) < int(m.group(2))
    rc, out, _ = cli("fuzz", "--reproduce", str(repro))
    assert rc == 1 and out.startswith("FAIL frame: P: emitted A does not decode")
    # the capture: the spoiled frame is P's MPA reply, and scapy recomputes a TCP
    # checksum that differs from the one on the wire
    bad = []
    for pkt in rdpcap(str(repro.with_suffix(".pcapng"))):
        rebuilt = Ether(bytes(pkt))
        del rebuilt[TCP].chksum
        if Ether(bytes(rebuilt))[TCP].chksum != pkt[TCP].chksum:
            bad.append(pkt)
    assert len(bad) == 1 and bad[0][IP].src == "10.0.0.2"
    assert bytes(bad[0][TCP].payload)[:16] == b"MPA ID Rep Frame"
    monkeypatch.delenv(fuzz.PLANT_ENV)
    data.pop("planted_defect")
    clean = tmp_path / "clean.json"
    clean.write_text(json.dumps(data))
    rc, out, _ = cli("fuzz", "--reproduce", str(clean))
    assert rc == 0 and out.startswith("PASS: no invariant broken")


HANDSHAKE = (Net("pass"), Net("pass"), Net("pass"))  # SYN, SYN-ACK, ACK


def _frames(sc: TwoScript) -> list[tuple[int, bytes, bool]]:
    frames: list[tuple[int, bytes, bool]] = []
    assert execute_two(sc, frames=frames) is None
    return frames


def test_a_corrupted_syn_is_dropped_and_resent() -> None:
    # a bit flipped in the IP header: P's NIC finds a bad checksum and drops the SYN
    # (RFC 791 section 3.1), so the next frame on the wire is A's retransmission
    frames = _frames(TwoScript(0, 0, False, (Net("corrupt", 70), Net("pass"))))
    first, second = _tcp(frames[0][1]), _tcp(frames[1][1])
    assert frames[0][2] and frames[1][2]  # both emitted by A
    assert first.flags == "S" and second.flags == "S" and first.seq == second.seq


def test_a_mutated_request_reaches_the_passive_side() -> None:
    # the request's key spoiled in flight (mutation 0: the generators' "bad key" frame)
    frames = _frames(TwoScript(0, 0, False, (*HANDSHAKE, Net("mutate", 0), Wait(0))))
    from_p = [_tcp(raw) for _, raw, by_a in frames if not by_a]
    # irdma_parse_mpa rejects a bad key; the node is reset (irdma_cm_reset_node) and P
    # answers with RST
    assert any("R" in str(t.flags) for t in from_p[1:])
    assert not any(bytes(t.payload).startswith(b"MPA ID Rep Frame") for t in from_p)


def test_duplicate_and_swap_keep_frames_in_the_queue() -> None:
    pair = two_core._Pair((None, None))  # type: ignore[arg-type]
    pair.queue = [(1, b"one"), (1, b"two")]
    two_core._middlebox(pair, Net("dup"))
    assert pair.queue == [(1, b"one"), (1, b"one"), (1, b"two")]
    two_core._middlebox(pair, Net("drop"))
    two_core._middlebox(pair, Net("swap"))
    assert pair.queue == [(1, b"two"), (1, b"one")]


def test_an_escape_on_the_passive_side_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    real = CmCore.receive

    def boom(self: CmCore, frame: Segment, now_ns: int) -> None:
        if self.name == "P":
            raise KeyError("planted")
        real(self, frame, now_ns)
    monkeypatch.setattr(CmCore, "receive", boom)
    got = execute_two(TwoScript(0, 0, False, (Net("pass"),)))
    assert got is not None and got.invariant == "escape"
    assert got.message == "KeyError escaped receive(S) on P: 'planted'"


def test_leak_timer_and_quiet_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    sc = TwoScript(0, 0, False, (*HANDSHAKE, SideVerb(0, "close", 0)))
    assert execute_two(sc) is None
    with monkeypatch.context() as m:
        m.setattr(CmCore, "leak_report", lambda self: [(3, CmState.SYN_SENT, None)]
                  if self.name == "A" else [])
        got = execute_two(sc)
        assert got is not None and got.invariant == "leak"
        assert got.message == "A: nodes left with no kernel leak to explain them: 3 in SYN_SENT"
    with monkeypatch.context() as m:
        m.setattr(two_core, "SETTLE_FRAMES", 1)
        got = execute_two(TwoScript(0, 0, False, ()))
        assert got is not None and got.invariant == "quiet"


def test_two_core_reproducer_errors_are_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"mode": "two-cores", "script": {"config_a": 0, "config_p": 0, '
                   '"cross": false, "steps": [{"net": "explode", "arg": 0}]}}')
    other = tmp_path / "other.json"
    other.write_text('{"mode": "three-cores", "script": {}}')
    for path, message in ((bad, "unknown middlebox action 'explode'"),
                          (other, "unknown mode 'three-cores'")):
        rc, out, err = cli("fuzz", "--reproduce", str(path))
        assert rc == 2 and out == "" and message in err and err.count("\n") == 1
    rc, _, err = cli("fuzz", "--two-cores", "--reproduce", str(bad))
    assert rc == 2 and "no --two-cores" in err
