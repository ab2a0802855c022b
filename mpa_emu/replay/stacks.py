"""Which stack plays, and which stack judges, each side of a replay (``--profile``).

A side is a registered stack (:data:`mpa_emu.stacks.STACKS`) with its parameters, written
as the registry writes it (``siw``, ``siw(peer_to_peer=1)``, ``cxgb4(mpa_rev=1)``), and,
for a stack with a configuration record (:attr:`Stack.config
<mpa_emu.stacks.base.Stack.config>`: irdma's ``CmConfig``), that record. The old profile
names a stack keeps (:attr:`ReplayFacts.aliases <mpa_emu.stacks.base.ReplayFacts.aliases>`)
stay: ``siw`` is the siw stack with its defaults, ``mpa-v1`` a plain RFC 5044 peer
without CRC, siw(mpa_version=1). ``--profile 10.0.0.1=siw,10.0.0.2=cxgb4`` names each
side; the emulated side runs its entry.

:func:`make_core` builds the emulated side's core through the registry: a stack with a
record from it, with the recorded ISNs and a
:class:`~mpa_emu.stacks.contract.api.NodeWatch`; another stack's core from its
parameters, followed through :class:`~mpa_emu.stacks.contract.api.WatchedCore`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, cast, runtime_checkable

from mpa_emu.replay import application
from mpa_emu.replay.application import Plan
from mpa_emu.replay.recording import Flow
from mpa_emu.stacks import DEFAULT_STACK, STACKS, parse_params, stack_label
from mpa_emu.stacks.base import HostConfig
from mpa_emu.stacks.contract.api import CoreApi, NodeWatch, WatchedCore
from mpa_emu.stacks.contract.trace import Trace
from mpa_emu.stacks.labels import split_label
from mpa_emu.wire import erdma_mpa
from mpa_emu.wire.addr import ip_bytes, ip_text
from mpa_emu.wire.flow import FlowKey
from mpa_emu.wire.mpa import MpaFormatError, mpa_kind

ParamValue = int | bool

ALIASES: dict[str, tuple[str, tuple[tuple[str, ParamValue], ...]]] = {
    alias: (name, tuple(params.items()))
    for name, st in STACKS.items() for alias, params in st.replay.aliases.items()}
"""Old profile names -> (stack, non-default parameters), from each stack's
:attr:`ReplayFacts.aliases <mpa_emu.stacks.base.ReplayFacts.aliases>`."""


def default_config(stack: str = DEFAULT_STACK) -> HostConfig | None:
    """The record of ``stack``'s default profile, None for a stack without a record."""
    record = STACKS[stack].config
    return record.profiles[record.default_profile]() if record is not None else None


@dataclass(frozen=True, slots=True)
class StackChoice:
    """One side: a stack, its non-default parameters, its configuration record (None for
    a stack without one), and the old profile name it was asked for by (``alias``)."""

    stack: str = DEFAULT_STACK
    params: tuple[tuple[str, ParamValue], ...] = ()
    config: HostConfig | None = field(default_factory=default_config)
    """The stack's configuration record (:attr:`Stack.config
    <mpa_emu.stacks.base.Stack.config>`), None for a stack without one."""
    alias: str = ""

    @property
    def label(self) -> str:
        """``irdma``, ``siw``, ``siw(mpa_version=1)``: how reports name the stack (a
        record built from another profile: that profile's name)."""
        record = STACKS[self.stack].config
        if record is not None and self.config is not None \
                and self.config.profile != record.default_profile:
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
        if self.config is not None:
            return self.config.mpa_rev
        st = STACKS[self.stack]
        values = parse_params(self.stack, dict(self.params))
        if not st.replay.rev_param:  # a fixed revision: the one its frames carry
            return st.peer_framing(values).rev
        return int(values.get(st.replay.rev_param, 2))

    @property
    def offloaded_state(self) -> str:
        """The stack's state past MPA (:attr:`Lifecycle.connected_state
        <mpa_emu.stacks.base.Lifecycle.connected_state>`)."""
        return STACKS[self.stack].lifecycle.connected_state


DEFAULT = StackChoice()
"""The default stack with its default record."""


