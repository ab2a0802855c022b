"""Why a connection ended as it did: one cause from the catalogue
(:mod:`mpa_emu.judge.catalogue`), the frames that show it, what each application saw
(rdma_cm events, :mod:`mpa_emu.judge.cm_events`), the kernel log line to look for and the
fix, for each connection inspect reports (judged per side by its own stack).
"""

from __future__ import annotations

import errno
from dataclasses import asdict, dataclass, field
from typing import Any

from mpa_emu.judge import cm_events as ev
from mpa_emu.judge.catalogue import CAUSES
from mpa_emu.judge.model import Refusal, errno_name
from mpa_emu.judge.stacks import FACTS, LINUX_USERSPACE, UNKNOWN
from mpa_emu.stacks import STACKS
from mpa_emu.stacks.base import (
    ESTABLISHED_AT_CHOSEN_RTR,
    ESTABLISHED_AT_REPLY,
    ESTABLISHED_AT_RTR,
)
from mpa_emu.views.inspection.messages import answered_text, message_of
from mpa_emu.views.inspection.report import ConnectionReport, Finding, FpduInfo
from mpa_emu.views.upper_protocol import explain as upper_protocol
from mpa_emu.wire.ddp import Opcode
from mpa_emu.wire.terminate_layouts import TerminateRead, read_terminate

OTHER_PROTOCOL_PORTS = {
    4420: "NVMe/TCP (nvme-tcp)",
    5445: "Artemis (tshark 4.0 to 4.4; also the SMB Direct iWARP port)",
}
"""Ports Wireshark hands to another dissector before the iwarp_mpa_tcp heuristic runs
(spec wireshark-mpa section 2: verified on 4420 and 5445 with tshark 4.0)."""

_TERM_CAUSES = {
    (2, 0, 0x02): "crc-mismatch",
    (2, 0, 0x06): "ird-ord",
    (2, 0, 0x07): "rtr-mismatch",
    (2, 0, 0x04): "revision",
    (1, 2, 0x02): "rx-overflow",
    (1, 2, 0x05): "rx-overflow",
    (1, 1, 0x04): "ddp-version",
    (1, 2, 0x06): "ddp-version",
    (0, 2, 0x05): "rdmap-version",
    (0, 2, 0x06): "invalid-opcode",
    (1, 2, 0x03): "msn-error",
    (1, 2, 0x04): "msn-error",
}
"""Terminate (layer, EType, code) -> cause (RFC 5040 section 7.4, RFC 5044 section 8,
RFC 6581 section 9)."""

def _outcome(stack: str, name: str, default: Any) -> Any:
    """The field ``name`` of ``stack``'s :class:`~mpa_emu.stacks.base.Outcomes`;
    ``default`` for a side judged as no registered stack (linux-userspace, unknown)."""
    st = STACKS.get(stack)
    return getattr(st.outcomes, name) if st is not None else default


def _article(stack: str) -> str:
    """``an`` before irdma, ``a`` before siw."""
    return "an" if stack[:1] in "aeiou" else "a"


def _log(stack: str, cause: str) -> str:
    """The kernel log line ``stack`` prints for ``cause`` (:attr:`Texts.logs
    <mpa_emu.stacks.base.Texts.logs>`), or ""."""
    st = STACKS.get(stack)
    return st.texts.logs.get(cause, "") if st is not None else ""


def _parse_fn(stack: str) -> str:
    """The function the stack's debug log names for an MPA frame it cannot read."""
    st = STACKS.get(stack)
    return st.texts.parse_fn if st is not None else ""


