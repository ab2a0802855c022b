"""What the judge reads of a connection, as protocols: inspect's report
(:mod:`mpa_emu.views.inspection.report`, a layer above) has these fields, and the judge
names only what it reads (:class:`MpaFrameLike` is the stacks' own, as their refusal
rules read a frame: :mod:`mpa_emu.stacks.refusals`)."""

from __future__ import annotations

from typing import Protocol

from mpa_emu.stacks.refusals import MpaFrameLike


class SideLike(Protocol):
    """One side's SYN as captured."""

    @property
    def syn_frame(self) -> int | None: ...
    @property
    def option_kinds(self) -> tuple[int, ...]: ...
    @property
    def syn_window(self) -> int | None: ...


__all__ = ["MpaFrameLike", "SideLike"]
