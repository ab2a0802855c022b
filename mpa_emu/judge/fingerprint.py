"""Which stack one side of a connection runs, decided from what it put on the wire.

Evidence, each item a fact of the kernel source:

- the SYN or SYN-ACK: irdma's own TCP sends exactly ``MSS, WS, EOL`` with the window
  field 65535 (``irdma_send_syn``, ``rcv_wnd`` in ``irdma_make_cm_node``) and never SACK
  or timestamps; a Linux socket (siw, a userspace iWARP library) sends SACK permitted and
  timestamps besides MSS and WS (``tcp_syn_options``); Chelsio's offloaded TCP sends
  timestamps and SACK only when the iw_cxgb4 module parameters enable_tcp_timestamps
  and enable_tcp_sack are set (both off by default), window scaling by default;
- the MPA flags: irdma always sets C (``irdma_build_mpa_v1/v2``), cxgb4 sets it by
  default (``crc_enabled``), siw only with ``mpa_crc_required`` (off); siw marks
  ``MPA_RR_FLAG_GSO_EXP`` (0x08 of the flags byte) when built with ``try_gso``;
- the MPA revision: erdma writes 129 (``MPA_REVISION_EXT_1``) with the 8-byte
  ``struct erdma_mpa_ext`` after the header (``erdma_send_mpareqrep``), no other stack;
- the RFC 6581 block: irdma always sets P2P and offers both the Write and the Read RTR,
  and as responder chooses Read; cxgb4 (``peer2peer`` on, ``p2p_type`` Read by default)
  offers only the Read RTR, and as responder prefers Write; siw sends the block without
  P2P by default (``peer_to_peer`` off) and as responder prefers Write;
- qed's offloaded TCP and MPA (qedr): a SYN with timestamps and no SACK
  (``qed_iwarp_tcp_offload``), a request offering the zero-length Send RTR and a reply
  keeping several RTR types (``qed_iwarp_mpa_v2_set_private``, ``qed_iwarp_mpa_received``);
  where the evidence cannot tell two stacks apart the side is ``unknown`` and the
  evidence names both;
- rev 1 with no CRC from a Linux socket: a userspace iWARP library (siw's revision is
  the constant 2 in siw_main.c).
- a Terminate's control word in siw's little-endian bit-field layout (struct
  iwarp_terminate, :mod:`mpa_emu.wire.terminate_layouts`) rather than RFC 5040's.

Each stack's part of this is its own fact in the registry (``STACKS[name].fingerprint``):
the SYN, flag bit or MPA revision that names it alone, and the points every other piece of evidence
is worth to it (:class:`~mpa_emu.stacks.base.Weights`; :data:`USERSPACE` for a library
over sockets). Only the checks, their order and their words stay here, so a new stack is
weighed by its own weights. Each stack gets a score; one that the evidence rules out
(irdma without C, irdma with SACK) is out. The best score wins when it is
ahead of the others; otherwise the side is ``unknown``. The evidence is kept in words
for the report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from mpa_emu.judge.model import SideStack
from mpa_emu.judge.stacks import LINUX_USERSPACE, UNKNOWN
from mpa_emu.stacks import STACKS
from mpa_emu.stacks.base import Weights
from mpa_emu.wire.mpa import FLAG_CRC, FLAG_ENHANCED, FRAME_SIZE, IRD_ORD_MASK
from mpa_emu.wire.terminate_layouts import SIW as SIW_LAYOUT
from mpa_emu.wire.terminate_layouts import TerminateRead

if TYPE_CHECKING:
    from mpa_emu.judge.shapes import MpaFrameLike as MpaInfo
    from mpa_emu.judge.shapes import SideLike as Direction

USERSPACE = Weights(
    syn_linux_options=1, syn_mss_ws_only=0, no_crc=1, own_crc=0, socket_request_crc=1,
    mpa_rev1=1, no_p2p=0, socket_request_p2p=1, request_write_and_read=0,
    request_read_only=0, reply_read_over_both=0, reply_write_over_both=0,
    bitfield_terminate=0, rfc_terminate=0, syn_ts_no_sack=-2, request_send_rtr=0,
    reply_several_rtrs=0, reply_unoffered_rtr=0, synack_unasked_mss_ws=0)
"""What the evidence weighs for an iWARP library over ordinary sockets (SoftUiWarp and
the like): a Linux socket's SYN, its own choice of C and P2P, MPA revision 1."""

_WEIGHTS: tuple[tuple[str, Weights], ...] = (
    *((name, stack.fingerprint.weights) for name, stack in STACKS.items()),
    (LINUX_USERSPACE, USERSPACE))
_CANDIDATES = tuple(name for name, _ in _WEIGHTS)