@dataclass(slots=True)
class Explanation:
    """One connection explained. ``verdict`` is ``ok``, ``warning`` or ``failed``;
    ``cause`` a catalogue key; ``evidence`` the frame numbers that show it."""

    index: int
    flow: str
    verdict: str
    cause: str
    summary: str
    initiator_event: str
    initiator_status: int
    initiator_events: list[str]
    responder_events: list[str]
    evidence: list[int]
    log: str
    fix: str
    functions: str
    stacks: dict[str, str]
    notes: list[str] = field(default_factory=list)
    story: list[str] = field(default_factory=list)
    private_data: str = ""
    ulp: dict[str, Any] = field(default_factory=dict)
    """The upper protocol, its negotiated values and causes
    (:func:`mpa_emu.views.upper_protocol.explain.upper_protocol_dict`)."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON entry (the contract's keys and more)."""
        return asdict(self)


def _initiator_stack(c: ConnectionReport) -> str:
    return c.stacks[0].stack if c.stacks else UNKNOWN


def _responder_stack(c: ConnectionReport) -> str:
    return c.stacks[1].stack if len(c.stacks) > 1 else UNKNOWN


class _Builder:
    def __init__(self, c: ConnectionReport) -> None:
        self.c = c
        self.ini = _initiator_stack(c)
        self.res = _responder_stack(c)
        self.verdict = "ok"
        self.cause = "ok"
        self.summary = ""
        self.status = 0
        self.event = ev.NONE
        self.ini_events: list[str] = []
        self.res_events: list[str] = []
        self.evidence: list[int] = []
        self.log = ""
        self.notes: list[str] = []
        self.story: list[str] = []
        self.private_data = ""
        self.fix = ""

    def fail(self, cause: str, summary: str, evidence: list[int], *,
             verdict: str = "failed") -> None:
        self.verdict, self.cause, self.summary = verdict, cause, summary
        self.evidence = sorted({e for e in evidence if e})

    def initiator(self, status: int | None, why: str = "") -> None:
        """The initiator's CONNECT_REPLY with ``status`` (None: no upcall)."""
        if status is None:
            self.event, self.status = ev.NONE, 0
            return
        self.status = status
        self.event = ev.connect_reply_event(status)
        self.ini_events.append(self.event)
        if why and self.ini == LINUX_USERSPACE:
            self.story.append(f"initiator: {why} (a userspace library: no rdma_cm upcall)")
        elif why:
            self.story.append(f"initiator: IW_CM_EVENT_CONNECT_REPLY {errno_name(status)} "
                              f"({why}) -> {self.event} (cma_iw_handler)")

    def _userspace(self, functions: str) -> str:
        """A side judged linux-userspace has no rdma_cm and no kernel CM: its events are
        not asserted, a note says what is known instead; the kernel functions named are
        the other side's, or none."""
        sides = [role for role, stack in (("initiator", self.ini), ("responder", self.res))
                 if stack == LINUX_USERSPACE]
        if "initiator" in sides:
            self.event, self.status, self.ini_events = "", 0, []
        if "responder" in sides:
            self.res_events = []
        if sides:
            who, it = (" and ".join(sides), "them") if len(sides) == 2 else (sides[0], "it")
            self.notes.append(f"{who}: judged {LINUX_USERSPACE} (an iWARP library over a "
                              "Linux TCP socket): no rdma_cm and no kernel CM, so no rdma_cm "
                              f"event or kernel function is known for {it}; what the "
                              "application saw is its library's, the capture shows what "
                              "was sent")
        if len(sides) == 2:
            return "none known: both sides are userspace iWARP libraries"
        return functions

    def build(self) -> Explanation:
        c = self.c
        cause = CAUSES[self.cause]
        flow = f"{c.client} -> {c.server}"
        functions = self._userspace(cause.functions)
        return Explanation(
            index=c.index, flow=flow, verdict=self.verdict, cause=self.cause,
            summary=self.summary or cause.title, initiator_event=self.event,
            initiator_status=self.status, initiator_events=self.ini_events,
            responder_events=self.res_events, evidence=self.evidence, log=self.log,
            fix=self.fix or cause.fix, functions=functions,
            stacks={s.side: s.stack for s in c.stacks}, notes=self.notes,
            story=self.story, private_data=self.private_data)


