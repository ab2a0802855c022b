"""The shape of a registered stack: :class:`Stack` and the typed facts it owes.

Kept apart from the registry (:mod:`mpa_emu.stacks`) so that a stack's own package can
describe its parameters, facts and kernel map without importing the registry that
imports it. Every field of :class:`Stack` is required: a stack that leaves a fact out is
a type error (and a ``TypeError`` at import), never another stack's answer.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from mpa_emu.stacks.contract.api import CoreApi


@dataclass(frozen=True, slots=True)
class StackParam:
    """One setting of a stack, as the kernel names it.

    ``kind`` is ``int`` or ``bool``; ``where`` says where the kernel keeps it (a module
    parameter, or a constant whose non-default value means a rebuilt or patched driver).
    """

    name: str
    kind: type
    default: int | bool
    minimum: int
    maximum: int
    where: str
    doc: str


@dataclass(frozen=True, slots=True)
class StackFacts:
    """What a stack does with the MPA frames it receives, as its source states them:
    the limits and timers the judge (:mod:`mpa_emu.judge`) and the explanations read."""

    name: str
    title: str
    """How a capture's side running this stack is called in a report."""
    max_pd_length: int
    """Largest PD_Length it takes in a request or reply (RFC 6581 block included)."""
    pd_limit_fn: str
    reassembles: bool
    """Reads an MPA request/reply that TCP delivered over several segments."""
    reassembly_fn: str
    mpa_timer: str
    """Who times the MPA exchange, and how long."""
    mpa_timer_fix: str
    log_prefix: str
    """How its kernel log lines start (what to grep for)."""


@dataclass(frozen=True, slots=True)
class ReplyStatuses:
    """The CONNECT_REPLY status (iw_cm event status) an initiator of this stack gets for
    the outcomes an explanation tells apart, each with the function that sets it."""

    reject: int
    """The responder sent an MPA reject (R)."""
    reject_fn: str
    reset: int
    """The peer reset or closed the connection while the reply was awaited."""
    reset_fn: str
    timeout: int
    """The reply never came."""
    timeout_fn: str


@dataclass(frozen=True, slots=True)
class PeerFraming:
    """The MPA settings a stack's requests and replies carry (what a kernel-socket peer
    copies to frame MPA as that stack does)."""

    rev: int
    p2p: bool
    crc: bool
    rtr: str
    """Initiator: RTR types offered; responder: the one preferred (PeerOptions.rtr)."""
    max_private_data: int
    """The most private data the stack sends in one frame (the RFC 6581 block aside)."""
    v1_rtr: str
    """The RTR ("read", "write" or "none") the stack's initiator sends after an MPA v1
    reply: RFC 5044 has no RTR, but irdma and cxgb4 send one at every revision."""
    v1_wait_rtr: bool
    """Whether the stack's responder waits for an RTR after accepting a v1 request."""


@dataclass(frozen=True, slots=True)
class SynSignature:
    """The exact SYN a stack's own TCP sends, when it has its own TCP (not a Linux
    socket): the option kinds in order and the window field."""

    option_kinds: tuple[int, ...]
    window: int
    evidence: str
    """The fingerprint's words for a SYN that matches (with the function that sends it)."""
    points: int


@dataclass(frozen=True, slots=True)
class FlagMark:
    """A bit of the MPA flags byte only this stack sets."""

    bit: int
    evidence: str
    """The fingerprint's words after "request"/"reply" for a frame with the bit set."""
    points: int


RULED_OUT = None
"""A weight saying the evidence cannot come from this stack: it is out of the running."""


