"""The semantic verdict of a replay: did the emulated node reach the same outcome as the
recorded host, connection by connection, in MPA and kernel terms?

For each flow the recorded host's story is read from its frames and the emulator's from
what it sent, its upcalls and its NIC's asynchronous events. Compared, in capture order:

- the MPA frames each side sent: kind (request, reply, reject), revision, the flags M, C
  and R, the RFC 6581 block (P2P, IRD/ORD, the RTR choice) and the private data;
- whether the connection reached OFFLOADED (an accepting reply) and ESTABLISHED (the
  first FPDU got through: RFC 6581 section 3, ``irdma_accept``/``irdma_cm_event_connected``
  wait for the RTS AE);
- the upcalls that tell the application the outcome (CONNECT_REQUEST, CONNECT_REPLY and
  its status, ESTABLISHED);
- the NIC's events: an MPA CRC error where CRC is in use and an FPDU's CRC is wrong
  (RFC 5044 section 7.1: CRC is used when either side sets C), a Terminate;
- who closed the connection first and how (FIN or RST).

What the recorded host did is read from the frames alone: an accepting reply means
OFFLOADED; a first FPDU from the peer that the recorded responder acknowledged (or a
first FPDU sent by the recorded initiator) means ESTABLISHED.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field, replace

from mpa_emu.replay.engine import RunResult
from mpa_emu.replay.flow_runs import FlowRuns
from mpa_emu.replay.recording import Recording
from mpa_emu.replay.stacks import StackChoice
from mpa_emu.stacks import DEFAULT_STACK, STACKS
from mpa_emu.stacks.base import ESTABLISHED_AT_CHOSEN_RTR, HostConfig
from mpa_emu.stacks.contract.events import IwEvent, Upcall
from mpa_emu.ulp.rdma_cm import RdmaCmEventType, connect_reply_event
from mpa_emu.views.describe import errno_text
from mpa_emu.wire import ddp, erdma_mpa, mpa
from mpa_emu.wire.flow import FlowKey
from mpa_emu.wire.mpa import mpa_kind
from mpa_emu.wire.segment import ACK, FIN, RST, Segment
from mpa_emu.wire.seq import MASK as MASK32
from mpa_emu.wire.seq import at_or_after
from mpa_emu.wire.terminate_layouts import RFC, read_terminate

CRC_ERROR_AE = "IRDMA_AE_LLP_RECEIVED_MPA_CRC_ERROR"
RDMAP_TERMINATE = 0x7
"""RDMAP opcode of a Terminate message (RFC 5040 section 4.3)."""


@dataclass(frozen=True, slots=True)
class MpaSent:
    """An MPA request, reply or reject one side sent."""

    frame: int
    """Capture frame number (for the emulator: the frame processed last before it)."""
    kind: str
    rev: int
    flags: int
    rtr: mpa.RtrBlock | None
    private_data: bytes
    length: int
    """Bytes of the frame in the stream."""


@dataclass(slots=True)
class Story:
    """What happened to one connection, from one side's point of view."""

    role: str
    """"initiator" or "responder"."""
    sent: list[MpaSent] = field(default_factory=list)
    answer: str = ""
    """"accept", "reject" or "" (no answer)."""
    answer_frame: int = 0
    offloaded: int = 0
    """Frame at which the connection reached OFFLOADED, 0 when it never did."""
    established: int = 0
    """Frame at which it reached ESTABLISHED, 0 when it never did."""
    nic: list[tuple[int, str]] = field(default_factory=list)
    """(frame, event) of the NIC's abnormal events: CRC error, Terminate."""
    close: tuple[int, str, str] | None = None
    """(frame, "host" or "peer", "FIN" or "RST") of the first close, or None."""
    upcalls: list[tuple[int, str]] = field(default_factory=list)
    """(frame, upcall) of the outcome's upcalls."""
    terms: dict[int, str] = field(default_factory=dict)
    """Frame -> the Terminate's layer, type and code by name (:func:`terminate_names`)."""
    causes: dict[int, str] = field(default_factory=dict)
    """Frame -> why the emulated stack sent its Terminate there (its kernel rule)."""


@dataclass(frozen=True, slots=True)
class SemanticDivergence:
    """One difference in outcome, with the frame where it shows."""

    frame: int
    flow: FlowKey
    aspect: str
    """"mpa", "offload", "established", "upcall", "nic" or "close"."""
    text: str


@dataclass(slots=True)
class SemanticVerdict:
    """Per connection outcome of both sides and their differences."""

    recorded: dict[FlowKey, Story]
    emulated: dict[FlowKey, Story]
    divergences: list[SemanticDivergence]

    @property
    def first(self) -> SemanticDivergence | None:
        """The first difference in capture order."""
        return self.divergences[0] if self.divergences else None


def _mpa_sent(frame: int, payload: bytes) -> MpaSent | None:
    kind = mpa_kind(payload)
    if kind not in ("request", "reply", "reject"):
        return None
    try:
        f = erdma_mpa.decode_frame(payload)[0]
    except mpa.MpaFormatError:
        return MpaSent(frame, kind, payload[17], payload[16], None, b"", len(payload))
    return MpaSent(frame, kind, f.rev, f.flags, f.rtr, f.private_data, len(payload))


