"""Property tests: whatever the bytes, replay answers with a verdict or a one-line bad-input
error, never an exception."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mpa_emu.replay import RecordingError, ReplayOptions, replay_capture
from mpa_emu.wire.addr import ip_bytes

PCAPS = Path(__file__).resolve().parents[2] / "pcaps"
ORIGINAL = (PCAPS / "v2_accept.pcap").read_bytes()
_FIXTURE_OK = [HealthCheck.function_scoped_fixture]  # tmp_path is only overwritten
OPTIONS = ReplayOptions(emulate=ip_bytes("192.168.10.2"), horizon_ns=20_000_000_000)


def _replay_bytes(data: bytes, tmp: Path) -> None:
    path = tmp / "fuzz.pcap"
    path.write_bytes(data)
    try:
        report = replay_capture(path, OPTIONS)
    except RecordingError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert report.exit_code in (0, 1)
    assert report.verdict().split(":")[0].split(" ")[0] in ("MATCH", "DIVERGENCE", "EMULATOR")
    report.to_json()


@settings(max_examples=80, deadline=None, suppress_health_check=_FIXTURE_OK)
@given(flips=st.lists(st.tuples(st.integers(24, len(ORIGINAL) - 1), st.integers(1, 255)),
                      min_size=1, max_size=6))
def test_corrupted_fixture_bytes_never_raise(tmp_path: Path, flips: list[tuple[int, int]]) -> None:
    data = bytearray(ORIGINAL)
    for offset, xor in flips:
        data[offset] ^= xor
    _replay_bytes(bytes(data), tmp_path)


@settings(max_examples=40, deadline=None, suppress_health_check=_FIXTURE_OK)
@given(cut=st.integers(0, len(ORIGINAL)))
def test_truncated_capture_never_raises(tmp_path: Path, cut: int) -> None:
    _replay_bytes(ORIGINAL[:cut], tmp_path)


@settings(max_examples=30, deadline=None, suppress_health_check=_FIXTURE_OK)
@given(data=st.binary(max_size=300))
def test_arbitrary_bytes_are_bad_input_or_a_verdict(tmp_path: Path, data: bytes) -> None:
    _replay_bytes(data, tmp_path)
