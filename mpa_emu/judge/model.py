"""The records the judge hands to the reports: the stack a side is judged as
(:class:`SideStack`) and a stack rule a frame breaks (:class:`Refusal`). They depend on
nothing else in the package, so that the report model can hold them."""

from __future__ import annotations

import errno
from dataclasses import dataclass, field


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


@dataclass(frozen=True, slots=True)
class Refusal:
    """One rule of ``stack`` that the frame received by ``role`` breaks.

    ``status`` is the iw_cm CONNECT_REPLY status the initiator's application gets when
    the initiator refuses (negative errno), None when a responder refuses (its
    application hears nothing; what the initiator sees depends on the initiator's stack).
    ``reply`` is what the refusing side puts on the wire (RST, a reject, a Terminate)."""

    stack: str
    role: str
    rule: str
    fn: str
    frame: int
    text: str
    reply: str
    status: int | None = None
    log: str = ""

    def sentence(self) -> str:
        """``an irdma initiator refuses it (irdma_negotiate_mpa_v2_ird_ord: RST,
        CONNECT_REPLY -ECONNRESET)``"""
        status = f", CONNECT_REPLY {errno_name(self.status)}" if self.status is not None \
            else ""
        return f"{self.text}: {self.fn} ({self.reply}{status})"


def errno_name(status: int | None) -> str:
    """``-ECONNRESET`` for -104, ``0`` for 0."""
    if not status:
        return "0"
    name = errno.errorcode.get(-status, str(-status))
    return f"-{name}"