Conversation = list[tuple[int, bool, Segment]]
"""One flow as (capture frame number, sent by the host, segment), in order."""


def _fpdus(conv: Conversation, outbound: bool, after: int, start: int | None
           ) -> list[tuple[int, mpa.Fpdu]]:
    """FPDUs (without markers) one direction sent after frame ``after``, reassembled
    from the stream from sequence number ``start`` on; resends are skipped and a hole in
    the capture ends the list. With ``start`` known, frames numbered ``after`` count too:
    the emulator's frames carry the number of the frame they answer, so the RTR a node
    sends on the reply of frame ``after`` is numbered ``after`` (the bytes before
    ``start`` are skipped as resends)."""
    out: list[tuple[int, mpa.Fpdu]] = []
    nxt = start
    buf = bytearray()
    for number, o, seg in conv:
        early = number < after if start is not None else number <= after
        if o != outbound or early or not seg.payload:
            continue
        seq, payload = seg.seq, seg.payload
        if nxt is not None and seq != nxt:
            if at_or_after(nxt, (seq + len(payload)) & MASK32):
                continue
            if not at_or_after(nxt, seq):
                break
            payload = payload[(nxt - seq) & MASK32:]
        buf += payload
        nxt = (seg.seq + len(seg.payload)) & MASK32
        while len(buf) >= 2:
            (ulen,) = struct.unpack_from("!H", buf)
            total = 2 + ulen + mpa.fpdu_pad_len(ulen) + 4
            if len(buf) < total:
                break
            out.append((number, mpa.unframe_fpdu(bytes(buf[:total]))))
            del buf[:total]
    return out


def _is_terminate(fpdu: mpa.Fpdu) -> bool:
    # RDMAP control byte (after the DDP control byte): version in the top 2 bits, the
    # opcode in the low 4 (RFC 5040 section 4.3).
    return len(fpdu.ulpdu) >= 2 and fpdu.ulpdu[1] & 0x0F == RDMAP_TERMINATE


_TERM_LAYERS = {0: "RDMAP", 1: "DDP", 2: "MPA"}


def terminate_words(ulpdu: bytes, crc: bool = True, peer_sent: bool = True) -> str:
    """``Terminate (layer, etype, code)`` of a Terminate DDP segment, decoded from its
    control word in RFC 5040's layout or siw's, whichever the quoted headers agree with
    (:mod:`mpa_emu.wire.terminate_layouts`); a segment too short to hold one is named so.
    Code 0x02 of the MPA layer is called a CRC error only where ``crc`` was negotiated
    (RFC 5044 section 7.1); ``peer_sent``: an FPDU from the peer came before it
    (:func:`~mpa_emu.wire.terminate_layouts.read_terminate`)."""
    if len(ulpdu) < ddp.UNTAGGED_HEADER_LEN or ulpdu[0] & ddp.DDP_FLAG_TAGGED:
        return "Terminate (unreadable)"
    try:
        read = read_terminate(ulpdu[ddp.UNTAGGED_HEADER_LEN:], peer_sent)
    except ValueError:
        return "Terminate (unreadable)"
    t = read.reading
    layer = _TERM_LAYERS.get(t.layer, f"layer {t.layer}")
    code = f"code 0x{t.error_code:02x}"
    if t.is_crc_error():
        code = "CRC error" if crc else f"{code}, though no CRC was negotiated"
    how = f", {t.layout} layout" if t.layout != RFC else ""
    return f"Terminate ({layer} layer, etype {t.etype}, {code}{how})"


def terminate_names(ulpdu: bytes, peer_sent: bool = True) -> str:
    """What a Terminate DDP segment says, named as ``inspect`` names it: ``layer DDP (1),
    type Untagged Buffer Error (2), code 0x06 Invalid DDP version`` (the same reader,
    :func:`~mpa_emu.wire.terminate_layouts.read_terminate`, with the same ``peer_sent``);
    "" when unreadable."""
    if len(ulpdu) < ddp.UNTAGGED_HEADER_LEN + 4 or ulpdu[0] & ddp.DDP_FLAG_TAGGED:
        return ""
    reading = read_terminate(ulpdu[ddp.UNTAGGED_HEADER_LEN:], peer_sent).reading
    # An MPA CRC error is named by terminate_words already (irdma sends EType 3, which
    # RFC 5044 section 8 does not define).
    return "" if reading.is_crc_error() else reading.text()


def _terminates(conv: Conversation, at: int, crc: bool,
                names: dict[int, str] | None = None) -> list[tuple[int, str]]:
    """(frame, decoded Terminate) of every Terminate the host sent after frame ``at``;
    ``names`` gets each one's layer, type and code by name.

    Whether an FPDU from the peer came before it decides the layout where the quoted
    bytes fit both (:func:`~mpa_emu.wire.terminate_layouts.read_terminate`): a peer FPDU
    numbered like the Terminate counts, since an emulated frame carries the number of
    the frame processed last before it (recorded frame numbers never repeat)."""
    mine = _fpdus(conv, True, at, _mpa_end(conv, True, at))
    theirs = [n for n, _f in _fpdus(conv, False, at, _mpa_end(conv, False, at))]
    out = []
    for n, f in mine:
        if _is_terminate(f):
            peer_sent = any(m <= n for m in theirs)
            out.append((n, terminate_words(f.ulpdu, crc, peer_sent)))
            if names is not None:
                names[n] = terminate_names(f.ulpdu, peer_sent)
    return out