@dataclass(frozen=True, slots=True)
class Weights:
    """What each piece of evidence the fingerprint weighs (:mod:`mpa_emu.judge.
    fingerprint`) says for one stack: points for it (positive) or against it (negative),
    0 for nothing, :data:`RULED_OUT` when its kernel never sends that."""

    syn_linux_options: int | None
    """A SYN with SACK permitted or timestamps (a Linux socket's tcp_syn_options)."""
    syn_mss_ws_only: int
    """A SYN with MSS and WS and neither SACK nor timestamps."""
    no_crc: int | None
    """A request or reply without C."""
    own_crc: int
    """A request, or a reply to a request without C, that sets C."""
    socket_request_crc: int
    """A Linux socket's request that sets C."""
    mpa_rev1: int
    """A request or reply of MPA revision 1."""
    no_p2p: int | None
    """An RFC 6581 block without P2P."""
    socket_request_p2p: int
    """A Linux socket's request with P2P."""
    request_write_and_read: int
    """A P2P request offering both the Write and the Read RTR."""
    request_read_only: int
    """A P2P request offering only the Read RTR."""
    reply_read_over_both: int
    """A reply choosing Read where both RTRs were offered."""
    reply_write_over_both: int
    """A reply choosing Write where both RTRs were offered."""
    bitfield_terminate: int
    """A Terminate in siw's little-endian bit-field layout (struct iwarp_terminate)."""
    rfc_terminate: int
    """A Terminate in RFC 5040 section 4.8's layout, where the bytes tell the two apart."""


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """The evidence in a capture that names this stack (:mod:`mpa_emu.judge.
    fingerprint`): its own SYN, its own MPA flag bit, and what every other piece of
    evidence weighs for it."""

    syn: SynSignature | None
    flag: FlagMark | None
    weights: Weights


@dataclass(frozen=True, slots=True)
class Lifecycle:
    """Where a stack's connection life legitimately differs from another's, each as its
    kernel source decides it (the contract test, tests/stacks/test_contract.py, reads
    these instead of comparing stack names)."""

    connected_state: str
    """The node state past MPA on both sides (an accepting reply sent or taken)."""
    reply_timeout_s: int
    """Seconds after its MPA request an initiator whose peer never replies gives up
    (CONNECT_REPLY with :attr:`ReplyStatuses.timeout`)."""
    rst_retries_v1: bool
    """A RST while an MPA v2 request awaits its reply makes a new connection with MPA
    v1, without an upcall; the second RST is the CONNECT_REPLY."""
    abort_sends_rst: bool
    """An abortive disconnect of a connected QP puts a RST on the wire (else a FIN)."""
    upcall_pdata_extra: int
    """Bytes past the application's private data in a v2 CONNECT_REQUEST/CONNECT_REPLY
    upcall (the private data length includes them)."""


@dataclass(frozen=True, slots=True)
class Stack:
    """A registered stack: its name, title, parameters, core factory, documentation,
    states, kernel map and facts (every one required).

    ``make_core(host_name, mac, params, *, seed, trace, mtu)`` returns a
    :class:`~mpa_emu.stacks.contract.api.CoreApi`; ``params`` is what :func:`parse_params` returned.
    ``peer_framing(params)`` gives the MPA framing of a stack with ``params`` (checked).
    """

    name: str
    title: str
    params: tuple[StackParam, ...]
    make_core: Callable[..., CoreApi]
    doc: str
    states: tuple[str, ...]
    """The kernel's names of the connection states (what ``[[expect.state]]`` takes)."""
    kernel_map: KernelMap
    facts: StackFacts
    statuses: ReplyStatuses
    peer_framing: Callable[[Mapping[str, int | bool]], PeerFraming]
    fingerprint: Fingerprint
    lifecycle: Lifecycle
    listener_facts: frozenset[str]
    """Fields its listener view has beyond the common ones (irdma's
    ``syn_qhash_installed``, the TCP_SYN qhash entry of irdma_manage_qhash): a scenario
    expectation on a field a stack lacks is refused when the scenario is loaded."""

    def param(self, name: str) -> StackParam:
        """The parameter ``name``; KeyError when the stack has none by that name."""
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def defaults(self) -> dict[str, int | bool]:
        """Every parameter at its default."""
        return {p.name: p.default for p in self.params}


