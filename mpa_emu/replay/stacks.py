"""Which stack plays, and which stack judges, each side of a replay (``--profile``).

A side is a registered stack (:data:`mpa_emu.stacks.STACKS`) with its parameters, written
as the registry writes it (``siw``, ``siw(peer_to_peer=1)``, ``cxgb4(mpa_rev=1)``), or
irdma with a :class:`~mpa_emu.stacks.irdma.config.CmConfig` (``irdma``). The names of the old
irdma-based profiles stay: ``siw`` is the siw stack with its defaults, ``mpa-v1`` a plain
RFC 5044 peer without CRC, siw(mpa_version=1). ``--profile 10.0.0.1=siw,10.0.0.2=cxgb4``
names each side; the emulated side runs its entry.

:func:`make_core` builds the emulated side's core: irdma's ``CmCore`` with the recorded
ISNs and a :class:`~mpa_emu.stacks.contract.api.NodeWatch`, another stack's core through its
registry
entry, followed through :class:`~mpa_emu.stacks.contract.api.WatchedCore`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, cast, runtime_checkable

from mpa_emu.replay.recording import Flow
from mpa_emu.stacks import STACKS, parse_params, stack_label
from mpa_emu.stacks.contract.api import CoreApi, NodeWatch, WatchedCore
from mpa_emu.stacks.contract.trace import Trace
from mpa_emu.stacks.irdma.config import CmConfig
from mpa_emu.stacks.irdma.core import CmCore
from mpa_emu.stacks.irdma.profiles import profile
from mpa_emu.wire.addr import ip_bytes, ip_text
from mpa_emu.wire.mpa import MpaFormatError, decode_frame, mpa_kind

ParamValue = int | bool

ALIASES: dict[str, tuple[str, tuple[tuple[str, ParamValue], ...]]] = {
    # siw's defaults: the stack itself (siw_cm.c), no longer irdma with switches.
    "siw": ("siw", ()),
    # A plain RFC 5044 peer without CRC: siw_connect sends rev 1 with mpa_version 1 and
    # sets C only with mpa_crc_required (off by default).
    "mpa-v1": ("siw", (("mpa_version", 1),)),
}
"""Old profile names -> (stack, non-default parameters)."""

OFFLOADED_STATE = {"irdma": "OFFLOADED", "siw": "RDMA_MODE", "cxgb4": "FPDU_MODE"}
"""The state in which a stack's connection is past MPA (an accepting reply sent or taken):
irdma's OFFLOADED, siw's RDMA_MODE (siw_accept, siw_proc_mpareply), cxgb4's FPDU_MODE."""

REV_PARAM = {"siw": "mpa_version", "cxgb4": "mpa_rev"}
"""The parameter ``--mpa-rev`` sets on each stack (irdma: ``CmConfig.mpa_rev``)."""


@dataclass(frozen=True, slots=True)
class StackChoice:
    """One side: a stack, its non-default parameters, irdma's configuration, and the old
    profile name it was asked for by (``alias``)."""

    stack: str = "irdma"
    params: tuple[tuple[str, ParamValue], ...] = ()
    config: CmConfig = field(default_factory=CmConfig)
    """irdma's configuration (other stacks: unused)."""
    alias: str = ""

    @property
    def label(self) -> str:
        """``irdma``, ``siw``, ``siw(mpa_version=1)``: how reports name the stack."""
        if self.stack == "irdma" and self.config.profile != "irdma":
            return self.config.profile
        return stack_label(self.stack, dict(self.params))

    @property
    def shown(self) -> str:
        """The label, with the profile name it was asked for when that differs."""
        label = self.label
        return f"{label} [{self.alias}]" if self.alias and self.alias != label else label

    @property
    def profile_name(self) -> str:
        """The name the JSON report's ``profile`` holds: the alias, else the label."""
        return self.alias or self.label

    @property
    def mpa_rev(self) -> int:
        """The MPA revision the side starts at."""
        if self.stack == "irdma":
            return self.config.mpa_rev
        values = parse_params(self.stack, dict(self.params))
        return int(values.get(REV_PARAM.get(self.stack, ""), 2))

    @property
    def offloaded_state(self) -> str:
        """The stack's state past MPA (:data:`OFFLOADED_STATE`)."""
        return OFFLOADED_STATE.get(self.stack, "OFFLOADED")