def _mpa_frames(conv: Conversation) -> tuple[list[MpaSent], list[MpaSent]]:
    """The MPA frames the host and the peer sent (resends, same seq, counted once)."""
    host: list[MpaSent] = []
    peer: list[MpaSent] = []
    seen: set[tuple[bool, int]] = set()
    for number, outbound, seg in conv:
        m = _mpa_sent(number, seg.payload)
        if m is None or (outbound, seg.seq) in seen:
            continue
        seen.add((outbound, seg.seq))
        (host if outbound else peer).append(m)
    return host, peer


def _base_story(conv: Conversation, active: bool) -> tuple[Story, MpaSent | None,
                                                            MpaSent | None]:
    story = Story("initiator" if active else "responder")
    host, peer = _mpa_frames(conv)
    story.sent = host
    requests = [m for m in (host if active else peer) if m.kind == "request"]
    answers = [m for m in (peer if active else host) if m.kind != "request"]
    request = requests[-1] if requests else None
    answer = answers[-1] if answers else None
    if answer is not None:
        story.answer = "accept" if answer.kind == "reply" else "reject"
        story.answer_frame = answer.frame
    story.close = _first_close(conv)
    return story, request, answer


def _first_close(conv: Conversation) -> tuple[int, str, str] | None:
    """The first FIN or RST of the conversation and whose it is. Closes that cross count
    as the host's: when the peer's FIN comes first on the wire but the host's own FIN or
    RST after it does not acknowledge it, the host closed before it had the peer's FIN
    (a simultaneous close, RFC 9293 section 3.6), as qed's firmware does on a reject
    that the responder's FIN follows at once."""
    first: tuple[int, str, str] | None = None
    fin_end = 0
    for n, out, seg in conv:
        if not seg.flags & (FIN | RST):
            continue
        close = (n, "host" if out else "peer", "RST" if seg.flags & RST else "FIN")
        if first is None:
            if out or seg.flags & RST:
                return close
            first = close
            fin_end = (seg.seq + len(seg.payload) + 1) & MASK32
            continue
        if out:
            crossed = seg.flags & ACK and seg.ack != fin_end
            return close if crossed else first
    return first


def _mpa_end(conv: Conversation, outbound: bool, upto: int) -> int | None:
    end: int | None = None
    for n, out, seg in conv:
        if n <= upto and out == outbound and seg.payload and mpa_kind(seg.payload) != "data":
            end = (seg.seq + len(seg.payload)) & MASK32
    return end


def recorded_story(conv: Conversation, active: bool, stack: str = DEFAULT_STACK) -> Story:
    """The recorded host's story, read from its frames by the rules of its ``stack``
    (the registry name of the stack that plays it)."""
    story, request, answer = _base_story(conv, active)
    if request is not None and not active:
        story.upcalls.append((request.frame, "CONNECT_REQUEST"))
    if story.answer == "reject" and active:
        # the stack's CONNECT_REPLY status for a reject (ReplyStatuses.reject):
        # siw_proc_mpareply reports -ECONNRESET; irdma and cxgb4 (process_mpa_reply)
        # -ECONNREFUSED.
        refused = STACKS[stack].statuses.reject
        story.upcalls.append((story.answer_frame,
                              f"CONNECT_REPLY {status_words(refused)}"))
    if story.answer != "accept":
        return story
    at = story.answer_frame
    # An initiator that resets before sending anything after the reply refused it
    # (irdma_parse_mpa failing on the reply ends in a RST).
    for _n, out, seg in conv:
        if _n > at and out and (seg.payload or seg.flags & RST):
            if seg.flags & RST and active:
                return story
            break
    story.offloaded = at
    if not STACKS[stack].replay.nic_offload:
        return _software_cm_story(story, conv, active, request, answer, stack)
    crc = bool(((request.flags if request else 0) | (answer.flags if answer else 0))
               & mpa.FLAG_CRC)
    mine = _fpdus(conv, True, at, _mpa_end(conv, True, at))
    theirs = _fpdus(conv, False, at, _mpa_end(conv, False, at))
    story.nic += _terminates(conv, at, crc, story.terms)
    bad = next(((n, f) for n, f in theirs if crc and not f.crc_ok), None)
    if bad is not None:
        story.nic.append((bad[0], CRC_ERROR_AE))
    if active and mine:
        story.established = mine[0][0]
    elif not active and theirs and (bad is None or bad[0] != theirs[0][0]):
        # A well-formed first FPDU raises the RTS AE (irdma_accept waits for it) unless
        # the recorded host answered it with a RST.
        first = theirs[0][0]
        reset = next((bool(seg.flags & RST) for n, out, seg in conv
                      if n > first and out and (seg.flags & (RST | FIN) or seg.payload)),
                     False)
        if not reset:
            story.established = first
    if story.established:
        story.upcalls.append((story.established, f"CONNECT_REPLY {status_words(0)}" if active
                              else "ESTABLISHED"))
    story.nic.sort()
    return story