MODELLED = "modelled"
"""Status of a kernel function that something in mpa_emu models."""
PLUMBING = "plumbing"
"""Status of hardware or OS work with no packet-level behaviour (the note says why)."""
NOT_YET = "not modelled yet"
"""Status of a function the model leaves out for now (the note starts with it)."""


@dataclass(frozen=True, slots=True)
class MapEntry:
    """One function of a stack's kernel source: its number (position in the file, or in
    a reference's table), kind (E emulated, P plumbing, H hybrid), the mpa_emu objects
    modelling it (dotted paths), a note, and its status (:data:`MODELLED`,
    :data:`PLUMBING` or :data:`NOT_YET`)."""

    number: int
    function: str
    kind: str
    models: tuple[str, ...]
    note: str
    status: str


@dataclass(frozen=True, slots=True)
class KernelMap:
    """The map from every function of one kernel source file to what models it.

    ``functions`` is the file's function list, in file order, read from the source at
    ``kernel_version``: data of its own, so a test can check the entries cover it.
    ``prefix`` may be left off a function's name when asking for one (``irdma_``).
    """

    source: str
    """The file in the kernel tree (``drivers/infiniband/sw/siw/siw_cm.c``)."""
    kernel_version: str
    """The mainline Linux release the map (and the model) follows."""
    functions: tuple[str, ...]
    entries: tuple[MapEntry, ...]
    prefix: str
    legend: str
    """The last line of the text table: what the letters of the kind column mean."""

    @property
    def file_name(self) -> str:
        """The source's file name (``cm.c``, ``siw_cm.c``)."""
        return self.source.rsplit("/", 1)[-1]

    def entry(self, function: str) -> MapEntry:
        """The entry of one function, with or without :attr:`prefix`; KeyError with a
        one-line message when the file has no such function."""
        for name in (function, self.prefix + function):
            for e in self.entries:
                if e.function == name:
                    return e
        raise KeyError(f"{function} is not a {self.file_name} function")

    def select(self, status: str | None) -> tuple[MapEntry, ...]:
        """The entries with ``status`` (all when None)."""
        return tuple(e for e in self.entries if status is None or e.status == status)

    def format_table(self, entries: tuple[MapEntry, ...]) -> str:
        """``entries`` as an aligned text table, followed by counts per status and the
        legend of the kind column."""
        width = max((len(e.function) for e in entries), default=len("function"))
        lines = [f"{'#':>3} {'function':<{width}} {'kind':<4} modelled by  (note)"]
        for e in entries:
            target = ", ".join(e.models) if e.models else "-"
            note = f"  ({e.note})" if e.note else ""
            lines.append(f"{e.number:>3} {e.function:<{width}} {e.kind:<4} {target}{note}")
        counts = {s: sum(1 for e in entries if e.status == s)
                  for s in (MODELLED, PLUMBING, NOT_YET)}
        noun = "function" if len(entries) == 1 else "functions"
        lines.append("")
        lines.append(f"{len(entries)} {noun}: "
                     + ", ".join(f"{n} {s}" for s, n in counts.items()))
        lines.append(self.legend)
        return "\n".join(lines) + "\n"

    def rows(self, stack: str, entries: tuple[MapEntry, ...]) -> list[dict[str, object]]:
        """``entries`` as JSON objects, each naming the stack, the source and the kernel
        version it was read at."""
        return [{"number": e.number, "function": e.function, "kind": e.kind,
                 "status": e.status, "models": list(e.models), "note": e.note,
                 "stack": stack, "source": self.source,
                 "kernel_version": self.kernel_version} for e in entries]


def resolve(path: str) -> object:
    """The object a dotted path names (``package.module.attr`` or
    ``package.module.Class.method``); LookupError naming the path when it does not
    exist."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for name in parts[cut:]:
                obj = getattr(obj, name)
        except AttributeError:
            break
        return obj
    raise LookupError(f"{path} does not resolve")