def choose(name: str, mpa_rev: int | None = None) -> StackChoice:
    """One side from its name: a registered stack with optional parameters
    (``cxgb4(mpa_rev=1)``) or an old profile name (``siw``, ``mpa-v1``); ``mpa_rev``
    (the ``--mpa-rev`` option) overrides the revision. ValueError with one line for a
    bad name, key or value."""
    text = name.strip()
    alias = ""
    if text in ALIASES:
        alias = text
        stack = ALIASES[text][0]
        pairs: dict[str, object] = dict(ALIASES[text][1])
    else:
        stack, found = split_label(text)
        pairs = dict(found)
    if stack not in STACKS:
        raise ValueError(f"unknown stack or profile {stack!r}; expected a stack "
                         f"({', '.join(sorted(STACKS))}; parameters as in "
                         "siw(peer_to_peer=1)), mpa-v1, ADDRESS=STACK,... or auto")
    st = STACKS[stack]
    record = st.config
    if record is not None:
        # the registry parameters of a stack with a record are fields of that record
        checked = parse_params(stack, pairs)
        defaults = st.defaults()
        kept = tuple(sorted((k, v) for k, v in checked.items() if defaults.get(k) != v))
        overrides: dict[str, int | bool] = {k: int(v) for k, v in kept}
        if mpa_rev is not None:
            overrides["mpa_rev"] = mpa_rev
        config = record.with_params(record.profiles[record.default_profile](), overrides)
        return StackChoice(stack, kept, config, alias)
    if mpa_rev is not None:
        if not st.replay.rev_param:
            raise ValueError(f"{stack} has no MPA revision to set (its frames always "
                             f"carry revision {st.peer_framing(st.defaults()).rev}); "
                             "leave --mpa-rev out")
        pairs[st.replay.rev_param] = mpa_rev
    checked = parse_params(stack, pairs)
    defaults = st.defaults()
    kept = tuple(sorted((k, v) for k, v in checked.items() if defaults.get(k) != v))
    return StackChoice(stack, kept, None, alias)


@dataclass(frozen=True, slots=True)
class ProfileSpec:
    """What ``--profile`` asked for: one stack for the emulated side, ``auto``, or one
    stack per address."""

    default: StackChoice | None = None
    """The emulated side's stack when the address has no entry (None:
    :data:`DEFAULT`)."""
    sides: tuple[tuple[bytes, StackChoice], ...] = ()
    auto: bool = False

    def emulated(self, ip: bytes) -> StackChoice:
        """The stack that plays ``ip``."""
        for addr, choice in self.sides:
            if addr == ip:
                return choice
        return self.default or DEFAULT

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
    """What ``--profile auto`` tries, in registry order: each stack's
    :attr:`ReplayFacts.auto_labels <mpa_emu.stacks.base.ReplayFacts.auto_labels>` (its
    defaults, then its named parameter sets and v1 variants: siw(peer_to_peer=1),
    mpa-v1 = siw(mpa_version=1), cxgb4(peer2peer=0), cxgb4(mpa_rev=1), a v1-only
    responder that aborts a rev 2 request in process_mpa_request). With ``mpa_rev`` a
    stack whose revision is fixed (an empty :attr:`ReplayFacts.rev_param
    <mpa_emu.stacks.base.ReplayFacts.rev_param>`) is not tried."""
    out: list[StackChoice] = []
    seen: set[str] = set()
    for st in STACKS.values():
        if mpa_rev is not None and not st.replay.rev_param:
            continue
        for name in st.replay.auto_labels:
            choice = choose(name, mpa_rev)
            if choice.label not in seen:
                seen.add(choice.label)
                out.append(choice)
    return out


IsnChooser = Callable[[bytes, int, bytes, int], int | None]


def make_core(choice: StackChoice, mac: bytes, *, seed: int, trace: Trace | None,
              isn: IsnChooser, watch: NodeWatch | None) -> tuple[CoreApi, list[str]]:
    """The emulated side's core, and what replay cannot follow of it (notes).

    A stack with a configuration record (irdma) takes the recorded ISNs (its ISN
    chooser) and the watch; another stack's TCP picks its own and replay maps them onto
    the recording by the first SYN (the engine's seq delta). irdma's ``Transmit.conn``
    names the node; siw's and cxgb4's name the socket, so the engine finds their
    connection by the flow's ports (:attr:`ReplayFacts.conn_is_node
    <mpa_emu.stacks.base.ReplayFacts.conn_is_node>`).
    """
    st = STACKS[choice.stack]
    if st.config is not None:
        config = choice.config if choice.config is not None else default_config(st.name)
        return st.config.make_core("replay", mac, config, seed=seed, trace=trace, isn=isn,
                                   watch=watch), []
    core = st.make_core("replay", mac, dict(choice.params), seed=seed, trace=trace)
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
    if STACKS[choice.stack].replay.accept_takes_ird_ord and ird_ord is not None:
        cast(AcceptsIrdOrd, core).accept(conn, private_data=private_data, now_ns=now_ns,
                                         ird=ird_ord[0], ord=ird_ord[1])
    else:
        core.accept(conn, private_data=private_data, now_ns=now_ns)