IRDMA = StackChoice()


def choose(name: str, mpa_rev: int | None = None) -> StackChoice:
    """One side from its name: ``irdma``, an old profile name (``siw``, ``mpa-v1``) or a
    registered stack with optional parameters (``cxgb4(mpa_rev=1)``); ``mpa_rev`` (the
    ``--mpa-rev`` option) overrides the revision. ValueError with one line for a bad
    name, key or value."""
    text = name.strip()
    alias = ""
    if text in ALIASES:
        alias = text
        stack = ALIASES[text][0]
        pairs: dict[str, object] = dict(ALIASES[text][1])
    else:
        stack, pairs = _split(text)
    if stack not in STACKS:
        raise ValueError(f"unknown stack or profile {stack!r}; expected a stack "
                         f"({', '.join(sorted(STACKS))}; parameters as in "
                         "siw(peer_to_peer=1)), mpa-v1, ADDRESS=STACK,... or auto")
    if stack == "irdma":
        # irdma's registry parameters are CmConfig fields (mpa_emu/stacks/irdma.py).
        checked = parse_params("irdma", pairs)
        defaults = STACKS["irdma"].defaults()
        kept = tuple(sorted((k, v) for k, v in checked.items() if defaults.get(k) != v))
        overrides = {k: int(v) for k, v in kept}
        if mpa_rev is not None:
            overrides["mpa_rev"] = mpa_rev
        return StackChoice("irdma", kept, profile("irdma", **overrides), alias)
    if mpa_rev is not None and stack in REV_PARAM:
        pairs[REV_PARAM[stack]] = mpa_rev
    checked = parse_params(stack, pairs)
    defaults = STACKS[stack].defaults()
    kept = tuple(sorted((k, v) for k, v in checked.items() if defaults.get(k) != v))
    return StackChoice(stack, kept, CmConfig(), alias)


def _split(text: str) -> tuple[str, dict[str, object]]:
    """``cxgb4(mpa_rev=1,crc_enabled=0)`` -> ("cxgb4", {...}); values are integers (or
    true/false)."""
    if "(" not in text:
        return text, {}
    if not text.endswith(")"):
        raise ValueError(f"{text!r}: write a stack as NAME or NAME(KEY=VALUE,...)")
    name, _, inner = text[:-1].partition("(")
    pairs: dict[str, object] = {}
    for pair in filter(None, (p.strip() for p in inner.split(","))):
        key, eq, value = pair.partition("=")
        if not eq:
            raise ValueError(f"{text!r}: {pair!r} is not KEY=VALUE")
        pairs[key.strip()] = _number(value.strip(), text)
    return name.strip(), pairs


def _number(value: str, whole: str) -> int | bool:
    lowered = value.lower()
    if lowered in ("true", "yes", "on"):
        return True
    if lowered in ("false", "no", "off"):
        return False
    try:
        return int(value, 0)
    except ValueError:
        raise ValueError(f"{whole!r}: {value!r} is not a number") from None


@dataclass(frozen=True, slots=True)
class ProfileSpec:
    """What ``--profile`` asked for: one stack for the emulated side, ``auto``, or one
    stack per address."""

    default: StackChoice | None = None
    """The emulated side's stack when the address has no entry (None: irdma)."""
    sides: tuple[tuple[bytes, StackChoice], ...] = ()
    auto: bool = False

    def emulated(self, ip: bytes) -> StackChoice:
        """The stack that plays ``ip``."""
        for addr, choice in self.sides:
            if addr == ip:
                return choice
        return self.default or IRDMA

    def peers(self, ip: bytes) -> dict[bytes, StackChoice]:
        """The stacks named for the other addresses."""
        return {addr: choice for addr, choice in self.sides if addr != ip}