def _software_cm_story(story: Story, conv: Conversation, active: bool,
                       request: MpaSent | None, answer: MpaSent | None, stack: str
                       ) -> Story:
    """A siw or cxgb4 host past an accepting reply. The initiator's CONNECT_REPLY 0
    comes with the reply (siw_proc_mpareply; cxgb4: process_mpa_reply). The
    responder's ESTABLISHED comes with its reply (c4iw_accept_cr: established_upcall;
    siw_accept), except a siw reply that picked an RTR: then with the peer's first FPDU
    (siw_rtr_data_ready)."""
    at = story.answer_frame
    crc = bool(((request.flags if request else 0) | (answer.flags if answer else 0))
               & mpa.FLAG_CRC)
    story.nic += _terminates(conv, at, crc, story.terms)
    if active:
        story.established = at
    else:
        block = answer.rtr if answer is not None else None
        waits = (STACKS[stack].outcomes.responder_established == ESTABLISHED_AT_CHOSEN_RTR
                 and block is not None
                 and block.peer_to_peer
                 and (block.write0 or block.read0))
        if not waits:
            story.established = at
        else:
            theirs = _fpdus(conv, False, at, _mpa_end(conv, False, at))
            story.established = theirs[0][0] if theirs else 0
    if story.established:
        story.upcalls.append((story.established, "CONNECT_REPLY status 0" if active
                              else "ESTABLISHED"))
    story.nic.sort()
    return story


def emulated_story(conv: Conversation, active: bool, key: FlowKey, run: RunResult,
                   offloaded_state: str = "OFFLOADED") -> Story:
    """The emulated node's story: its frames, upcalls, states and NIC events.
    ``offloaded_state`` is the stack's state past MPA (irdma's OFFLOADED, siw's
    RDMA_MODE, cxgb4's FPDU_MODE)."""
    story, request, answer = _base_story(conv, active)
    crc = bool(((request.flags if request else 0) | (answer.flags if answer else 0))
               & mpa.FLAG_CRC)
    frun = run.flows.get(key)
    offloaded = [e.after_frame for e in run.emitted if e.flow == key
                 and e.state == offloaded_state]
    offloaded += [i.frame.number for i in run.injections if i.frame.flow == key
                  and i.state_after == offloaded_state]
    if frun is not None and offloaded_state != "OFFLOADED":
        # siw and cxgb4 leave MPA in queued work or a timer as well: the frame is the
        # last one injected at or before the change.
        at = next((t for t, s in frun.states if s == offloaded_state), None)
        if at is not None:
            offloaded.append(max((i.frame.number for i in run.injections
                                  if i.frame.flow == key and i.frame.time_ns <= at),
                                 default=1))
    if frun is not None and any(s == offloaded_state for _t, s in frun.states):
        story.offloaded = min(offloaded, default=story.answer_frame or 1)
    for up, number in zip(run.upcalls, run.upcall_frames, strict=True):
        if (up.local_port, up.remote_ip, up.remote_port) != (key[1], key[2], key[3]):
            continue
        name = _upcall_name(up)
        if name:
            story.upcalls.append((number, name))
        if up.status == 0 and up.event in (IwEvent.ESTABLISHED, IwEvent.CONNECT_REPLY) \
                and not story.established:
            story.established = number
    story.nic = sorted((ev.after_frame, ev.ae) for ev in run.nic_events
                       if ev.flow == key and ev.ae == CRC_ERROR_AE)
    if story.offloaded:
        # The NIC's own Terminates (irdma_bld_terminate_hdr after an AE), read from
        # what the node sent, as the recorded host's are.
        story.nic = sorted(story.nic + _terminates(conv, story.answer_frame
                                                   or story.offloaded, crc, story.terms))
        story.causes = {n: terminate_cause(key, n, run) for n in story.terms}
    return story


def terminate_cause(key: FlowKey, frame: int, run: RunResult) -> str:
    """The rule behind the Terminate the emulated stack sent after ``frame``: for siw
    the kernel line written before siw_init_terminate while that frame was taken
    (siw_send_check_ntoh's "receive space short", siw_check_sge's "STag unknown", ...)
    and the function that sent it; otherwise the frame's own comment (cxgb4's
    ``post_terminate ... (after T4_ERR_CRC)``); "" when the trace says nothing."""
    logs: list[str] = []
    initiated = False
    for inj in run.injections:
        if inj.frame.flow != key or inj.frame.number != frame:
            continue
        for rec in inj.records:
            if rec.kind != "kernel_log":
                continue
            if rec.fn == "siw_init_terminate":
                initiated = True
                break
            text = str(rec.fields.get("text", ""))
            logs.append(text if text.startswith(rec.fn) else f"{rec.fn}: {text}")
    comment = next((em.comment for em in run.emitted
                    if em.flow == key and em.after_frame == frame and em.comment
                    and "terminate" in em.comment.lower()), "")
    if not initiated or not logs:
        return comment
    sender = comment.split(":")[0]
    return "; ".join([logs[-1], *([sender] if sender else [])])