def reply_terms(payload: bytes) -> tuple[bytes, tuple[int, int] | None]:
    """The private data and (rev 2) IRD/ORD of a recorded MPA reply or reject: what the
    scripted application answers with (empty and None when unreadable)."""
    try:
        answer = erdma_mpa.decode_frame(payload)[0]
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


@runtime_checkable
class RegistersMemory(Protocol):
    """A core whose application registers memory regions (siw_reg_user_mr)."""

    def register_mr(self, stag: int, length: int, *, va: int = 0, remote_write: bool = True,
                    remote_read: bool = True, data: bytes = b"") -> None: ...


@runtime_checkable
class IssuesReads(Protocol):
    """A core whose application posts RDMA Reads (siw_post_send, SIW_OP_READ)."""

    def post_read(self, conn: int, sink_stag: int, sink_to: int, length: int,
                  src_stag: int, src_to: int, *, now_ns: int = 0) -> None: ...


@dataclass(slots=True)
class Prepared:
    """What :func:`post_receives` did: (verb, words) for the application's log and the
    assumptions it rests on (what the recording cannot show)."""

    verbs: list[tuple[str, str]] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)


def post_receives(core: CoreApi, choice: StackChoice, conn: int, flow: Flow | None,
                  now_ns: int, plan_of: Callable[[FlowKey], Plan] | None = None
                  ) -> Prepared:
    """Prepare the recorded application's data phase (:mod:`mpa_emu.replay.application`):
    register the memory the recording shows in use and post the receive buffers it
    implies, one per Send of the peer, sized by the largest Send the recorded host took
    (or reproducing the overflow its Terminate names). When the flow is not known yet
    (streamed) the count and size of :data:`STREAMED_BUFFERS`; with a hole in the
    recorded stream an upper bound (one buffer per 24 bytes of the peer's payload after
    MPA, each that large). irdma's NIC model keeps no receive queue: nothing posted.
    ``plan_of`` gives the flow's plan (:func:`application_plan` when not given).
    Returns the verbs and their words for the report, and the assumptions."""
    done = Prepared()
    if not isinstance(core, PostsReceives):
        return done
    words = done.verbs
    if flow is None:
        count, size = STREAMED_BUFFERS
        buffers = [size] * count
    else:
        plan = plan_of(flow.key) if plan_of is not None else application_plan(flow)
        buffers = plan.buffers
        if plan.complete:
            done.assumptions += plan.buffer_notes
        else:
            peer_bytes = peer_payload([(f.outbound, f.seg.payload) for f in flow.frames])
            count = min(peer_bytes // SMALLEST_FPDU + 1, MAX_BUFFERS)
            buffers = [min(max(peer_bytes, 1), (1 << 31) - 1)] * count
            done.assumptions.append(
                f"the recorded stream has a hole, so the Sends cannot all be read: the "
                f"application posted {count} receive buffer(s) of {buffers[0]} bytes, an "
                "upper bound (one per 24 bytes of the peer's payload after MPA)")
        done.assumptions += plan.assumptions
        if plan.regions and not isinstance(core, RegistersMemory):
            done.assumptions.append(
                f"the {choice.label} model holds no memory regions: the STags the "
                f"recording shows in use ({', '.join(f'{r.stag:#x}' for r in plan.regions)}) "
                "cannot be registered, so a Write or Read Request to them ends in the "
                "model's Terminate, which says nothing of the stack")
        if plan.reads and not isinstance(core, IssuesReads):
            done.assumptions.append(
                f"the {choice.label} model posts no RDMA Read: the recorded host's Read "
                f"Requests (frame(s) {', '.join(str(r.frame) for r in plan.reads)}) are "
                "not issued again, so the peer's Read Responses find none outstanding")
        if isinstance(core, RegistersMemory):
            for region in plan.regions:
                core.register_mr(region.stag, region.length, va=region.va,
                                 remote_write=region.remote_write,
                                 remote_read=region.remote_read, data=region.data)
                words.append(("register_mr", region.words()))
                done.assumptions.append(f"the application registered {region.words()}")
    for size in buffers:
        core.post_recv(conn, size, now_ns=now_ns)
    posted = application.buffer_words(buffers)
    words.append(("post_recv", posted))
    return done


def application_plan(flow: Flow) -> Plan:
    """The recorded application's data phase on ``flow``."""
    return application.plan(flow.frames)


def peer_payload(frames: list[tuple[bool, bytes]]) -> int:
    """Bytes the peer sent after its MPA frames, resends included: ``(outbound, payload)``
    per recorded frame of one flow."""
    return sum(len(payload) for outbound, payload in frames
               if not outbound and payload and mpa_kind(payload) == "data")
