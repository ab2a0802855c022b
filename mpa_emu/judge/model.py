"""The records the judge hands to the reports: the stack a side is judged as
(:class:`SideStack`) and a stack rule a frame breaks (:class:`Refusal`, each stack's own
record kind: :mod:`mpa_emu.stacks.refusals`). They depend on nothing above the stacks'
shared records, so that the report model can hold them."""

from __future__ import annotations

from dataclasses import dataclass, field

from mpa_emu.stacks.refusals import Refusal, errno_name


@dataclass(slots=True)
class SideStack:
    """The stack one side is judged as, how (``fingerprint`` or ``profile``), and why."""

    side: str
    address: str
    stack: str
    source: str
    evidence: list[str] = field(default_factory=list)

    def text(self) -> str:
        """``client 10.0.0.1: siw (fingerprint: ...)``"""
        why = "; ".join(self.evidence) or "no evidence"
        return f"{self.side} {self.address}: {self.stack} ({self.source}: {why})"


__all__ = ["Refusal", "SideStack", "errno_name"]