def status_words(status: int) -> str:
    """``status 0``, or ``status -104 (-ECONNRESET)`` with the kernel's errno name."""
    return f"status {status} ({errno_text(status)})" if status else "status 0"


def _upcall_name(up: Upcall) -> str:
    if up.event == IwEvent.CONNECT_REQUEST:
        return "CONNECT_REQUEST"
    if up.event == IwEvent.CONNECT_REPLY:
        return f"CONNECT_REPLY {status_words(up.status)}"
    if up.event == IwEvent.ESTABLISHED:
        return "ESTABLISHED" if up.status == 0 else f"ESTABLISHED {status_words(up.status)}"
    return ""


def _with_rdma_cm(name: str) -> str:
    return f"{name} ({rdma_cm_of(name)})"


def rdma_cm_of(name: str) -> str:
    """The rdma_cm event behind a story's upcall name (``cma_iw_handler``,
    ``iw_conn_req_handler``): ``CONNECT_REPLY status -111 (-ECONNREFUSED)`` ->
    ``RDMA_CM_EVENT_REJECTED status -111 (-ECONNREFUSED)``."""
    event, _, status_text = name.partition(" status ")
    status = int(status_text.split()[0]) if status_text else 0
    if event == "CONNECT_REQUEST":
        return RdmaCmEventType.CONNECT_REQUEST.kernel_name
    if event == "CONNECT_REPLY":
        kind = connect_reply_event(status).kernel_name
        return f"{kind} status {status} ({errno_text(status)})" if status else kind
    if event == "ESTABLISHED" and status:
        return f"none (rdma_accept returns {status})"
    return RdmaCmEventType.ESTABLISHED.kernel_name


def emulator_name(config: HostConfig, stack: str = DEFAULT_STACK) -> str:
    """How the report names a node of a stack with a configuration record: the stack
    (irdma), or the profile it plays."""
    record = STACKS[stack].config
    if record is None or config.profile == record.default_profile:
        return stack
    return f"the {config.profile} profile"


def _conversations(rec: Recording, run: RunResult) -> dict[FlowKey, Conversation]:
    """What the emulated node saw and sent, per flow, as a conversation: the injected
    frames the NIC delivered and the emitted frames (seq in the recording's space)."""
    items: dict[FlowKey, list[tuple[int, int, int, bool, Segment]]] = {}
    for inj in run.injections:
        if not inj.skipped:
            items.setdefault(inj.frame.flow, []).append(
                (inj.frame.time_ns, inj.frame.number, 0, False, inj.frame.seg))
    for em in run.emitted:
        seg = em.seg if not em.seq_delta else replace(em.seg, seq=em.mapped_seq)
        items.setdefault(em.flow, []).append((em.time_ns, em.after_frame, 1 + em.index,
                                              True, seg))
    return {k: [(n, o, s) for _t, n, _i, o, s in sorted(v, key=lambda it: it[:3])]
            for k, v in items.items()}


def emulated_name(stack: StackChoice) -> str:
    """How reports name the emulated side: irdma (or "the P profile" for an irdma
    configured as profile P), else the stack's label (``siw``, ``cxgb4(mpa_rev=1)``)."""
    if STACKS[stack.stack].config is not None and stack.config is not None:
        return emulator_name(stack.config, stack.stack)
    return stack.label


def judge(rec: Recording, run: RunResult, config: HostConfig | None,
          stack: StackChoice | None = None, peer: str = "") -> SemanticVerdict:
    """Compare, connection by connection, what the emulated node did with what the
    recorded host did; the differences in capture order. ``stack`` is the emulated
    side's (None: the default stack with ``config``); ``peer`` names the other side's stack in the
    findings ("" : unnamed)."""
    stack = stack or StackChoice(config=config)
    who = emulated_name(stack)
    emulated_convs = _conversations(rec, run)
    recorded: dict[FlowKey, Story] = {}
    emulated: dict[FlowKey, Story] = {}
    out: list[SemanticDivergence] = []
    # Each connection is judged on its own part of the run (linear in the capture).
    by_flow = FlowRuns(run)
    for key, flow in rec.flows.items():
        conv = [(f.number, f.outbound, f.seg) for f in flow.frames]
        mine = by_flow.of(key)
        r = recorded[key] = recorded_story(conv, flow.active, stack.stack)
        e = emulated[key] = emulated_story(emulated_convs.get(key, []), flow.active, key,
                                           mine, stack.offloaded_state)
        out += _differences(key, r, e, who, mine, config, conv, stack, peer)
        out += _not_mpa_differences(key, conv, flow.active, e, who, mine)
    out.sort(key=lambda d: d.frame)
    return SemanticVerdict(recorded, emulated, out)


_ROLE_FLAGS = ((mpa.FLAG_MARKERS, "M"), (mpa.FLAG_CRC, "C"), (mpa.FLAG_REJECT, "R"))


def _mpa_words(m: MpaSent) -> str:
    block = "IRD/ORD block, " if m.rtr is not None else ""
    return f"rev {m.rev} ({block}{m.length} bytes)"


