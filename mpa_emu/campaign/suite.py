"""Conformance suites: ``mpa-emu replay --suite SUITE.toml``.

A suite file lists cases, each a capture with the verdict replay must give it::

    [[case]]
    name = "passive v2 accept"         # optional; default: the capture's file name
    capture = "captures/p1.pcap"       # relative to the suite file
    emulate = "192.0.2.10"
    args = ["--backlog", "1"]          # optional: replay options, as on the command line
    expect = "match"                   # match (exit 0) | diverge (exit 1) | error (exit 2)
    divergence_frame = 7               # optional, with expect = "diverge"
    why = "backlog 1 admits two"       # optional: shown when the case fails

Each case's ``args`` are read as ``mpa-emu replay`` reads its options (the command line
turns them into a :class:`~mpa_emu.replay.job.ReplayJob`, so every replay option works in
``args``), and the case runs the replay as a function; a case passes when it gets the
expected verdict (and, when given, its first divergence is at ``divergence_frame``).
"""

from __future__ import annotations

import re
import time
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from mpa_emu.capture.pcap import capture_error
from mpa_emu.errors import MpaEmuError
from mpa_emu.replay import RecordingError
from mpa_emu.replay.job import OutputError, ReplayJob, run_job, write_outputs

SuiteVerdict = Literal["match", "diverge", "error"]
"""What replay answers for a case: the same (exit 0), a divergence (1), an error (2)."""
VERDICTS: dict[SuiteVerdict, int] = {"match": 0, "diverge": 1, "error": 2}
"""Expected verdict -> replay's exit code."""
_BY_EXIT: dict[int, SuiteVerdict] = {code: name for name, code in VERDICTS.items()}
_KEYS = {"name", "capture", "emulate", "args", "expect", "divergence_frame", "why"}
_RESERVED = {"--json", "--suite", "--junit", "--scheduler", "-j", "--jobs"}
_FRAME = re.compile(r"at frame (\d+)")
_PROG = "mpa-emu replay"
"""The command a case's error line names, as the command line would print it."""


class SuiteError(MpaEmuError):
    """A suite file that cannot be read: one line naming the file and the case."""


@dataclass(frozen=True, slots=True)
class SuiteCase:
    """One case of a suite, its capture resolved against the suite's folder."""

    index: int
    name: str
    capture: str
    emulate: str
    args: tuple[str, ...]
    expect: SuiteVerdict
    divergence_frame: int | None = None
    why: str = ""
    job: ReplayJob | None = None
    """The replay the case's options ask for, as the command line reads them (None when
    they cannot be read: :attr:`error` says why)."""
    error: str = ""
    """The command line's one-line error for options it refuses."""


@dataclass(frozen=True, slots=True)
class CaseResult:
    """What replay answered for one case and whether that is what the suite expects."""

    name: str
    expect: SuiteVerdict
    verdict: SuiteVerdict
    exit: int
    divergence_frame: int | None
    summary: str
    passed: bool
    reason: str
    seconds: float

    def line(self) -> str:
        """``PASS name: verdict line`` or ``FAIL name: why, verdict line``."""
        if self.passed:
            return f"PASS {self.name}: {self.summary}"
        return f"FAIL {self.name}: {self.reason}: {self.summary}"


