"""What a stack refuses in an MPA frame it receives, as records every stack writes its
rules with: the frame as the receiving side read it (:class:`Received`, the frame seen
through :class:`MpaFrameLike`), the rule it breaks (:class:`Refusal`) and the catalogue
keys (``RULE_*``, docs/explain.md). Each stack's rules are in its own folder
(``refusals.py``), reached through :attr:`Stack.refusals
<mpa_emu.stacks.base.Stack.refusals>`; the judge (:mod:`mpa_emu.judge.rules`) applies
them.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from typing import Protocol

from mpa_emu.wire.private_data import LegacyIrdOrd

# Catalogue keys (docs/explain.md): one per kind of refusal.
RULE_SPLIT = "split-frame"
RULE_CM_BUFFER = "pd-over-limit"
RULE_PD_LIMIT = "pd-over-limit"
RULE_REV = "revision"
RULE_NO_P2P = "no-p2p"
RULE_RTR = "rtr-mismatch"
RULE_IRD_ORD = "ird-ord"
RULE_MARKERS = "markers"
RULE_EXTRA = "extra-bytes"
RULE_KEY = "wrong-key"
RULE_ENHANCED = "revision"



class MpaFrameLike(Protocol):
    """An MPA request or reply as found on the wire."""

    @property
    def frame(self) -> int: ...
    @property
    def request(self) -> bool: ...
    @property
    def rev(self) -> int: ...
    @property
    def flags(self) -> int: ...
    @property
    def pd_length(self) -> int: ...
    @property
    def ird(self) -> int | None: ...
    @property
    def ord(self) -> int | None: ...
    @property
    def p2p(self) -> bool | None: ...
    @property
    def write_rtr(self) -> bool | None: ...
    @property
    def read_rtr(self) -> bool | None: ...
    @property
    def private_data(self) -> bytes: ...
    @property
    def legacy(self) -> LegacyIrdOrd | None: ...
    @property
    def reject(self) -> bool: ...
    @property
    def has_block(self) -> bool: ...
    @property
    def frame_len(self) -> int:
        """Bytes the frame takes on the stream: the header, any extension its dialect
        puts after it (erdma's), PD_Length bytes."""

    def rtr_names(self) -> list[str]:
        """The RTR types offered (request) or chosen (reply)."""


@dataclass(frozen=True, slots=True)
class Received:
    """The frame as the receiving side read it: the frame, the request it answers (for a
    reply), the bytes of its first segment and the bytes after it in its last one."""

    frame: MpaFrameLike
    request: MpaFrameLike | None
    first_segment: int
    trailing: int


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