class _Score:
    def __init__(self) -> None:
        self.points = dict.fromkeys(_CANDIDATES, 0)
        self.out: set[str] = set()
        self.evidence: list[str] = []
        self.linux_socket = False

    def add(self, text: str, **points: int) -> None:
        """``text`` is evidence, worth ``points`` to the candidates named."""
        self.evidence.append(text)
        for name, value in points.items():
            self.points[name] += value

    def weigh(self, text: str, weight: Callable[[Weights], int | None]) -> None:
        """``text`` is evidence; each candidate gets what ``weight`` reads from its
        weights, or is out when that says RULED_OUT."""
        self.evidence.append(text)
        for name, weights in _WEIGHTS:
            value = weight(weights)
            if value is None:
                self.out.add(name)
            else:
                self.points[name] += value

    def best(self) -> str:
        live = {k: v for k, v in self.points.items() if k not in self.out and v > 0}
        if not live:
            return UNKNOWN
        ranked = sorted(live.items(), key=lambda kv: -kv[1])
        if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
            # Say which stacks the evidence cannot tell apart rather than guess one.
            tied = [name for name, points in ranked if points == ranked[0][1]]
            self.evidence.append(f"{' or '.join(tied)}: the evidence does not tell them "
                                 "apart")
            return UNKNOWN
        return ranked[0][0]


def _tcp(score: _Score, d: Direction, answers: Direction | None) -> None:
    """The side's SYN (``answers`` None) or SYN-ACK (``answers``: the SYN it answered)."""
    if d.syn_frame is None:
        return
    kinds = d.option_kinds
    for stack in STACKS.values():
        # a stack with its own TCP sends one exact SYN (its Fingerprint.syn)
        sig = stack.fingerprint.syn
        if sig is not None and kinds == sig.option_kinds and d.syn_window == sig.window:
            score.add(sig.evidence, **{stack.name: sig.points})
            return
    # A SYN-ACK carries SACK permitted only when the SYN did (tcp_synack_options): its
    # missing SACK says something only then.
    sack_asked = answers is None or (answers.syn_frame is not None
                                     and 4 in answers.option_kinds)
    if 8 in kinds and 4 not in kinds and sack_asked:
        score.weigh("SYN with timestamps and no SACK (qed's offloaded TCP: TS_EN and no "
                    "SACK in the offload parameters, qed_iwarp_tcp_offload; a Linux socket "
                    "sends SACK permitted unless tcp_sack is off)", lambda w: w.syn_ts_no_sack)
    if 4 in kinds or 8 in kinds:
        what = "SACK and timestamps" if 4 in kinds and 8 in kinds else \
            "SACK" if 4 in kinds else "timestamps"
        score.weigh(f"SYN with {what}: a Linux socket (tcp_syn_options; irdma's TCP "
                    "never sends them, cxgb4's only with enable_tcp_timestamps and "
                    "enable_tcp_sack set)", lambda w: w.syn_linux_options)
        score.linux_socket = True
        return
    unasked = answers is not None and answers.syn_frame is not None \
        and 4 not in answers.option_kinds and 8 not in answers.option_kinds
    if 2 in kinds and 3 in kinds and unasked:
        score.weigh("SYN-ACK with MSS and WS, answering a SYN without SACK or timestamps "
                    "(cxgb4's offloaded TCP defaults; qed's answers so too, "
                    "qed_iwarp_tcp_offload)", lambda w: w.synack_unasked_mss_ws)
    elif 2 in kinds and 3 in kinds:
        score.weigh("SYN with MSS and WS, no SACK or timestamps (cxgb4's offloaded TCP "
                    "defaults)", lambda w: w.syn_mss_ws_only)