def _rtr_words(b: mpa.RtrBlock) -> str:
    rtr = [n for on, n in ((b.write0, "WRITE0"), (b.read0, "READ0"),
                           (b.zero_len_send, "SEND0")) if on]
    return (f"IRD {b.ird} ORD {b.ord}, P2P {'on' if b.peer_to_peer else 'off'}, "
            f"RTR {'|'.join(rtr) or 'none'}")


def _mpa_difference(a: MpaSent, r: MpaSent, who: str, role: str, crc_error: int,
                    config: HostConfig | None, crc_term: str = "",
                    stack: StackChoice | None = None) -> str:
    """What differs between the emulated node's MPA frame ``a`` and the recorded ``r``,
    each difference with the emulated stack's reason (:attr:`Stack.texts
    <mpa_emu.stacks.base.Stack.texts>`)."""
    choice = stack or StackChoice(config=config)
    texts = STACKS[choice.stack].texts
    verb = {"request": "sends an MPA request", "reply": "accepts",
            "reject": "rejects"}[a.kind]
    parts: list[str] = []
    if a.kind != r.kind:
        rverb = {"request": "sent an MPA request", "reply": "accepted",
                 "reject": "rejected"}[r.kind]
        parts.append(f"{who} {verb}; the recorded {role} {rverb}")
    if a.rev != r.rev:
        parts.append(f"{who} sends MPA {a.kind} {_mpa_words(a)}; the recorded {role} sent "
                     f"{_mpa_words(r)}")
    for bit, name in _ROLE_FLAGS:
        if a.flags & bit == r.flags & bit or (bit == mpa.FLAG_REJECT and a.kind != r.kind):
            continue
        if bit == mpa.FLAG_CRC and a.flags & bit:
            why = texts.crc_on(a.kind, choice.config)
            text = (f"{who} {why}; the recorded {role} "
                    "sent C=0")
            if crc_error:
                text += (f"; frame {crc_error}: the peer sends FPDUs without a valid CRC: "
                         "the NIC raises MPA CRC error here "
                         f"({CRC_ERROR_AE}; RFC 5044 section 7.1: CRC is used when "
                         "either side sets C)")
                if crc_term:
                    text += f" and the NIC sends a {crc_term}"
            parts.append(text)
        else:
            text = (f"{who} sends {name}={int(bool(a.flags & bit))}; the recorded "
                    f"{role} sent {name}={int(bool(r.flags & bit))}")
            text += texts.flag_off(name, a.kind)
            parts.append(text)
    if a.rev == r.rev and a.rtr is not None and r.rtr is not None and a.rtr != r.rtr:
        text = (f"{who} sends {_rtr_words(a.rtr)}; the recorded {role} sent "
                f"{_rtr_words(r.rtr)}")
        text += "".join(f" ({c})" for c in texts.rtr(a.kind, a.rtr, r.rtr, choice.config))
        parts.append(text)
    if a.private_data != r.private_data:
        if len(a.private_data) != len(r.private_data):
            parts.append(f"{who} sends {len(a.private_data)} bytes of private data; the "
                         f"recorded {role} sent {len(r.private_data)}")
        else:
            i = next(i for i, (x, y) in enumerate(zip(a.private_data, r.private_data,
                                                      strict=True)) if x != y)
            parts.append(f"private data differs at byte {i}: {who} 0x{a.private_data[i]:02x}"
                         f", recorded 0x{r.private_data[i]:02x}")
    return "; ".join(parts)


def _stuck(key: FlowKey, run: RunResult) -> str:
    """Where the emulated node stopped and why the peer's frames did not move it."""
    frun = run.flows.get(key)
    state = frun.states[-1][1] if frun is not None and frun.states else "no node"
    drops: dict[str, int] = {}
    for inj in run.injections:
        if inj.frame.flow != key:
            continue
        for rec in inj.records:
            if rec.kind == "segment_dropped":
                why = f"{rec.fn}: {rec.fields.get('reason', 'no reason given')}"
                drops[why] = drops.get(why, 0) + 1
        if inj.skipped:
            drops[inj.skipped] = drops.get(inj.skipped, 0) + 1
    text = f"its node ended in {state}"
    refused = next(((inj.frame.number, str(rec.fields.get("reason", "")))
                    for inj in run.injections if inj.frame.flow == key
                    for rec in inj.records
                    if rec.kind == "segment_dropped" and rec.fn == "irdma_parse_mpa"), None)
    if refused is not None:
        # irdma_handle_rcv_mpa: a frame irdma_parse_mpa fails ends the connection.
        text += f"; irdma_parse_mpa refused frame {refused[0]} ({refused[1]})"
    if drops:
        top = max(drops.items(), key=lambda it: it[1])
        text += f"; {top[1]} of the peer's frames were {_dropped_words(top[0])}"
    return text


def _dropped_words(why: str) -> str:
    return why if why.startswith("dropped") else f"dropped by {why}"


