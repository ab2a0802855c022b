"""explain in the upper protocol's terms: when inspect diagnosed the connection's upper
protocol (:class:`~mpa_emu.ulp.upper.report.UlpDiagnosis`), its cause replaces the
iWARP-level one, whose sentence stays as a note, with the negotiated value, what the
application sees and what the capture cannot prove."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from mpa_emu.judge.catalogue import CAUSES
from mpa_emu.judge.model import errno_name
from mpa_emu.views.upper_protocol.diagnose import STATUS

if TYPE_CHECKING:
    from mpa_emu.views.inspection.report import ConnectionReport


class Explanation(Protocol):
    """The fields of :class:`mpa_emu.views.explanation.Explanation` refined here."""

    verdict: str
    cause: str
    summary: str
    initiator_event: str
    initiator_status: int
    evidence: list[int]
    fix: str
    functions: str
    notes: list[str]
    ulp: dict[str, Any]


def upper_protocol_dict(c: ConnectionReport) -> dict[str, Any]:
    """The explanation's ``ulp`` entry: the protocol, how it was told, its negotiated
    values and its diagnoses' causes ({} without an upper protocol)."""
    u = c.ulp
    if u is None:
        return {}
    return {"protocol": u.protocol, "name": u.name, "recognised_by": u.recognised_by,
            "negotiated": dict(u.negotiated),
            "causes": [d.cause for d in u.diagnoses]}


def refine(c: ConnectionReport, e: Explanation) -> None:
    """Put the upper protocol's first diagnosis (an error before a warning) in ``e``."""
    e.ulp = upper_protocol_dict(c)
    u = c.ulp
    if u is None:
        return
    # A port alone proves nothing about the bytes: inspect says so, explain stays quiet.
    if u.protocol != "unknown" and not u.recognised_by.startswith("port"):
        e.notes.append(f"upper protocol: {u.name} (by {u.recognised_by})"
                       + "".join(f"; {t}" for t in u.negotiated_text[:2]))
    # Unknown private data is shown as bytes already (pdata, inspect); a known
    # protocol's private data that is not of its format is worth a word.
    if u.protocol != "unknown":
        for side, hexed in u.private_data.items():
            e.notes.append(f"upper protocol: the {side}'s private data is no {u.name} "
                           f"format: {hexed}")
    if not u.diagnoses:
        return
    d = next((x for x in u.diagnoses if x.severity == "error"), u.diagnoses[0])
    if e.cause != "ok":
        e.notes.append(f"iWARP level: {e.cause}: {e.summary}")
    e.cause, e.summary = d.cause, d.summary
    e.evidence = sorted(set(e.evidence) | set(d.evidence))
    e.fix, e.functions = d.fix, CAUSES[d.cause].functions
    if d.severity == "error":
        e.verdict = "failed"
    elif e.verdict == "ok":
        e.verdict = "warning"
    if d.negotiated:
        where = f" (frame {d.negotiated_frame})" if d.negotiated_frame else ""
        e.notes.append(f"negotiated: {d.negotiated}{where}"
                       if where and where not in d.negotiated else
                       f"negotiated: {d.negotiated}")
    if d.event and not e.initiator_event:
        # No rdma_cm is known for the host (judged linux-userspace): say what an rdma_cm
        # host would see, with no status asserted.
        e.notes.append("application: no rdma_cm event is known for this initiator; over "
                       f"rdma_cm it would be {d.event.replace(STATUS, 'S')}, S its stack's "
                       "reject status")
    elif d.event:
        status = f"{e.initiator_status}" + (
            f" ({errno_name(e.initiator_status)})" if e.initiator_status else "")
        e.notes.append(f"application: {d.event.replace(STATUS, status)}")
    if d.assumption:
        e.notes.append(f"assumption (not in the capture): {d.assumption}")