def _mpa(score: _Score, mine: MpaInfo | None, theirs: MpaInfo | None) -> None:
    if mine is None:
        return
    what = "request" if mine.request else "reply"
    for stack in STACKS.values():
        # a flag bit only one stack sets (its Fingerprint.flag)
        mark = stack.fingerprint.flag
        if mark is not None and mine.flags & mark.bit:
            score.add(f"{what} {mark.evidence}", **{stack.name: mark.points})
        # a revision, with the bytes after the header, only one stack writes
        # (its Fingerprint.revision: erdma's 129 and struct erdma_mpa_ext)
        rev = stack.fingerprint.revision
        if rev is not None and mine.rev == rev.rev \
                and mine.frame_len - FRAME_SIZE - mine.pd_length == rev.ext_size:
            score.add(f"{what} {rev.evidence}", **{stack.name: rev.points})
    crc = bool(mine.flags & FLAG_CRC)
    # A siw responder echoes the request's flags (siw_proc_mpareq keeps its bits), so a
    # reply's C says something only when the request did not set C.
    own_crc = mine.request or (theirs is not None and not theirs.flags & FLAG_CRC)
    if not crc:
        score.weigh(f"{what} without C (irdma always sets C, siw's mpa_crc_required is "
                    "off)", lambda w: w.no_crc)
    elif own_crc:
        score.weigh(f"{what} sets C (irdma always, cxgb4 crc_enabled)", lambda w: w.own_crc)
        if mine.request and score.linux_socket:
            score.weigh("a Linux socket's request with C: not siw's default "
                        "(mpa_crc_required is a constant, off), a userspace library",
                        lambda w: w.socket_request_crc)
    if mine.rev == 1:
        score.weigh(f"{what} rev 1 (a userspace iWARP library; siw and cxgb4 send rev 2)",
                    lambda w: w.mpa_rev1)
    if not mine.has_block:
        if mine.rev == 2 and not mine.flags & FLAG_ENHANCED:
            score.add(f"{what} rev 2 without the enhanced flag")
        return
    offered = mine.rtr_names()
    values = f"{what} IRD {mine.ird} ORD {mine.ord}"
    if IRD_ORD_MASK in (mine.ird, mine.ord):
        score.add(f"{values}: 0x3FFF is irdma's \"no IRD/ORD value\" (IETF_NO_IRD_ORD)")
    elif 0 in (mine.ird, mine.ord):
        score.add(f"{values}: a 0 is an application's own value (siw passes it on; "
                  "irdma_negotiate_mpa_v2_ird_ord refuses an IRD of 0 with the Read RTR)")
    if mine.legacy is not None:
        score.add(f"{what} private data is the [MS-SMBD] IRD/ORD header: SMB Direct"
                  + (" from an old cifs.ko/ksmbd (little-endian)" if mine.legacy.broken
                     else ""))
    if not mine.p2p:
        score.weigh(f"{what} block without P2P (siw's peer_to_peer is off; irdma always "
                    "sets it)", lambda w: w.no_p2p)
        return
    if mine.request and score.linux_socket:
        score.weigh("a Linux socket's request with P2P: not siw's default (peer_to_peer is "
                    "a constant, off), a userspace library", lambda w: w.socket_request_p2p)
    if mine.request and "send" in offered:
        score.weigh("request P2P offering the zero-length Send RTR (qedr: qed_iwarp_setup's "
                    "rtr_type, qed_iwarp_mpa_v2_set_private; no other stack offers it)",
                    lambda w: w.request_send_rtr)
    elif not mine.request and len(offered) > 1:
        score.weigh(f"reply chose {len(offered)} RTR types (qedr: qed_iwarp_mpa_received "
                    "keeps every type both sides share; the others choose one)",
                    lambda w: w.reply_several_rtrs)
        return
    elif not mine.request and theirs is not None and theirs.p2p \
            and len(offered) == 1 and offered[0] not in theirs.rtr_names():
        score.weigh(f"reply chose the {offered[0]} RTR, which the request did not offer "
                    "(qedr would answer with all its types, qed_iwarp_mpa_received)",
                    lambda w: w.reply_unoffered_rtr)
    if mine.request:
        if offered == ["write", "read"]:
            score.weigh("request P2P offering the Write and Read RTR (irdma's defaults)",
                        lambda w: w.request_write_and_read)
        elif offered == ["read"]:
            score.weigh("request P2P offering only the Read RTR (cxgb4's p2p_type)",
                        lambda w: w.request_read_only)
        return
    both = theirs is not None and {"write", "read"} <= set(theirs.rtr_names())
    if both and offered == ["read"]:
        score.weigh("reply chose Read where Write was offered too (irdma prefers Read)",
                    lambda w: w.reply_read_over_both)
    elif both and offered == ["write"]:
        score.weigh("reply chose Write where Read was offered too (siw and cxgb4 prefer "
                    "Write)", lambda w: w.reply_write_over_both)


def _terminates(score: _Score, terminates: Sequence[TerminateRead]) -> None:
    # siw declares the control word with C bit-fields (struct iwarp_terminate, iwarp.h):
    # on a little-endian host Layer lands in the low nibble of the first byte. Only a
    # Terminate whose two readings differ tells the layouts apart.
    for t in terminates:
        kept, other = t.reading, t.other
        if other is None:
            continue
        # The layout kept is evidence only when the bytes decided it: the quoted headers
        # fit one layout's header-control bits alone, or only one reading is defined
        # (read_terminate falls back to RFC 5040's otherwise).
        decided = kept.fits != other.fits or kept.known != other.known
        if kept.layout == SIW_LAYOUT and decided:
            score.weigh("Terminate in siw's little-endian bit-field layout (struct "
                        "iwarp_terminate)", lambda w: w.bitfield_terminate)
            return
        if decided:
            score.weigh("Terminate in RFC 5040 section 4.8's layout (not siw's bit-fields)",
                        lambda w: w.rfc_terminate)
            return


def decide(side: str, address: str, d: Direction, mine: MpaInfo | None,
           theirs: MpaInfo | None, terminates: Sequence[TerminateRead] = (),
           answers: Direction | None = None) -> SideStack:
    """The stack of one side from its SYN, its MPA frame (``mine``, read beside the other
    side's frame ``theirs``) and the Terminates it sent; ``answers`` is the other side's
    SYN when this side's is the SYN-ACK answering it."""
    score = _Score()
    _tcp(score, d, answers)
    _mpa(score, mine, theirs)
    _terminates(score, terminates)
    return SideStack(side, address, score.best(), "fingerprint", score.evidence)
