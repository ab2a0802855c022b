"""Every command that reads or writes captures or traces keeps its memory flat in the
size of its work: ten times the input costs at most 1.5 times the peak (Python's own
allocations, measured with tracemalloc; a command that kept every frame or record would
peak about ten times higher).

Each command runs in this process through the CLI's ``main`` with its output going to
files (or to the null device), once untraced first so that what a first run sets up
for good (modules imported on first use, the interpreter's free lists) counts in
neither measure."""

from __future__ import annotations

import contextlib
import gc
import os
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers.long_captures import SERVER_TEXT, write_copies

import mpa_emu.capture.pcap as pcap
import mpa_emu.capture.tshark_pieces as tshark_pieces
import mpa_emu.views.inspection.connections as connections
from mpa_emu.cli import main
from mpa_emu.net import Accept, Network
from mpa_emu.net.records import SpooledRecords
from mpa_emu.wire.interning import forget

pytestmark = pytest.mark.memory

FLAT = 1.5

SILENT_PEER = """\
max_events = {events}
[[host]]
name = "a"
address = "10.0.0.1"
neighbours = {{ "10.0.0.2" = "02:00:00:00:00:09" }}
config = {{ retrans = 4294967295 }}
[[connect]]
from = "a"
to = "10.0.0.2"
port = 1
"""
"""A connect to an address nobody answers, retransmitted until the event bound: one SYN
an event, as long a run as asked for (``retrans`` is a u32 in the kernel)."""


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    with open(os.devnull, "w", encoding="utf-8") as sink, \
            contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        yield


def _peak(work: Callable[[], object]) -> int:
    # The same start for both runs whatever ran before in this process: the shared-value
    # tables empty, the garbage of earlier tests gone.
    forget()
    gc.collect()
    tracemalloc.start()
    try:
        with _quiet():
            work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _flat(small: Callable[[], object], large: Callable[[], object]) -> tuple[int, int]:
    with _quiet():
        # Untraced: modules imported on first use, and CPython's free lists (a freed tuple
        # is kept for reuse, and tracemalloc still counts it) filled as far as a run in the
        # steady state fills them, so that neither measure counts them. The smaller run is
        # already in the steady state (each test sizes it so): a command whose memory is
        # flat fills them no further in the larger run, and one whose memory grows with the
        # input fills them further there, which is what the test is there to catch.
        small()
    peak_small = _peak(small)
    peak_large = _peak(large)
    assert peak_large <= FLAT * peak_small, (peak_small, peak_large)
    return peak_small, peak_large


def _command(argv: list[str], expect: int = 0) -> Callable[[], object]:
    def run() -> None:
        assert main(argv) == expect
    return run


READ_CHUNK = 1 << 14
"""The capture reader's buffer here (a quarter MB by default): the smaller captures are
several times larger than it, as a long capture is larger than the real one."""


@pytest.fixture(autouse=True)
def _short_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    # A closed connection is kept for late retransmissions (LINGER_FRAMES, 10,000 frames
    # by default: longer than the smaller capture here). Twenty copies' worth makes both
    # captures outlast the window, so what is measured is growth with length alone.
    monkeypatch.setattr(connections, "LINGER_FRAMES", 280)
    # The same for the reader's buffer: what is measured is growth with length, not the
    # buffer a long capture fills either way.
    monkeypatch.setattr(pcap, "_CHUNK", READ_CHUNK)


@pytest.fixture(scope="module")
def captures(tmp_path_factory: pytest.TempPathFactory) -> Callable[[int], tuple[Path, Path]]:
    """Captures of ``copies`` and ten times as many connections, made once per size."""
    made: dict[int, tuple[Path, Path]] = {}

    def make(copies: int) -> tuple[Path, Path]:
        if copies not in made:
            tmp = tmp_path_factory.mktemp(f"captures{copies}")
            small, large = tmp / "small.pcapng", tmp / "large.pcapng"
            assert write_copies(large, 10 * copies) == 10 * write_copies(small, copies)
            assert small.stat().st_size > 4 * READ_CHUNK
            made[copies] = small, large
        return made[copies]
    return make