def _differences(key: FlowKey, r: Story, e: Story, who: str, run: RunResult,
                 config: HostConfig | None, conv: Conversation,
                 stack: StackChoice | None = None,
                 peer: str = "") -> list[SemanticDivergence]:
    out: list[SemanticDivergence] = []
    role = r.role
    the_peer = f"the peer ({peer})" if peer else "the peer"

    def add(frame: int, aspect: str, text: str) -> None:
        out.append(SemanticDivergence(frame, key, aspect, f"frame {frame}: {text}"))

    crc_error = next((n for n, ev in e.nic if ev == CRC_ERROR_AE
                      and (n, ev) not in r.nic), 0)
    crc_term = next((ev for n, ev in e.nic if crc_error and n == crc_error
                     and ev.startswith("Terminate")), "")
    for i in range(max(len(r.sent), len(e.sent))):
        rs = r.sent[i] if i < len(r.sent) else None
        es = e.sent[i] if i < len(e.sent) else None
        if rs is not None and es is not None:
            text = _mpa_difference(es, rs, who, role, crc_error, config, crc_term, stack)
            if text:
                add(rs.frame, "mpa", text)
        elif rs is not None:
            add(rs.frame, "mpa", f"the recorded {role} sent an MPA {rs.kind} "
                f"{_mpa_words(rs)}; {who} sent none ({_stuck(key, run)})")
        elif es is not None:
            plain = _not_mpa_payload(conv, r.role == "initiator")
            what = (f"none: its first payload (frame {plain[0]}) is {_payload_words(plain[1])}"
                    if plain is not None else "none")
            add(es.frame, "mpa", f"{who} sends an MPA {es.kind} {_mpa_words(es)}; the "
                f"recorded {role} sent {what}")
    past_mpa = stack.offloaded_state if stack is not None else "OFFLOADED"
    for label, rv, emv, aspect in ((past_mpa, r.offloaded, e.offloaded, "offload"),
                                   ("ESTABLISHED", r.established, e.established,
                                    "established")):
        if bool(rv) == bool(emv):
            continue
        if rv:
            add(rv, aspect, f"the recorded {role} reached {label} here; {who} never did "
                f"({_stuck(key, run)})")
        else:
            add(emv, aspect, f"{who} reached {label} here; the recorded {role} never did")
    r_up = [name for _n, name in r.upcalls]
    e_up = [name for _n, name in e.upcalls if name in r_up or not name.startswith(
        "ESTABLISHED status")]
    if r_up != e_up:
        i = next((i for i, (x, y) in enumerate(zip(r_up, e_up, strict=False)) if x != y),
                 min(len(r_up), len(e_up)))
        rn = r.upcalls[i] if i < len(r.upcalls) else None
        en = next((u for u in e.upcalls if i < len(e_up) and u[1] == e_up[i]), None)
        if en is None:
            # A failure upcall left out of the comparison is still what the application
            # hears next: name it rather than "nothing more".
            seen = [u for u in e.upcalls if u[1] in e_up[:i]]
            en = next((u for u in e.upcalls[len(seen):]), None)
        frame = (rn or en or (0, ""))[0]
        why = f" ({_stuck(key, run)})" if en is None and rn is not None else ""
        told = _told(en, frame, key, run, first=i == 0)
        # "nothing more" only after an upcall both sides gave: with none it is nothing.
        none = "nothing" if i == 0 else "nothing more"
        add(frame, "upcall",
            f"{who} tells the application {told}"
            f"{f' ({rdma_cm_of(en[1])})' if en else ''}{why}; the recorded outcome is "
            f"{_with_rdma_cm(rn[1]) if rn else none}")
    out += [SemanticDivergence(n, key, "nic", f"frame {n}: {text}")
            for n, text in _nic_differences(r, e, who)]
    if r.close is not None and (e.close is None or e.close[1:] != r.close[1:]):
        n, side, how = r.close
        whose = f"the recorded {role}" if side == "host" else the_peer
        now = (f"{the_peer if e.close[1] == 'peer' else who} closes first with a "
               f"{e.close[2]} (frame {e.close[0]})" if e.close else f"{who} never closes")
        if e.close is not None and e.close[1] == "host" and stack is not None \
                and not STACKS[stack.stack].replay.nic_offload:
            now += _closing_function(key, run)
        add(n, "close", f"{whose} closes first with a {how}; {now}")
    elif r.close is None and e.close is not None:
        n, side, how = e.close
        add(n, "close", f"{who if side == 'host' else the_peer} closes with a {how}; "
            "the recording shows no close")
    return out


def _closing_function(key: FlowKey, run: RunResult) -> str:
    """``: kernel_function`` behind the emulated side's first FIN or RST on ``key`` (the
    frame's comment names it), or ""."""
    for em in run.emitted:
        if em.flow == key and em.seg.flags & (FIN | RST) and em.comment:
            return f": {em.comment}"
    return ""


def _told(upcall: tuple[int, str] | None, frame: int, key: FlowKey, run: RunResult, *,
          first: bool = False) -> str:
    """What the application hears next: the upcall with its time when it comes after
    another frame than ``frame``, or "nothing more" ("nothing" when ``first``: it was
    told nothing before either)."""
    if upcall is None:
        return "nothing" if first else "nothing more"
    number, name = upcall
    if number == frame:
        return name
    at = next((up.time_ns for up, n in zip(run.upcalls, run.upcall_frames, strict=True)
               if n == number and _upcall_name(up) == name
               and (up.local_port, up.remote_ip, up.remote_port) == (key[1], key[2], key[3])),
              None)
    when = f"at t={at / 1e9:.3f} s, " if at is not None else ""
    return f"{name} ({when}after frame {number})"


