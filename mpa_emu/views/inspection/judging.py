"""Judging each side of a connection by its own stack.

:func:`judge_connection` decides the stack of the client and of the server (a
``--profile`` first, else the fingerprint, :mod:`mpa_emu.judge.fingerprint`), then reads
the request with the responder's rules and the reply with the initiator's
(:mod:`mpa_emu.judge.rules`). A rule of the side's own stack that the frame breaks is an
error naming the stack, the rule and its kernel function. What only another stack would
refuse is a note ("an irdma initiator would refuse it ..."), never an error: that stack
is not in the capture; where the side is judged a kernel stack it is a ``hint``, which
the text report shows only with ``--verbose``.
"""

from __future__ import annotations

from mpa_emu.judge.fingerprint import decide
from mpa_emu.judge.model import Refusal, SideStack
from mpa_emu.judge.profile import Profiles
from mpa_emu.judge.rules import Received, initiator_refusals, responder_refusals
from mpa_emu.judge.stacks import KERNEL_STACKS, UNKNOWN
from mpa_emu.stacks import STACKS
from mpa_emu.views.inspection.report import ConnectionReport, Direction, MpaInfo
from mpa_emu.wire.terminate_layouts import read_terminate

Stream = list[tuple[int, int, bytes]]


def _host(endpoint: str) -> str:
    return endpoint[1:].split("]", 1)[0] if endpoint.startswith("[") \
        else endpoint.rsplit(":", 1)[0]


def _received(m: MpaInfo, request: MpaInfo | None, stream: Stream,
              d: Direction) -> Received:
    first = stream[0][2] if stream else b""
    frame_end = m.frame_len  # erdma's extension counted (MpaInfo.frame_len)
    if stream and stream[0][0] in d.short:
        # Captured short (snap length): the segment carried more than the capture shows,
        # so how the frame was segmented is not known; judge it as whole.
        first = first + b"\0" * d.short[stream[0][0]]
    # Bytes after the frame in the segment that completes it.
    trailing = 0
    for _frame, off, data in stream:
        if off < frame_end <= off + len(data):
            trailing = off + len(data) - frame_end
            break
    return Received(m, request, len(first), trailing)


def side_stacks(rep: ConnectionReport, client: Direction, server: Direction,
                profiles: Profiles | None = None) -> tuple[SideStack, SideStack]:
    """The stack of the client and of the server."""
    out = []
    for side, endpoint, d, mine, theirs in (
            ("client", rep.client, client, rep.request, rep.reply),
            ("server", rep.server, server, rep.reply, rep.request)):
        terms = []
        for f in rep.fpdu_list:
            if f.side == side and f.term_body and len(f.term_body) >= 4:
                peer_sent = any(i.side != side and i.frame < f.frame for i in rep.fpdu_list)
                terms.append(read_terminate(f.term_body, peer_sent))
        guess = decide(side, _host(endpoint), d, mine, theirs, terms,
                       answers=client if side == "server" else None)
        given = profiles.stack_of(endpoint) if profiles else None
        if given is not None:
            guess = SideStack(side, guess.address, given, "profile",
                              [f"--profile {guess.address}={given}",
                               f"the fingerprint said {guess.stack}"])
        out.append(guess)
    return out[0], out[1]


def judge_connection(rep: ConnectionReport, client: Direction, server: Direction,
                     c_stream: Stream, s_stream: Stream,
                     profiles: Profiles | None = None) -> None:
    """Decide each side's stack into ``rep.stacks`` and add the findings of each side's
    rules (and notes for the other stacks') to ``rep``; the refusals of the sides' own
    stacks go to ``rep.refusals``."""
    c_side, s_side = side_stacks(rep, client, server, profiles)
    rep.stacks = [c_side, s_side]
    checks: list[tuple[SideStack, str, Received]] = []
    if rep.request is not None:
        checks.append((s_side, "responder", _received(rep.request, None, c_stream, client)))
    if rep.request is not None and rep.reply is not None:
        checks.append((c_side, "initiator", _received(rep.reply, rep.request, s_stream,
                                                      server)))
    for side, role, received in checks:
        for stack in KERNEL_STACKS:
            found = (responder_refusals(stack, received) if role == "responder"
                     else initiator_refusals(stack, received))
            for refusal in found:
                _report(rep, side, refusal)
    _own_tcp_findings(rep, {"client": c_side, "server": s_side})


def _own_tcp_findings(rep: ConnectionReport, sides: dict[str, SideStack]) -> None:
    """What a stack's own TCP refuses (irdma's: an MSS below 536, a segment outside its
    65535-byte window; :attr:`Outcomes.tcp_findings
    <mpa_emu.stacks.base.Outcomes.tcp_findings>`) matters only when the receiving side
    runs that stack: for another stack the finding becomes a note saying so."""
    for f in rep.findings:
        for name, st in STACKS.items():
            for fn, rule, words in st.outcomes.tcp_findings:
                if fn not in f.text or f.stack is not None:
                    continue
                sender = f.text.split(" ", 1)[0]
                receiver = sides.get("server" if sender == "client" else "client")
                if receiver is None or words not in f.text:
                    continue
                f.stack, f.rule, f.fn = name, rule, fn
                if receiver.stack != name:
                    f.severity = "note"
                    f.text += (f"; only {article(name)} {name} receiver does, the "
                               f"{receiver.side} is {receiver.stack}")


def _report(rep: ConnectionReport, side: SideStack, r: Refusal) -> None:
    if side.stack == r.stack:
        rep.refusals.append(r)
        how = "by --profile" if side.source == "profile" else "by its fingerprint"
        rep.add(r.frame, "error", f"{r.stack} {r.role} ({side.side}, {how}) refuses "
                f"{r.sentence()}", stack=r.stack, rule=r.rule, fn=r.fn)
        return
    who = (f"the {r.role}'s stack is not known" if side.stack == UNKNOWN
           else f"this {r.role} is {side.stack}")
    # What another stack would do matters while the side's own is uncertain; for a side
    # judged a kernel stack it is a hint, shown with --verbose only.
    severity = "hint" if side.stack in KERNEL_STACKS else "note"
    rep.add(r.frame, severity, f"{article(r.stack)} {r.stack} {r.role} would refuse "
            f"{r.sentence()}; {who}", stack=r.stack, rule=r.rule, fn=r.fn)


def article(stack: str) -> str:
    """``an irdma``, ``a siw``, ``a cxgb4``."""
    return "an" if stack[:1] in "aeiou" else "a"