def _rst_after(c: ConnectionReport, frame: int) -> tuple[str, int] | None:
    """The first RST or FIN after ``frame``, as (``client``|``server``, frame), from the
    ending line's events."""
    end = _end_after(c, frame)
    return None if end is None else (end[0], end[1])


def _end_after(c: ConnectionReport, frame: int) -> tuple[str, int, str] | None:
    """The first RST or FIN after ``frame``: (side, frame, ``FIN``|``RST``)."""
    later = [(side, n, kind) for n, side, kind in _endings(c) if n > frame]
    return later[0] if later else None


def _endings(c: ConnectionReport) -> list[tuple[int, str, str]]:
    """(frame, side, FIN|RST) of every FIN and RST."""
    return c.closes


def _elapsed(c: ConnectionReport, a: int | None, b: int | None) -> float | None:
    if a is None or b is None or a not in c.times or b not in c.times:
        return None
    return c.times[b] - c.times[a]


def _pdata(data: bytes) -> str:
    if not data:
        return "(none)"
    text = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in data[:64])
    return f"{data[:64].hex()} \"{text}\"" + ("..." if len(data) > 64 else "")


def explain_connection(c: ConnectionReport) -> Explanation:
    """The explanation of one inspected connection."""
    b = _Builder(c)
    b.story.append(f"stacks: client {b.ini}, server {b.res}")
    req, rep = c.request, c.reply
    hidden = next((f for f in c.findings if f.rule == "cut-capture"
                   and f.text.startswith("MPA ")), None)
    if hidden is not None and (req is None or rep is None):
        _cut_exchange(b, hidden)
    elif req is None:
        _no_request(b)
    elif c.refusals:
        _refused(b, c.refusals[0])
    elif rep is None:
        _no_reply(b)
    elif rep.reject:
        status = ev.status_of(ev.REJECT_STATUS, b.ini, -errno.ECONNREFUSED)
        b.fail("rejected", f"rejected by the responder's application: private data "
               f"{_pdata(rep.private_data)}", [req.frame, rep.frame])
        b.private_data = rep.private_data.hex()
        b.res_events = [ev.CONNECT_REQUEST]
        b.initiator(status, "the reply has R set")
        b.log = _log(b.ini, "rejected")
    else:
        _accepted(b)
    if b.verdict == "ok":
        _after_established(b)
    _cut_note(b)
    _port_note(b)
    b.story.extend(f"frame {f.frame}: {f.severity}: {f.text}" for f in c.findings
                   if f.severity in ("error", "warning"))
    out = b.build()
    upper_protocol.refine(c, out)
    return out