def _nic_differences(r: Story, e: Story, who: str) -> list[tuple[int, str]]:
    """The NIC events (an MPA CRC error, a Terminate sent) one side has and the other has
    not, both ways; a Terminate is compared with its layer, type and code."""
    out: list[tuple[int, str]] = []
    r_terms = [ev for _n, ev in r.nic if ev.startswith("Terminate")]
    e_terms = [ev for _n, ev in e.nic if ev.startswith("Terminate")]
    for n, ev in e.nic:
        if ev.startswith("Terminate"):
            if ev in r_terms:
                continue
            cause = next((f" after {x} (irdma_bld_terminate_hdr)" for m, x in e.nic
                          if m <= n and x == CRC_ERROR_AE), "")
            if not cause and e.causes.get(n):
                cause = f" ({e.causes[n]})"
            names = f": {e.terms[n]}" if e.terms.get(n) else ""
            theirs = (f"the recorded {r.role} sent {r_terms[0]}" if r_terms
                      else f"the recorded {r.role} sent none")
            out.append((n, f"{who}'s NIC sends a {ev}{names}{cause}; {theirs}"))
        elif ev not in (x for _m, x in r.nic):
            out.append((n, f"the NIC raises {ev} ({who}); the recording shows no such "
                        "error"))
    for n, ev in r.nic:
        if ev.startswith("Terminate"):
            if ev not in e_terms and not e_terms:
                names = f": {r.terms[n]}" if r.terms.get(n) else ""
                out.append((n, f"the recorded {r.role} sends a {ev}{names}; {who}'s NIC "
                            "sends none"))
        elif ev not in (x for _m, x in e.nic):
            out.append((n, f"the recorded host's NIC would raise {ev}; {who}'s NIC does "
                        "not"))
    return out


def _not_mpa_payload(conv: Conversation, active: bool) -> tuple[int, bytes] | None:
    """(frame, payload) of the initiator's first payload when it is not an MPA request
    (a connection that never speaks MPA), else None."""
    for n, out, seg in conv:
        if seg.payload and out == active:
            return None if mpa_kind(seg.payload) == "request" else (n, seg.payload)
    return None


def _payload_words(payload: bytes) -> str:
    """``57 bytes, not MPA: "HELLO 31000: this conne..."`` (text shown when printable)."""
    head = payload[:32]
    text = ""
    if all(32 <= b < 127 or b in (9, 10, 13) for b in head):
        shown = head.decode("ascii").replace("\r", "").replace("\n", " ").rstrip()
        text = f': "{shown}{"..." if len(payload) > len(head) else ""}"'
    return f"{len(payload)} bytes, not MPA{text}"


def _host_reaction(conv: Conversation, after: int) -> tuple[int, str, bool]:
    """(frame, words, reset) of what the host did next after frame ``after``: data, a
    RST or a FIN; (0, "sent nothing", False) when it did nothing."""
    for n, out, seg in conv:
        if n <= after or not out:
            continue
        if seg.flags & RST:
            return n, f"reset the connection (frame {n})", True
        if seg.payload:
            return n, f"answered with {_payload_words(seg.payload)} (frame {n})", False
        if seg.flags & FIN:
            return n, f"closed it with a FIN (frame {n})", False
    return 0, "sent nothing", False


def _parse_failure(frame: int, run: RunResult) -> str:
    """The reason irdma_parse_mpa gave for the injected ``frame``, or ""."""
    for inj in run.injections:
        if inj.frame.number == frame:
            for rec in inj.records:
                if rec.kind == "segment_dropped" and rec.fn == "irdma_parse_mpa":
                    return str(rec.fields.get("reason", ""))
    return ""


def _not_mpa_differences(key: FlowKey, conv: Conversation, active: bool, e: Story,
                         who: str, run: RunResult) -> list[SemanticDivergence]:
    """A responder whose peer never spoke MPA: the first payload is not an MPA request.
    irdma_handle_rcv_mpa -> irdma_parse_mpa fails it and irdma_passive_open_err answers
    with a RST and no upcall (the application is never told); a host that answered in
    plain text is a different kind of server."""
    if active:
        return []
    plain = _not_mpa_payload(conv, active)
    if plain is None:
        return []
    frame, payload = plain
    reaction_frame, reaction, reset = _host_reaction(conv, frame)
    if reset:
        return []
    reason = _parse_failure(frame, run)
    if reason and e.close is not None and e.close[1:] == ("host", "RST"):
        ours = (f"irdma_parse_mpa fails it ({reason}) and irdma_passive_open_err resets "
                "the connection (RST, no upcall: the application never hears of it)")
    else:
        ours = f"{who} does not treat it as an MPA request ({_stuck(key, run)})"
    at = reaction_frame or frame
    return [SemanticDivergence(
        at, key, "mpa",
        f"frame {at}: the initiator's first payload (frame {frame}) is "
        f"{_payload_words(payload)}; {ours}; the recorded responder {reaction}")]