# Each command's smaller capture is one it reads in its steady state: past the linger
# window and the reader's buffer, and past what else it keeps up to a bound (the JSON
# report's, replay's).
@pytest.mark.slow(6)
@pytest.mark.parametrize(("argv", "copies"), [
    (["inspect", "--fpdus"], 50),
    (["inspect", "--json"], 200),
    (["replay", "--emulate", SERVER_TEXT], 100),
    (["explain"], 50),
    # The page's ladder and frame fields are read from the capture while written
    # (views/html/streamed.py), its sections wait on disk.
    (["explain", "--html", os.devnull], 200),
], ids=["inspect", "inspect-json", "replay", "explain", "explain-html"])
def test_reading_a_capture_ten_times_longer_keeps_the_peak(
        captures: Callable[[int], tuple[Path, Path]], argv: list[str], copies: int) -> None:
    small, large = captures(copies)
    _flat(_command([argv[0], str(small), *argv[1:]]),
          _command([argv[0], str(large), *argv[1:]]))


@pytest.mark.slow(6)
def test_diagram_of_a_capture_ten_times_longer_keeps_the_peak(
        captures: Callable[[int], tuple[Path, Path]], tmp_path: Path) -> None:
    small, large = captures(100)
    out = str(tmp_path / "ladder.svg")
    _flat(_command(["diagram", str(small), "-o", out]),
          _command(["diagram", str(large), "-o", out]))


@pytest.mark.slow(25)
@pytest.mark.tshark
def test_judge_of_a_capture_ten_times_longer_keeps_the_peak(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Pieces of a few hundred frames: both captures go to tshark in pieces, as a long
    # capture does (tshark's own memory is its process's, outside this measure).
    monkeypatch.setattr(tshark_pieces, "PIECE_FRAMES", 280)
    monkeypatch.setattr(tshark_pieces, "CARRY_LIMIT", 280)
    small, large = tmp_path / "small.pcapng", tmp_path / "large.pcapng"
    write_copies(small, 40)
    write_copies(large, 400)
    _flat(_command(["judge", str(small)]), _command(["judge", str(large)]))


def _silent_peer(tmp_path: Path, events: int) -> str:
    path = tmp_path / f"silent_{events}.toml"
    path.write_text(SILENT_PEER.format(events=events), encoding="utf-8")
    return str(path)


@pytest.mark.slow(23)
def test_run_ten_times_longer_keeps_the_peak_with_every_output(tmp_path: Path) -> None:
    outputs = ["-o", str(tmp_path / "o.pcapng"), "--trace", str(tmp_path / "t.jsonl"),
               "--json", str(tmp_path / "s.json"), "--html", str(tmp_path / "r.html"),
               "--no-progress"]
    # Cut by the event bound: an expectation fails, exit 1, every output written.
    small = _command(["run", _silent_peer(tmp_path, 2_000), *outputs], expect=1)
    large = _command(["run", _silent_peer(tmp_path, 20_000), *outputs], expect=1)
    _flat(small, large)
    # The large run's outputs are all there: one SYN an event, each in every output.
    assert (tmp_path / "s.json").read_text().count('"kind": "SYN"') == 20_000
    assert (tmp_path / "r.html").read_text().count('" data-frame="') == 20_000


@pytest.mark.slow(12)
def test_diagram_of_a_scenario_ten_times_longer_keeps_the_peak(tmp_path: Path) -> None:
    out = str(tmp_path / "ladder.svg")
    _flat(_command(["diagram", _silent_peer(tmp_path, 2_000), "-o", out]),
          _command(["diagram", _silent_peer(tmp_path, 20_000), "-o", out]))


def _cycles(connections: int) -> Callable[[], object]:
    """Connections opened, accepted and closed one after the other on a network whose
    records are on disk (the sink any command running networks uses), all read back."""
    def run() -> None:
        with SpooledRecords() as records:
            net = Network(seed=3, records=records)
            alice = net.add_host("alice", "192.0.2.1")
            bob = net.add_host("bob", "192.0.2.2")
            bob.listen(31000, policy=Accept(b"welcome"))

            left = [connections]

            def cycle() -> None:
                # One at a time, each scheduling the next: the schedule holds one call.
                conn = alice.connect("192.0.2.2", 31000, private_data=b"hello")
                net.after(20_000_000, alice.disconnect, conn)
                left[0] -= 1
                if left[0]:
                    net.after(500_000_000, cycle)

            net.at(0, cycle)
            net.run()
            assert sum(u.event.name == "CONNECT_REPLY" for u in alice.upcalls) == connections
            assert sum(1 for _ in net.frames) == len(net.frames) > 10 * connections
            assert sum(1 for _ in net.journal or ()) > len(net.frames)
    return run


@pytest.mark.slow(19)
def test_spooled_network_records_ten_times_more_connections_keep_the_peak() -> None:
    # 300 connections already fill every spool's in-memory chunk (RecordSpool.CHUNK
    # records): both runs measure the steady state.
    _flat(_cycles(300), _cycles(3000))