def _no_request(b: _Builder) -> None:
    c = b.c
    if not any(line.startswith("SYN-ACK") for line in c.handshake):
        if any(line.startswith("SYN ") for line in c.handshake):
            refused = any("refused" in line for line in c.handshake)
            ends = _endings(c)
            if refused:
                b.fail("tcp-refused", "the responder's TCP answered the SYN with RST: "
                       "nothing listens there", [c.first_frame] + [n for n, *_ in ends])
                b.initiator(_outcome(b.ini, "syn_refused", None))
            else:
                b.fail("tcp-timeout", "the SYN got no answer", [c.first_frame])
                b.initiator(_outcome(b.ini, "syn_timeout", None))
            note = _outcome(b.ini, "connect_note", "")
            if note:
                b.notes.append(note)
            return
        b.fail("incomplete", "no handshake in the capture", [c.first_frame],
               verdict="warning")
        return
    broken = _broken_frame(c)
    if broken is not None:
        cause, finding = broken
        end = _rst_after(c, finding.frame or c.first_frame)
        b.fail(cause, finding.text, [finding.frame or 0] + ([end[1]] if end else []))
        if finding.text.startswith("MPA reply") or "server's first payload" in finding.text:
            b.res_events = [ev.CONNECT_REQUEST]
            b.initiator(ev.status_of(ev.RESET_STATUS, b.ini, -errno.ECONNRESET),
                        "the initiator cannot read the reply")
        elif end is not None and end[0] == "server":
            b.initiator(ev.status_of(ev.RESET_STATUS, b.ini, -errno.ECONNRESET),
                        "the responder reset the connection")
        b.log = _dyndbg(b.res, _parse_fn(b.res))
        return
    synack = next((line for line in c.handshake if line.startswith("SYN-ACK")), "")
    if ", sent " in synack:
        b.fail("tcp-timeout", f"the initiator never acknowledged the SYN-ACK ({synack})",
               [c.first_frame])
        return
    client_data = any(f.side == "client" for f in c.fpdu_list)
    if any("not an MPA request" in f.text for f in c.findings) or client_data:
        b.cause, b.summary = "not-iwarp", "a TCP connection without MPA"
        return
    end = _rst_after(c, c.first_frame)
    if end is None:
        b.fail("incomplete", "the handshake completed but no MPA request is in the "
               "capture", [c.first_frame], verdict="warning")
        return
    side, frame = end
    waited = _elapsed(c, c.first_frame, frame)
    facts = FACTS.get(b.res)
    waits = STACKS[b.res].texts.request_timer_s if b.res in STACKS else None
    responder_timer = float(waits) if waits is not None else None
    if side == "server" and facts is not None and responder_timer is not None \
            and waited is not None and abs(waited - responder_timer) <= responder_timer * 0.1:
        b.fail("mpa-timeout", f"no MPA request arrived; the responder gave up after "
               f"{waited or 0:.1f} s: {facts.mpa_timer}", [c.first_frame, frame])
        b.fix = facts.mpa_timer_fix
    else:
        b.fail("reset", f"the {side} closed the connection before any MPA request "
               f"(frame {frame})", [c.first_frame, frame])


def _broken_frame(c: ConnectionReport) -> tuple[str, Finding] | None:
    """An MPA request or reply inspect could not read (its finding carries the cause:
    ``split-frame`` or ``wrong-key``)."""
    f = next((f for f in c.findings if f.severity == "error" and f.stack is None
              and f.rule in ("split-frame", "wrong-key")), None)
    return None if f is None or f.rule is None else (f.rule, f)


def _refused(b: _Builder, r: Refusal) -> None:
    c = b.c
    req, rep = c.request, c.reply
    assert req is not None
    evidence = [req.frame] + ([rep.frame] if rep is not None else [])
    end = _rst_after(c, r.frame)
    if end is not None:
        evidence.append(end[1])
    who = "responder" if r.role == "responder" else "initiator"
    b.fail(r.rule, f"the {r.stack} {who} refuses the "
           f"{'request' if r.role == 'responder' else 'reply'}: {r.text} ({r.fn}: "
           f"{r.reply})", evidence)
    b.log = r.log or _log(r.stack, r.rule) or _dyndbg(r.stack, r.fn)
    b.story.append(f"{who} ({r.stack}) refuses in frame {r.frame}: {r.sentence()}")
    if r.role == "initiator":
        b.res_events = _responder_after_accept(b)
        b.initiator(r.status, f"{r.fn}")
        return
    # A responder refusal: its application hears nothing; the initiator sees the reaction.
    later = next((x for x in c.refusals if x.role == "initiator"), None)
    if later is not None:
        # The initiator refuses the answer too (irdma: a rev 2 reject without P2P).
        b.initiator(later.status, f"{later.fn}: {later.text}")
        return
    if rep is not None and rep.reject:
        b.initiator(ev.status_of(ev.REJECT_STATUS, b.ini, -errno.ECONNREFUSED),
                    f"the {r.stack} responder answered with a reject")
        return
    retry = _outcome(b.ini, "rst_retry", "")
    if retry and req.rev == 2 and end is not None and end[0] == "server":
        b.notes.append(f"{_article(b.ini)} {b.ini} initiator answers a RST to its rev 2 "
                       f"request with a retry {retry}: the application sees the retry's "
                       "outcome")
        b.initiator(None)
        return
    b.initiator(ev.status_of(ev.RESET_STATUS, b.ini, -errno.ECONNRESET),
                f"the {r.stack} responder reset the connection")


