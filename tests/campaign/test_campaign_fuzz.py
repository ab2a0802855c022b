"""``mpa-emu fuzz``: clean campaigns over the core, the same whatever the executor; a
planted defect found, shrunk and written as a reproducer that runs; each invariant's
check fires when its rule is broken."""

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

from mpa_emu.campaign import fuzz
from mpa_emu.campaign.generators import Script, SegStep, Wait
from mpa_emu.wire.segment import SYN


def _stable(out: str) -> list[str]:
    """The report without its wall-clock figures."""
    return [re.sub(r" in [\d.]+ s \(\d+ cases/s\)", "", line)
            for line in out.splitlines()]


def test_clean_campaign_same_report_serial_and_two_processes(tmp_path: Path) -> None:
    args = ["fuzz", "--cases", "600", "--seed", "7", "--out", str(tmp_path / "f")]
    rc1, serial, _ = cli(*args)
    rc2, parallel, _ = cli(*args, "-j", "2")
    assert rc1 == rc2 == 0, serial
    assert _stable(serial)[1:] == _stable(parallel)[1:]
    assert serial.splitlines()[-1].startswith("600 cases in ")
    assert serial.splitlines()[-1].endswith(
        "cases/s): 0 escapes; failing cases by invariant: none")
    assert not (tmp_path / "f").exists()


