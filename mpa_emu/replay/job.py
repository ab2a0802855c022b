"""One replay as ``mpa-emu replay`` asks for it, as a function: the capture, the options,
``--profile auto`` and the outputs, run by :func:`run_job`. The command line builds a
:class:`ReplayJob` from its arguments; a conformance suite builds one per case and calls
:func:`run_job` directly."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mpa_emu.capture.checksums import Mode, ModeName
from mpa_emu.errors import MpaEmuError
from mpa_emu.replay import ProfileSurvey, replay_capture, replay_profiles
from mpa_emu.replay.engine import OnRequest
from mpa_emu.replay.report import ReplayOptions, ReplayReport
from mpa_emu.replay.stacks import parse_profile
from mpa_emu.stacks import DEFAULT_STACK


@dataclass(frozen=True, slots=True)
class ReplayJob:
    """A replay, its options as plain values (so a job travels to a campaign's worker
    processes as it is), and where its outputs go (None: not written)."""

    capture: str
    emulate: bytes
    on_request: OnRequest = "auto"
    backlog: int = 4096
    time_tolerance_ns: int = 10_000_000
    strict_offload: bool = False
    semantic: bool = False
    horizon_ns: int = 400_000_000_000
    seed: int = 0
    checksums: ModeName = "offload"
    profile: str = DEFAULT_STACK
    """What ``--profile`` takes (:func:`mpa_emu.replay.stacks.parse_profile`): a stack
    with optional parameters, ``ADDRESS=STACK,...``, or ``auto``: replay once per
    candidate stack in semantic mode."""
    mpa_rev: int | None = None
    """The MPA revision the emulated node (every profile with ``auto``) starts at."""
    json: str | None = None
    output: str | None = None
    html: str | None = None

    @property
    def detail(self) -> bool:
        """Whether an output wants every frame's story (the merged pcapng, the page)."""
        return bool(self.output or self.html)

    @property
    def all_profiles(self) -> bool:
        """``--profile auto``."""
        return self.profile == "auto"

    def options(self) -> ReplayOptions:
        """The replay's options, the emulated side's stack included (ValueError with one
        line for a ``profile`` :func:`~mpa_emu.replay.stacks.parse_profile` refuses)."""
        spec = parse_profile(self.profile, self.mpa_rev)
        chosen = spec.emulated(self.emulate)
        return ReplayOptions(
            emulate=self.emulate, on_request=self.on_request, backlog=self.backlog,
            time_tolerance_ns=self.time_tolerance_ns, strict_offload=self.strict_offload,
            semantic=self.semantic, horizon_ns=self.horizon_ns, seed=self.seed,
            checksums=Mode(self.checksums), config=chosen.config,
            stack=None if chosen.stack == DEFAULT_STACK and not chosen.alias else chosen,
            peers=tuple(sorted(spec.peers(self.emulate).items())))


@dataclass(frozen=True, slots=True)
class JobResult:
    """What a job answered: the report shown in full and, with ``--profile auto``, the
    survey of every profile."""

    report: ReplayReport
    survey: ProfileSurvey | None

    @property
    def exit_code(self) -> int:
        """0 same, 1 different (with a survey: whether any profile had the outcome)."""
        return self.survey.exit_code if self.survey is not None else self.report.exit_code

    def text(self) -> str:
        """The verdict and report as the command prints them."""
        return self.survey.text() if self.survey is not None else self.report.text()

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` report (with the profiles' answers after a survey)."""
        data = self.report.to_json()
        survey = self.survey
        if survey is not None:
            data["profiles"] = {name: {"same_outcome": not r.failed,
                                       "first_divergence": r.first_divergence or None}
                                for name, r in survey.reports.items()}
            data["same_outcome_profiles"] = survey.same_outcome
            data["picked"] = survey.picked
            data["picked_why"] = survey.why()
        return data


def run_job(job: ReplayJob, progress: Callable[[int, int], None] | None = None, *,
            journal: bool = True) -> JobResult:
    """Replay the job's capture (:class:`~mpa_emu.replay.RecordingError` on bad input);
    its outputs are written by :func:`write_outputs`. ``journal``: see
    :func:`~mpa_emu.replay.replay_capture` (False: the result is for its text and its
    outputs only, as the command line uses it)."""
    options = job.options()
    if job.all_profiles:
        survey = replay_profiles(job.capture, options, progress, mpa_rev=job.mpa_rev,
                                 detail=job.detail)
        return JobResult(survey.best, survey)
    return JobResult(replay_capture(job.capture, options, progress, detail=job.detail,
                                    journal=journal or job.json is not None or job.detail),
                     None)


class OutputError(MpaEmuError):
    """An output of a job that cannot be written: one line naming what and why."""


def write_outputs(job: ReplayJob, result: JobResult) -> None:
    """Write the job's ``--json``, ``-o`` and ``--html`` outputs, in that order
    (:class:`OutputError` for the first that cannot be written)."""
    try:
        if job.json:
            with open(job.json, "w") as out:
                json.dump(result.to_json(), out, indent=2)
                out.write("\n")
        if job.output:
            result.report.write_pcapng(job.output)
    except OSError as exc:
        raise OutputError(f"cannot write output: {exc.strerror or exc}") from None
    if job.html is not None:
        from mpa_emu.replay.html_page import replay_page
        from mpa_emu.views.html import write_page

        try:
            write_page(job.html, replay_page(result.report, result.survey))
        except OSError as exc:
            raise OutputError(f"cannot write {job.html}: {exc.strerror or exc}") from None