def _dyndbg(stack: str, fn: str) -> str:
    """How to see ``stack``'s kernel log about ``fn`` (:attr:`Texts.debug_log
    <mpa_emu.stacks.base.Texts.debug_log>`), or "" for a stack the registry lacks."""
    st = STACKS.get(stack)
    return st.texts.debug_log.format(fn=fn) if st is not None else ""


def _no_reply(b: _Builder) -> None:
    c = b.c
    req = c.request
    assert req is not None
    broken = _broken_frame(c)
    if broken is not None:
        cause, finding = broken
        end = _rst_after(c, finding.frame or req.frame)
        b.fail(cause, finding.text, [req.frame, finding.frame or 0]
               + ([end[1]] if end else []))
        b.res_events = [ev.CONNECT_REQUEST]
        b.initiator(ev.status_of(ev.RESET_STATUS, b.ini, -errno.ECONNRESET),
                    "the initiator cannot read the reply")
        b.log = _dyndbg(b.ini, _parse_fn(b.ini))
        return
    end = _rst_after(c, req.frame)
    if end is None:
        b.fail("incomplete", "the MPA request got no reply before the capture ends",
               [req.frame], verdict="warning")
        b.res_events = [ev.CONNECT_REQUEST]
        return
    side, frame = end
    waited = _elapsed(c, req.frame, frame)
    kind = (_end_after(c, req.frame) or ("", 0, ""))[2]
    if side == "client" and not _timer_fits(b.ini, kind, waited):
        b.fail("reset", f"the initiator closed the connection ({kind}, frame {frame}) "
               f"{waited or 0:.1f} s after its request, before any reply: not its stack's "
               "MPA timer, so its application gave up (rdma_disconnect, rdma_destroy_id)",
               [req.frame, frame])
        b.res_events = [ev.CONNECT_REQUEST]
        return
    if side == "client":
        facts = FACTS.get(b.ini)
        timer = facts.mpa_timer if facts is not None else _guess_timer(waited)
        b.fail("mpa-timeout", f"no MPA reply; the initiator gave up after "
               f"{waited or 0:.1f} s: {timer}", [req.frame, frame])
        b.fix = facts.mpa_timer_fix if facts is not None else CAUSES["mpa-timeout"].fix
        b.initiator(ev.status_of(ev.TIMEOUT_STATUS, b.ini, -errno.ETIMEDOUT),
                    "no reply in time")
        b.res_events = [ev.CONNECT_REQUEST]
        return
    retry = _outcome(b.ini, "rst_retry", "")
    if retry and req.rev == 2 and "RST from the server" in c.ended:
        # Outcomes.rst_retry (irdma_handle_rst_pkt: a RST in MPAREQ_SENT makes a rev 2
        # initiator retry once with MPA rev 1 on the same ports); no upcall for this
        # attempt.
        b.fail("revision", "the responder reset the MPA rev 2 request (a responder that "
               f"does not take rev 2?); the {b.ini} initiator retries {retry}: the "
               "application sees the retry's outcome",
               [req.frame, frame], verdict="warning")
        b.initiator(None)
        return
    b.fail("reset", f"the responder closed the connection after the request (frame "
           f"{frame}) without a reply", [req.frame, frame])
    b.initiator(ev.status_of(ev.RESET_STATUS, b.ini, -errno.ECONNRESET),
                "the responder closed the connection")


def _reply_timers() -> dict[str, float]:
    """The initiator's wait for the reply of every stack with an MPA timer
    (:attr:`Texts.reply_timer_s <mpa_emu.stacks.base.Texts.reply_timer_s>`: siw's
    MPAREQ_TIMEOUT, cxgb4's ep_timeout_secs default), in registry order."""
    return {name: float(st.texts.reply_timer_s) for name, st in STACKS.items()
            if st.texts.reply_timer_s is not None}