@pytest.mark.slow(7)
def test_planted_campaign_same_report_serial_two_processes_and_dask(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(fuzz.PLANT_ENV, "reply-checksum")
    reports = []
    with dask_cluster() as address:
        for extra in ([], ["-j", "2"], ["--scheduler", address]):
            out_dir = tmp_path / str(len(reports))
            rc, out, _ = cli("fuzz", "--cases", "500", "--seed", "5", "--out", str(out_dir),
                             *extra)
            assert rc == 1
            lines = _stable(out.replace(str(out_dir), "DIR"))[1:]
            assert any(line.startswith("FAIL frame") for line in lines)
            reports.append(lines)
            assert len(list(out_dir.glob("*.json"))) == 1
    assert reports[0] == reports[1] == reports[2]


def test_planted_defect_is_found_shrunk_and_written(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(fuzz.PLANT_ENV, "reply-checksum")
    out_dir = tmp_path / "found"
    rc, out, _ = cli("fuzz", "--cases", "400", "--seed", "3", "-j", "2", "--out", str(out_dir))
    assert rc == 1
    lines = out.splitlines()
    assert lines[0] == "fuzz: seed 3, 400 cases on 2 processes (planted defect: reply-checksum)"
    fail = next(line for line in lines if line.startswith("FAIL "))
    m = re.match(r"FAIL frame \(case (\d+), shrunk from (\d+) to (\d+) steps\): emitted A "
                 r"does not decode: bad TCP checksum", fail)
    assert m, fail
    assert int(m.group(3)) <= 2 < int(m.group(2))
    [repro] = out_dir.glob("*.json")
    data = json.loads(repro.read_text())
    assert data["invariant"] == "frame" and data["case"] == int(m.group(1))
    assert data["command"] == f"mpa-emu fuzz --reproduce {repro.name}"
    # the shrunk script reaches an accept: the only way an MPA reply gets sent
    assert [s.get("verb") for s in data["script"]["steps"]][-1] == "accept"
    rc, out, _ = cli("fuzz", "--reproduce", str(repro))
    assert rc == 1 and out.startswith("FAIL frame: emitted A does not decode")
    # the capture shows the spoiled frame: an MPA reply (RFC 5044 section 7.1 key)
    # whose TCP checksum scapy recomputes differently
    packets = rdpcap(str(repro.with_suffix(".pcapng")))
    bad = []
    for pkt in packets:
        raw = bytes(pkt)
        rebuilt = Ether(raw)
        del rebuilt[TCP].chksum
        if Ether(bytes(rebuilt))[TCP].chksum != Ether(raw)[TCP].chksum:
            bad.append(Ether(raw))
    assert len(bad) == 1 and bytes(bad[0][TCP].payload)[:16] == b"MPA ID Rep Frame"
    assert bad[0][IP].src == "10.0.0.2"
    # without the planted defect the same script passes: the defect is the plant's
    monkeypatch.delenv(fuzz.PLANT_ENV)
    data.pop("planted_defect")
    clean = tmp_path / "clean.json"
    clean.write_text(json.dumps(data))
    rc, out, _ = cli("fuzz", "--reproduce", str(clean))
    assert rc == 0 and out.startswith("PASS: no invariant broken")


SYN_SCRIPT = Script(0, False, False, (SegStep(0, SYN, True, 0, True, 0, b"", b""),
                                      Wait(1_000_000)))


def test_escape_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    assert fuzz.execute(SYN_SCRIPT) is None

    def boom(self: CmCore, now_ns: int) -> None:
        raise KeyError("planted")
    monkeypatch.setattr(CmCore, "handle_timer", boom)
    got = fuzz.execute(SYN_SCRIPT)
    assert got is not None and got.invariant == "escape"
    assert got.message == "KeyError escaped handle_timer: 'planted'"


def test_timer_left_after_the_bound_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    real = CmCore.get_timer

    def stuck(self: CmCore) -> int | None:
        t = real(self)
        return t if t is not None else 10**18
    monkeypatch.setattr(CmCore, "get_timer", stuck)
    got = fuzz.execute(SYN_SCRIPT)
    assert got is not None and got.invariant == "timer"


def test_unexplained_leak_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(CmCore, "leak_report",
                        lambda self: [(4, CmState.SYN_RCVD, None)])
    got = fuzz.execute(SYN_SCRIPT)
    assert got is not None and got.invariant == "leak"
    assert got.message.endswith("4 in SYN_RCVD")


def test_unreachable_state_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    real = CmCore.node

    def accepting(self: CmCore, conn: int) -> object:
        view = real(self, conn)
        # ACCEPTING is declared in cm.h and never set by cm.c
        return None if view is None else type("V", (), {"state": CmState.ACCEPTING,
                                                         "rem_port": view.rem_port,
                                                         "loc_port": view.loc_port,
                                                         "rcv_nxt": view.rcv_nxt,
                                                         "loc_seq_num": view.loc_seq_num})()
    monkeypatch.setattr(CmCore, "node", accepting)
    got = fuzz.execute(SYN_SCRIPT)
    assert got is not None and got.invariant == "reachability"
    assert "ACCEPTING" in got.message


def test_reproducer_errors_are_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"script": {"steps": [{"verb": "explode"}]}}')
    for path, message in ((bad, "not a fuzz reproducer"), (tmp_path / "none.json",
                                                           "No such file")):
        rc, out, err = cli("fuzz", "--reproduce", str(path))
        assert rc == 2 and out == "" and message in err and err.count("\n") == 1
    rc, _, err = cli("fuzz", "--time-budget", "0")
    assert rc == 2 and "--time-budget must be more than 0" in err
    rc, _, err = cli("fuzz", "--cases", "0")
    assert rc == 2 and "expected 1 or more" in err
    rc, _, err = cli("fuzz", "--json", str(tmp_path / "x.json"))
    assert rc == 2 and "--json goes with --live" in err
    rc, _, err = cli("fuzz", "--live", "192.0.2.1", "--address", "192.0.2.2")
    assert rc == 2 and "--live needs IPv4:PORT or [IPv6]:PORT, got '192.0.2.1'" in err
    rc, _, err = cli("fuzz", "--live", "2001:db8::1:31000", "--address", "2001:db8::2")
    assert rc == 2 and "--live needs IPv4:PORT or [IPv6]:PORT" in err
    rc, _, err = cli("fuzz", "--live", "[2001:db8::1]:31000", "--address", "192.0.2.2")
    assert rc == 2 and "--address must be IPv6, as the peer's address is" in err
    rc, _, err = cli("fuzz", "--live", "[2001:db8::1]:31000", "--address", "2001:db8::2",
                     "--host-address", "192.0.2.1/24")
    assert rc == 2 and "--host-address needs IPv6/PREFIX, got '192.0.2.1/24'" in err
    rc, _, err = cli("fuzz", "--accept")
    assert rc == 2 and "--accept goes with --live" in err
    rc, _, err = cli("fuzz", "--live", "192.0.2.1:31000")
    assert rc == 2 and "--live needs --address" in err


def test_time_budget_stops_starting_cases(tmp_path: Path) -> None:
    rc, out, _ = cli("fuzz", "--cases", "100000", "--time-budget", "0.5", "--out",
                     str(tmp_path))
    assert rc == 0
    last = out.splitlines()[-1]
    ran = int(last.split()[0])
    assert 0 < ran < 100000 and last.endswith(f"time budget reached after {ran} of "
                                              "100000 cases")