def parse_profile(text: str, mpa_rev: int | None = None) -> ProfileSpec:
    """``irdma``, ``siw``, ``mpa-v1``, ``siw(peer_to_peer=1)``, ``auto`` or
    ``10.0.0.1=siw,10.0.0.2=cxgb4`` (commas inside parentheses belong to the
    parameters). ValueError with one line for anything else."""
    text = text.strip()
    if text == "auto":
        return ProfileSpec(auto=True)
    entries = _top_level(text)
    if not any("=" in e.split("(", 1)[0] for e in entries):
        if len(entries) != 1:
            raise ValueError(f"{text!r}: one stack, or ADDRESS=STACK entries "
                             "separated by commas")
        return ProfileSpec(default=choose(entries[0], mpa_rev))
    sides: list[tuple[bytes, StackChoice]] = []
    for entry in entries:
        head, eq, name = entry.partition("=")
        if not eq or "(" in head:
            raise ValueError(f"{text!r}: {entry!r} is not ADDRESS=STACK")
        try:
            ip = ip_bytes(head.strip())
        except ValueError as exc:
            raise ValueError(f"{text!r}: {exc}") from None
        if any(addr == ip for addr, _c in sides):
            raise ValueError(f"{text!r}: {ip_text(ip)} named twice")
        if name.strip() == "auto":
            raise ValueError(f"{text!r}: auto names no side's stack; use "
                             "--profile auto")
        sides.append((ip, choose(name, mpa_rev)))
    return ProfileSpec(sides=tuple(sides))


def _top_level(text: str) -> list[str]:
    """``text`` split at the commas outside parentheses."""
    out: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    out.append(text[start:].strip())
    if any(not e for e in out) or depth:
        raise ValueError(f"{text!r}: empty entry or unbalanced parentheses")
    return out


def auto_candidates(mpa_rev: int | None = None) -> list[StackChoice]:
    """What ``--profile auto`` tries, in order: irdma; each registered stack with its
    defaults, then its named parameter sets (the matrix's siw(peer_to_peer=1) and
    cxgb4(peer2peer=0); the v1 peers mpa-v1 = siw(mpa_version=1) and cxgb4(mpa_rev=1),
    a v1-only responder that aborts a rev 2 request in process_mpa_request)."""
    names = ["irdma", "siw", "siw(peer_to_peer=1)", "mpa-v1", "cxgb4",
             "cxgb4(peer2peer=0)", "cxgb4(mpa_rev=1)"]
    out: list[StackChoice] = []
    seen: set[str] = set()
    for name in names:
        stack = _split(ALIASES[name][0] if name in ALIASES else name)[0]
        if stack not in STACKS:
            continue
        choice = choose(name, mpa_rev)
        if choice.label not in seen:
            seen.add(choice.label)
            out.append(choice)
    return out


IsnChooser = Callable[[bytes, int, bytes, int], int | None]


def make_core(choice: StackChoice, mac: bytes, *, seed: int, trace: Trace | None,
              isn: IsnChooser, watch: NodeWatch | None) -> tuple[CoreApi, list[str]]:
    """The emulated side's core, and what replay cannot follow of it (notes).

    irdma takes the recorded ISNs (its ISN chooser); another stack's TCP picks its own
    and replay maps them onto the recording by the first SYN (the engine's seq delta).
    irdma's ``Transmit.conn`` names the node; siw's and cxgb4's name the socket, so the
    engine finds their connection by the flow's ports.
    """
    if choice.stack == "irdma":
        return CmCore("replay", mac, choice.config, seed=seed, trace=trace, isn=isn,
                      watch=watch), []
    core = STACKS[choice.stack].make_core("replay", mac, dict(choice.params), seed=seed,
                                          trace=trace)
    notes: list[str] = []
    if watch is not None:
        if isinstance(core, WatchedCore):
            core.watch_nodes(watch)
        else:
            notes.append(f"{choice.label}: its core tells no node states; the report "
                         "cannot say when a connection left MPA")
    return core, notes