def _timer_fits(stack: str, kind: str, waited: float | None) -> bool:
    """Whether an initiator's close after ``waited`` seconds is its MPA timer: a stack
    without one (irdma) gives up with a RST at the end of the request's
    retransmissions; another after its timer (10 % slack); an unknown stack when the
    time fits one of theirs."""
    if stack in STACKS and STACKS[stack].texts.reply_timer_s is None:
        return kind == "RST"
    if waited is None:
        return False
    timers = _reply_timers()
    stacks = [stack] if stack in timers else list(timers)
    return any(abs(waited - timers[s]) <= timers[s] * 0.1 for s in stacks)


def _guess_timer(waited: float | None) -> str:
    if waited is None:
        return "timer unknown"
    for stack, near in _reply_timers().items():
        if abs(waited - near) <= near * 0.1:
            return f"as {stack}'s timer: {FACTS[stack].mpa_timer}"
    return "no known stack's timer matches"


def terminate_reading(c: ConnectionReport, info: FpduInfo) -> TerminateRead:
    """A Terminate's control word read as inspect reads it (both layouts, knowing
    whether the peer had sent an FPDU before it: :func:`read_terminate`)."""
    peer_sent = any(i.side != info.side and i.frame < info.frame for i in c.fpdu_list)
    return read_terminate(info.term_body, peer_sent)


def _first_terminate(c: ConnectionReport) -> FpduInfo | None:
    return next((f for f in c.fpdu_list if f.opcode == Opcode.TERMINATE), None)


def _responder_established(b: _Builder) -> bool:
    """Whether the responder's application got ESTABLISHED after accepting, as its
    stack's :attr:`Outcomes.responder_established
    <mpa_emu.stacks.base.Outcomes.responder_established>` says: cxgb4 at once
    (c4iw_accept_cr: established_upcall after the reply); siw at once unless it waits
    for the peer's RTR (siw_accept, wait_for_peer_rts: the reply chose an RTR); irdma
    once the RTR arrived (irdma_accept waits for the RTS AE); another stack as siw
    does."""
    c = b.c
    req, rep = c.request, c.reply
    if req is None or rep is None or rep.reject:
        return False
    first = next((f for f in c.fpdu_list if f.side == "client"), None)
    rtr_arrived = first is not None and first.opcode != Opcode.TERMINATE
    when = _outcome(b.res, "responder_established", ESTABLISHED_AT_CHOSEN_RTR)
    if when == ESTABLISHED_AT_REPLY:
        return True
    if when == ESTABLISHED_AT_RTR:
        return rtr_arrived
    rtr_chosen = bool(rep.has_block and {"write", "read"} & set(rep.rtr_names()))
    return rtr_arrived or not rtr_chosen


def _responder_after_accept(b: _Builder) -> list[str]:
    """The responder's events once it accepted: CONNECT_REQUEST, ESTABLISHED when
    :func:`_responder_established`, DISCONNECTED when the connection then closed."""
    out = [ev.CONNECT_REQUEST]
    if _responder_established(b):
        out.append(ev.ESTABLISHED)
        if b.c.closes:
            out.append(ev.DISCONNECTED)
    return out


