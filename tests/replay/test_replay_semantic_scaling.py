"""``replay --semantic --profile auto`` is linear in the capture's length: the judge
reads the whole run's lists (emitted frames, injections, NIC events, upcalls) a fixed
number of times, not once per connection. Checked by counting the entries read, never
by wall time."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from helpers.long_captures import SERVER_TEXT, write_copies

import mpa_emu.replay as replay_pkg
import mpa_emu.replay.semantic as semantic
from mpa_emu.cli import main
from mpa_emu.replay.flow_runs import FlowRuns

T = TypeVar("T")


class CountingList(list[T]):
    """A list that counts the entries read through iteration."""

    reads = 0

    def __iter__(self) -> Iterator[T]:
        for item in super().__iter__():
            CountingList.reads += 1
            yield item


def _reads(tmp_path: Path, connections: int, monkeypatch: pytest.MonkeyPatch,
           capsys: pytest.CaptureFixture[str]) -> int:
    path = tmp_path / f"copies{connections}.pcapng"
    write_copies(path, connections)
    real = semantic.judge

    def counted(rec: Any, run: Any, *args: Any) -> Any:
        for name in ("emitted", "injections", "nic_events", "upcalls", "upcall_frames"):
            setattr(run, name, CountingList(getattr(run, name)))
        return real(rec, run, *args)

    monkeypatch.setattr(replay_pkg, "judge", counted)
    CountingList.reads = 0
    code = main(["replay", "--semantic", "--profile", "auto", "--emulate", SERVER_TEXT,
                 str(path)])
    capsys.readouterr()
    assert code in (0, 1)
    return CountingList.reads


def test_the_semantic_judge_reads_the_run_a_fixed_number_of_times(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    small = _reads(tmp_path, 12, monkeypatch, capsys)
    large = _reads(tmp_path, 36, monkeypatch, capsys)
    assert small > 0
    # Three times the connections: three times the entries read (each list once per
    # profile tried), not nine times (each list once per connection).
    assert large <= 3.3 * small, (small, large)


def test_flow_runs_group_every_entry_once() -> None:
    from mpa_emu.replay.engine import RunResult

    run = RunResult(emitted=[], injections=[], actions=[], upcalls=[], flows={},
                    last_frame=0, notes=[])
    runs = FlowRuns(run)
    assert runs.passes == 0
    assert runs.of(("a", 1, b"x", 2, 0)).emitted == []  # type: ignore[arg-type]