def load_suite(path: str | Path) -> list[SuiteCase]:
    """Read and check a suite file (SuiteError on any problem)."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SuiteError(f"{path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise SuiteError(f"{path}: not a text file") from None
    except tomllib.TOMLDecodeError as exc:
        raise SuiteError(f"{path}: not valid TOML: {exc}") from None
    extra = set(data) - {"case"}
    if extra:
        raise SuiteError(f"{path}: unknown top-level key {sorted(extra)[0]!r} "
                         "(a suite has [[case]] tables only)")
    raw = data.get("case")
    if not isinstance(raw, list) or not raw:
        raise SuiteError(f"{path}: no [[case]] tables")
    return [_case(path, i, entry) for i, entry in enumerate(raw)]


def _case(path: Path, index: int, entry: Any) -> SuiteCase:
    where = f"{path}: case {index + 1}"
    if not isinstance(entry, dict):
        raise SuiteError(f"{where}: not a table")
    if isinstance(entry.get("name"), str):
        where += f" ({entry['name']})"
    unknown = set(entry) - _KEYS
    if unknown:
        raise SuiteError(f"{where}: unknown key {sorted(unknown)[0]!r} "
                         f"(known: {', '.join(sorted(_KEYS))})")

    def text(key: str, required: bool = True) -> str:
        value = entry.get(key)
        if value is None and not required:
            return ""
        if not isinstance(value, str) or not value:
            raise SuiteError(f"{where}: {key} must be a non-empty string"
                             + (" (missing)" if value is None else ""))
        return value

    capture = text("capture")
    emulate = text("emulate")
    expect_text = text("expect")
    expect = next((v for v in VERDICTS if v == expect_text), None)
    if expect is None:
        raise SuiteError(f"{where}: expect must be match, diverge or error, "
                         f"got {expect_text!r}")
    args = entry.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise SuiteError(f"{where}: args must be a list of strings")
    reserved = sorted(set(args) & _RESERVED)
    if reserved:
        raise SuiteError(f"{where}: args may not hold {reserved[0]} (a suite option)")
    frame = entry.get("divergence_frame")
    if frame is not None:
        if isinstance(frame, bool) or not isinstance(frame, int) or frame < 1:
            raise SuiteError(f"{where}: divergence_frame must be a frame number (1 or more)")
        if expect != "diverge":
            raise SuiteError(f"{where}: divergence_frame goes with expect = \"diverge\"")
    resolved = (path.parent / capture).resolve()
    name = entry.get("name") or Path(capture).name
    return SuiteCase(index, str(name), str(resolved), emulate, tuple(args), expect, frame,
                     text("why", required=False))


def run_case(case: SuiteCase) -> CaseResult:
    """Run one case's replay (its :attr:`SuiteCase.job`) and judge its verdict."""
    started = time.perf_counter()

    def error(summary: str) -> CaseResult:
        return _judge(case, "error", 2, None, summary, time.perf_counter() - started)

    if case.job is None:
        return error(case.error or "no output")
    try:
        result = run_job(case.job)
    except RecordingError as exc:
        return error(f"{_PROG}: error: {capture_error(case.job.capture, str(exc))}")
    printed = result.text().strip().splitlines()
    try:
        write_outputs(case.job, result)
    except OutputError as exc:
        return error(f"{_PROG}: error: {exc}")
    if not printed:
        return error("no output")
    code = result.exit_code
    frame = result.to_json().get("first_divergence_frame")
    if frame is None and code == 1:
        m = _FRAME.search(printed[0])
        frame = int(m.group(1)) if m else None
    seconds = time.perf_counter() - started
    return _judge(case, _BY_EXIT.get(code, "error"), code, frame, printed[0], seconds)


def _judge(case: SuiteCase, verdict: SuiteVerdict, code: int, frame: int | None, summary: str,
           seconds: float) -> CaseResult:
    reason = ""
    if verdict != case.expect:
        reason = f"expected {case.expect}, got {verdict}"
    elif case.divergence_frame is not None and frame != case.divergence_frame:
        reason = (f"expected the first divergence at frame {case.divergence_frame}, "
                  f"got {'none' if frame is None else f'frame {frame}'}")
    if reason and case.why:
        reason += f" ({case.why})"
    return CaseResult(case.name, case.expect, verdict, code, frame, summary, not reason,
                      reason, seconds)


def result_json(results: list[CaseResult | None], errors: list[str | None]) -> dict[str, Any]:
    """The suite's outcome as plain data (``--json``)."""
    cases = []
    for res, error in zip(results, errors, strict=True):
        if res is None:
            cases.append({"passed": False, "error": error})
        else:
            entry = asdict(res)
            entry["seconds"] = round(res.seconds, 4)
            cases.append(entry)
    passed = sum(1 for c in cases if c.get("passed"))
    return {"passed": passed, "failed": len(cases) - passed, "cases": cases}