def _accepted(b: _Builder) -> None:
    c = b.c
    req, rep = c.request, c.reply
    assert req is not None and rep is not None
    b.res_events = [ev.CONNECT_REQUEST]
    rtr_expected = bool(req.has_block and rep.has_block and rep.p2p and rep.rtr_names())
    first_client = next((f for f in c.fpdu_list if f.side == "client"), None)
    term = _first_terminate(c)
    bad_crc = [f.frame for f in c.fpdu_list if f.crc in ("bad", "zero")]
    if term is not None and term.term_body:
        t = terminate_reading(c, term).reading
        key = (t.layer, t.etype, t.error_code)
        # An MPA CRC error is layer LLP, code 0x02 whatever the EType (irdma sends 3).
        cause = "crc-mismatch" if t.is_crc_error() else _TERM_CAUSES.get(key, "terminate")
        before = [f for f in c.fpdu_list if f.frame < term.frame]
        after_rtr = (term.side == "server" and rtr_expected and first_client is not None
                     and [f.frame for f in before] == [first_client.frame])
        if after_rtr and cause == "terminate":
            cause = "zero-length-rtr-refused"
        quoted = term.term_body[4:]
        answered = next((f for f in c.fpdu_list if f.frame == term.answers), None) \
            if term.answers is not None else None
        reading = term.what.split(": ", 1)[-1]
        if answered is not None:
            # RFC 5040 section 4.8: the quoted DDP header names the segment that caused
            # the Terminate; that segment (and its message's first) is the evidence.
            named = answered_text(c, answered)
            found = message_of(c, answered)
            first = found[0].first_frame if found is not None else answered.frame
            b.fail(cause, f"the {term.side} sent a Terminate ({reading}) answering {named}",
                   [term.frame, answered.frame, first, *bad_crc[:3]])
            b.fix = f"{CAUSES[cause].fix}; the Terminate answers {named}"
        else:
            b.fail(cause, f"the {term.side} sent a Terminate ({reading})",
                   [req.frame, rep.frame, term.frame, *bad_crc[:3]])
        if quoted:
            b.notes.append(f"the Terminate quotes {len(quoted)} bytes of the header it "
                           f"answers: {quoted.hex()}")
        if term.layout_note:
            b.notes.append(f"Terminate layout: {term.layout_note}")
        setup = term.side == "client" and (first_client is term)
        if setup:
            b.initiator(_outcome(b.ini, "setup_terminate", -errno.ECONNRESET),
                        "the initiator terminated during set-up")
        else:
            b.initiator(0, "the reply was accepted")
            b.ini_events.append(ev.DISCONNECTED)
        b.res_events = _responder_after_accept(b)
        return
    if bad_crc and c.crc:
        b.fail("crc-mismatch", f"{len(bad_crc)} FPDU(s) with a wrong CRC (CRC negotiated: "
               "RFC 5044 section 7.1)", [req.frame, rep.frame, *bad_crc[:5]])
    b.initiator(0, "the reply was accepted")
    end = _rst_after(c, rep.frame)
    if rtr_expected and first_client is None:
        b.res_events = _responder_after_accept(b)
        if end is not None:
            b.fail("reset", f"the {end[0]} closed the connection before the RTR (frame "
                   f"{end[1]})", [req.frame, rep.frame, end[1]])
        elif b.verdict == "ok":
            b.fail("incomplete", "the capture ends before the initiator's RTR",
                   [req.frame, rep.frame], verdict="warning")
        return
    if rtr_expected and first_client is not None and end is not None \
            and end[0] == "server" and "RST" in c.ended and \
            not any(f.side == "server" for f in c.fpdu_list) and \
            end[1] > first_client.frame:
        b.fail("zero-length-rtr-refused", f"the responder reset the connection right "
               f"after the initiator's RTR (frame {first_client.frame}: "
               f"{first_client.what})", [req.frame, rep.frame, first_client.frame, end[1]])
        b.ini_events.append(ev.DISCONNECTED)
        return
    b.res_events = _responder_after_accept(b)
    if c.closes:
        b.ini_events.append(ev.DISCONNECTED)
    if b.verdict != "ok":
        return
    after_fin = [f for f in c.findings if f.rule == "data-after-fin"]
    if after_fin:
        b.fail("data-after-fin", after_fin[0].text, [f.frame or 0 for f in after_fin],
               verdict="failed" if any(f.severity == "error" for f in after_fin)
               else "warning")


