"""The scripted application's verbs reach the run's log once their outcome is known: a
log that keeps what it is given (a spool writes its items to disk) still holds each
refusal, and the verbs keep their order."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from mpa_emu.replay.engine import AppAction, Engine, EngineOptions
from mpa_emu.replay.recording import load
from mpa_emu.replay.recording_source import RecordingSource
from mpa_emu.wire.addr import ip_bytes

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "pcaps" / "golden" / "golden_accept_v2.pcapng"


class Snapshots:
    """A log that keeps each verb as it was when appended."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int, str]] = []
        self.items: list[AppAction] = []

    def append(self, item: AppAction, /) -> None:
        self.seen.append((item.verb, item.frame, item.error))
        self.items.append(item)

    def __iter__(self) -> Iterator[AppAction]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


def test_a_refused_verb_is_logged_with_its_refusal() -> None:
    # Rejecting the golden request (answered by the reply at frame 6) leaves no offloaded
    # QP, so the disconnect scripted at the recorded host's FIN (frame 13) is refused.
    rec = load(GOLDEN, ip_bytes("192.168.20.2"))
    engine = Engine(rec, EngineOptions(on_request="reject", trace=False),
                    source=RecordingSource(rec))
    log = Snapshots()
    engine.actions = log
    engine.run()
    assert [(a.verb, a.frame, a.error) for a in log.items] == log.seen
    verbs = [(verb, frame) for verb, frame, _error in log.seen]
    assert verbs == [("listen", 0), ("reject", 6), ("disconnect", 13)]
    assert log.seen[-1][2].startswith("connection 1 has no offloaded QP")