def side_words(ip: bytes, emulated: StackChoice, peers: Mapping[bytes, StackChoice]
               ) -> str:
    """``stacks: 10.0.0.1 siw (emulated), 10.0.0.2 cxgb4 (recorded peer)``."""
    parts = [f"{ip_text(ip)} {emulated.shown} (emulated)"]
    parts += [f"{ip_text(a)} {c.shown} (recorded peer)" for a, c in sorted(peers.items())]
    return "stacks: " + ", ".join(parts)


class AcceptsIrdOrd(Protocol):
    """A core whose accept takes the application's IRD/ORD (siw_accept,
    c4iw_accept_cr: ``conn_param->ird/ord``)."""

    def accept(self, conn: int, *, private_data: bytes = b"", now_ns: int,
               ird: int | None = None, ord: int | None = None) -> None: ...


def accept(core: CoreApi, choice: StackChoice, conn: int, private_data: bytes,
           ird_ord: tuple[int, int] | None, now_ns: int) -> None:
    """The scripted application accepts ``conn`` with the recorded reply's private data
    and, where the stack's accept takes them (siw_accept, c4iw_accept_cr), its IRD/ORD;
    irdma_accept never reads ``conn_param->ird/ord``."""
    if choice.stack != "irdma" and ird_ord is not None:
        cast(AcceptsIrdOrd, core).accept(conn, private_data=private_data, now_ns=now_ns,
                                         ird=ird_ord[0], ord=ird_ord[1])
    else:
        core.accept(conn, private_data=private_data, now_ns=now_ns)


def reply_terms(payload: bytes) -> tuple[bytes, tuple[int, int] | None]:
    """The private data and (rev 2) IRD/ORD of a recorded MPA reply or reject: what the
    scripted application answers with (empty and None when unreadable)."""
    try:
        answer = decode_frame(payload)
    except MpaFormatError:
        return b"", None
    block = answer.rtr
    return answer.private_data, (block.ird, block.ord) if block is not None else None


SMALLEST_FPDU = 24
"""MPA length (2), the untagged DDP and RDMAP header (18) and the CRC field (4)."""
STREAMED_BUFFERS = (1024, 1 << 20)
"""Receive buffers (count, bytes) where the recording ahead is not known (streamed)."""
MAX_BUFFERS = 1 << 16


@runtime_checkable
class PostsReceives(Protocol):
    """A core whose application posts receive buffers before the peer's Sends arrive
    (siw_post_receive, c4iw_post_receive); without one, a Send ends in a Terminate."""

    def post_recv(self, conn: int, length: int, *, now_ns: int = 0) -> None: ...


def post_receives(core: CoreApi, choice: StackChoice, conn: int, flow: Flow | None,
                  now_ns: int) -> str:
    """Post the receive buffers the recorded application must have posted: the recording
    shows its peer's Sends taken, so one buffer per possible Send (an upper bound from the
    peer's payload after MPA in ``flow``) of that many bytes each; the count and size of
    :data:`STREAMED_BUFFERS` when the flow is not known yet. irdma's NIC model keeps no
    receive queue: nothing posted. Returns the words for the report ("": none posted)."""
    if choice.stack == "irdma" or not isinstance(core, PostsReceives):
        return ""
    peer_bytes = None if flow is None else peer_payload(
        [(f.outbound, f.seg.payload) for f in flow.frames])
    if peer_bytes is None:
        count, size = STREAMED_BUFFERS
    else:
        count = min(peer_bytes // SMALLEST_FPDU + 1, MAX_BUFFERS)
        size = min(max(peer_bytes, 1), (1 << 31) - 1)
    for _ in range(count):
        core.post_recv(conn, size, now_ns=now_ns)
    return f"{count} receive buffer(s) of {size} bytes"


def peer_payload(frames: list[tuple[bool, bytes]]) -> int:
    """Bytes the peer sent after its MPA frames, resends included: ``(outbound, payload)``
    per recorded frame of one flow."""
    return sum(len(payload) for outbound, payload in frames
               if not outbound and payload and mpa_kind(payload) == "data")