def _cut_exchange(b: _Builder, hidden: Finding) -> None:
    """An MPA frame the snap length cut before its header: what it said is not in the
    capture, so neither a reset nor an establishment can be told."""
    c = b.c
    b.fail("cut-capture", f"the capture was cut by its snap length at frame "
           f"{hidden.frame}: {hidden.text.split(';')[0]}, so the exchange cannot be judged",
           [hidden.frame or 0], verdict="warning")
    if c.closes:
        b.notes.append("the connection ended with " + ", ".join(
            f"a {kind} from the {side} (frame {n})" for n, side, kind in c.closes[:3])
            + "; why is in the bytes the capture did not keep")


def _cut_note(b: _Builder) -> None:
    """Frames captured short: named as a note, and an "ok" is only a warning, since what
    the capture did not keep is not judged."""
    c = b.c
    if not c.cut_frames or b.cause in ("cut-capture", "not-iwarp"):
        return
    cut = [f.frame for f in c.fpdu_list if f.cut]
    what = (f"{len(cut)} FPDU{'s' * (len(cut) > 1)} read from their headers only "
            f"(frames {cut[0]}-{cut[-1]}), their payload and CRC not judged"
            if cut else "no FPDU was cut, but the payload of those frames is not judged")
    text = (f"{len(c.cut_frames)} frame{'s' * (len(c.cut_frames) > 1)} captured short "
            f"(snap length): {what}")
    if b.verdict == "ok":
        b.fail("cut-capture", f"nothing wrong in what the capture holds, but {text}",
               [], verdict="warning")
    else:
        b.notes.append(f"cut-capture: {text}")


_WARNING_ONLY = {"bad-tcp", "msn-error", "reset-established"}
"""Causes that do not by themselves end the connection: a warning, never "ok"."""


def _after_established(b: _Builder) -> None:
    """What inspect found wrong once the exchange was judged ok: an error finding (a DDP
    or RDMAP version, an opcode, a CRC, a malformed segment: each carries its cause), MSN
    or MO disorder, a reset of the established connection. explain is never "ok" where
    inspect reports an error."""
    c = b.c
    errors = [f for f in c.findings if f.severity == "error"]
    if errors:
        first = errors[0]
        cause = first.rule if first.rule in CAUSES else "bad-tcp"
        same = [f for f in errors if (f.rule if f.rule in CAUSES else "bad-tcp") == cause]
        more = f" (and {len(same) - 1} more like it)" if len(same) > 1 else ""
        b.fail(cause, f"frame {first.frame}: {first.text}{more}",
               [f.frame or 0 for f in same[:5]],
               verdict="warning" if cause in _WARNING_ONLY else "failed")
        b.notes.extend(f"also frame {f.frame}: {f.text}" for f in errors
                       if f not in same[:1] and f.rule != cause)
        return
    disorder = [f for f in c.findings if f.rule == "msn-error"]
    if disorder:
        b.fail("msn-error", f"frame {disorder[0].frame}: {disorder[0].text}",
               [f.frame or 0 for f in disorder[:5]], verdict="warning")
        return
    if c.request is None or c.reply is None or b.cause == "not-iwarp":
        return
    fins = {side for _, side, kind in c.closes if kind == "FIN"}
    reset = next(((n, side) for n, side, kind in c.closes
                  if kind == "RST" and n > c.reply.frame), None)
    if reset is not None and len(fins) < 2:
        frame, side = reset
        b.fail("reset-established", f"the {side} reset the established connection (frame "
               f"{frame}) without a graceful close: each application sees "
               f"{ev.DISCONNECTED}", [c.reply.frame, frame], verdict="warning")


def _port_note(b: _Builder) -> None:
    c = b.c
    port = int(c.server.rsplit(":", 1)[1])
    name = OTHER_PROTOCOL_PORTS.get(port)
    if name is None or c.request is None:
        return
    b.notes.append(f"port-decoded-as-other: Wireshark decodes port {port} as {name} "
                   "before trying MPA, so the MPA frames do not show; fix: "
                   f"{CAUSES['port-decoded-as-other'].fix}")
