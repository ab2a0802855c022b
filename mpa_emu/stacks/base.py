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
from typing import Any, Final, Literal, Protocol

from mpa_emu.ranges import Range
from mpa_emu.stacks.contract.api import CoreApi
from mpa_emu.stacks.refusals import Received, Refusal
from mpa_emu.wire.mpa import RtrBlock


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
class FrameExtension:
    """The 8 bytes a stack of its own MPA dialect writes after the 20-byte header of
    every request, reply and reject (erdma's ``struct erdma_mpa_ext``: a big-endian
    cookie and a big-endian bits word, :mod:`mpa_emu.wire.erdma_mpa`), as a peer that
    copies the stack fills them."""

    cookie: int
    """The cookie of the stack's own requests and accepting replies."""
    bits: int
    """The bits word of its own requests and accepting replies."""
    reject_echoes_request: bool
    """A reject carries the request's own extension back (not the stack's)."""
    takes_only_ext: bool
    """The stack reads no frame without the extension (another revision is refused,
    nothing sent): a peer framing as it does refuses such a frame too."""


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
    ext: FrameExtension | None
    """The bytes the stack's frames of revision ``rev`` carry after the 20-byte header
    (PD_Length not counting them); None for RFC 5044 section 7.1's layout."""


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
    syn_ts_no_sack: int | None
    """A SYN with timestamps and without SACK permitted (qed's offloaded TCP: TS_EN and
    no SACK in its offload parameters; a Linux socket sends SACK unless tcp_sack is off)."""
    request_send_rtr: int | None
    """A P2P request offering the zero-length Send RTR (RFC 6581's B bit)."""
    reply_several_rtrs: int | None
    """A reply choosing more than one RTR type (RFC 6581 section 5 asks for one)."""
    reply_unoffered_rtr: int | None
    """A P2P reply choosing one RTR type the request did not offer."""
    synack_unasked_mss_ws: int
    """A SYN-ACK with MSS and WS only, answering a SYN that offered neither timestamps nor
    SACK (so the answer could carry neither): weighed instead of ``syn_mss_ws_only``."""


@dataclass(frozen=True, slots=True)
class RevisionMark:
    """An MPA revision only this stack writes, with the bytes it puts after the 20-byte
    header that PD_Length does not count (erdma: MPA_REVISION_EXT_1, 129, and the 8
    bytes of struct erdma_mpa_ext, erdma_send_mpareqrep)."""

    rev: int
    ext_size: int
    """Bytes between the header and the private data (0: none, the RFC 5044 layout)."""
    evidence: str
    """The fingerprint's words after "request"/"reply" for a frame so written."""
    points: int


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """The evidence in a capture that names this stack (:mod:`mpa_emu.judge.
    fingerprint`): its own SYN, its own MPA flag bit, its own MPA revision, and what
    every other piece of evidence weighs for it."""

    syn: SynSignature | None
    flag: FlagMark | None
    revision: RevisionMark | None
    """The MPA revision (with its extension) only this stack writes; None for a stack
    that writes RFC 5044/6581's revisions 1 and 2."""
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


class HostConfig(Protocol):
    """What the layers outside a stack read of its configuration record (irdma's
    ``CmConfig``): the interface MTU, the profile it was built from and the MPA revision
    it starts at. A frozen dataclass with these fields (the layers change a record only
    with :func:`dataclasses.replace`)."""

    @property
    def mtu(self) -> int:
        """The host interface's MTU."""

    @property
    def profile(self) -> str:
        """The name of the profile (:attr:`ConfigRecord.profiles`) the record is built
        from."""

    @property
    def mpa_rev(self) -> int:
        """The MPA revision the host requests and accepts at most."""


@dataclass(frozen=True, slots=True)
class ConfigRecord:
    """A stack configured by a record of its own beyond its registry parameters:
    irdma, whose settings are compiled-in constants gathered in ``CmConfig`` (retrans,
    hz, quirks, ...). Network hosts (``add_host(config=...)``), scenario files
    (``[host.config]``, ``profile =``), ``mpa-emu live --profile`` and replay build such
    a stack through this record. A stack configured by its module parameters alone
    (siw, cxgb4) has ``config=None``: its hosts take ``params`` and an MTU only.
    """

    default_profile: str
    """The profile a host gets when none is named (irdma: ``"irdma"``)."""
    profiles: Mapping[str, Callable[..., HostConfig]]
    """Named records: ``profiles[name](**overrides)`` returns one, each keyword a field
    (irdma: mpa_emu/stacks/irdma/profiles.py, ``irdma``, ``siw``, ``mpa-v1``, ...)."""
    ranges: Mapping[str, Range]
    """The range of every integer field, as the kernel types it (a scenario's
    ``[host.config]`` and the CLI check values against it; irdma: ``CONFIG_RANGES``)."""
    choices: Mapping[str, tuple[str, ...]]
    """The text fields that take one of a few values, by dotted path
    (``"rtr_preference"``, ``"quirks.v2_pdata_tail"``)."""
    fixed: frozenset[str]
    """Fields a scenario's ``[host.config]`` table never sets (irdma: ``profile``, which
    names the record's origin)."""
    with_params: Callable[[Any, Mapping[str, int | bool]], HostConfig]
    """The record with the stack's registry parameters applied (irdma: ``mpa_rev`` and
    ``gen`` are ``CmConfig`` fields of the same names)."""
    make_core: Callable[..., CoreApi]
    """``make_core(host, mac, record, *, seed, trace, isn=None, watch=None)``: the core
    of a host with this record; ``isn(local_ip, local_port, remote_ip, remote_port)``
    may choose each connection's ISN (replay passes the recorded ones), ``watch`` is a
    :class:`~mpa_emu.stacks.contract.api.NodeWatch` (irdma: ``CmCore``)."""


@dataclass(frozen=True, slots=True)
class ReplayFacts:
    """How ``mpa-emu replay`` (:mod:`mpa_emu.replay`) plays this stack against a recording,
    and reads a recorded host of it."""

    rev_param: str
    """The registry parameter ``--mpa-rev`` sets (siw ``mpa_version``, cxgb4
    ``mpa_rev``; a stack with a :class:`ConfigRecord` takes ``mpa_rev`` of its record).
    ``""`` for a stack whose revision is fixed (erdma: MPA_REVISION_EXT_1 always):
    ``--mpa-rev`` is then a one-line error for it, ``--profile auto --mpa-rev`` leaves
    it out, and its revision is :attr:`PeerFraming.rev`."""
    conn_is_node: bool
    """``Transmit.conn`` names the CM node (irdma); False when it names the socket, and
    replay finds the connection by the flow's ports (siw, cxgb4)."""
    accept_takes_ird_ord: bool
    """Its accept reads the application's IRD/ORD (siw_accept, c4iw_accept_cr:
    ``conn_param->ird/ord``), so replay accepts with the recorded reply's; irdma_accept
    never reads them."""
    nic_offload: bool
    """Past MPA the emulated NIC model carries the connection (irdma's offload/: the RTS
    AE, the CRC-error AE, the hardware's close); False when the stack's own software
    keeps it (siw over Linux TCP, cxgb4's model): replay then tells the recorded story
    by the stack's CM and names the kernel function of each close."""
    aliases: Mapping[str, Mapping[str, int | bool]]
    """Old ``--profile`` names that mean this stack with parameters (siw: ``siw`` and
    ``mpa-v1`` = siw(mpa_version=1)); empty for most."""
    auto_labels: tuple[str, ...]
    """What ``--profile auto`` tries of this stack, in order: labels
    (``siw(peer_to_peer=1)``) or :attr:`aliases` (the defaults first)."""
    frames_before_due_work: bool
    """A recorded segment that arrives at the instant the core's work falls due is taken
    first: the stack defers its MPA handling to a work queue from the socket's data
    callback (erdma_cm_llp_data_ready -> ERDMA_CM_WORK_READ_MPAHDR), which runs after the
    softirq that took the segments (the emulated network's order). False: replay fires
    the due timers first."""


OVERLAY_MPA_V1 = "mpa-v1"
"""Matrix overlay: the side starts at MPA revision 1 (:attr:`MatrixFacts.overlays`)."""
OVERLAY_CRC_ON = "crc-required"
"""Matrix overlay: the side requires (sends) MPA CRC."""
OVERLAY_CRC_OFF = "crc-off"
"""Matrix overlay: the side does not ask for MPA CRC."""
OVERLAY_MARKERS_ON = "markers"
"""Matrix overlay: the side asks for MPA markers."""
OVERLAY_RTR_WRITE = "rtr-write"
"""Matrix overlay: the side offers (or picks) the zero-length RDMA Write RTR."""
OVERLAY_RTR_READ = "rtr-read"
"""Matrix overlay: the side offers (or picks) the zero-length RDMA Read RTR."""
OVERLAY_RTR_SEND = "rtr-send"
"""Matrix overlay: the side offers the zero-length Send RTR (no stack has a setting)."""
OVERLAY_NAMES = (OVERLAY_MPA_V1, OVERLAY_CRC_ON, OVERLAY_CRC_OFF, OVERLAY_MARKERS_ON,
                 OVERLAY_RTR_WRITE, OVERLAY_RTR_READ, OVERLAY_RTR_SEND)
"""Every overlay the matrix catalogue (:mod:`mpa_emu.matrix.catalogue`) uses."""


@dataclass(frozen=True, slots=True)
class MatrixFacts:
    """What ``mpa-emu matrix`` (:mod:`mpa_emu.matrix`) needs of a stack beyond its
    parameters."""

    named_sets: tuple[Mapping[str, int | bool], ...]
    """Parameter sets users run besides the defaults, each a matrix side of its own
    (siw ``peer_to_peer=1``, cxgb4 ``peer2peer=0``; docs/stacks/*.md says why)."""
    overlays: Mapping[str, Mapping[str, int | bool]]
    """Overlay name (:data:`OVERLAY_NAMES`) -> the parameters that give the stack that
    setting; an overlay left out is one the stack has no setting for (its cells say
    so)."""
    max_ird: Callable[[Mapping[str, int | bool]], int]
    """The most IRD/ORD its device offers an application with these parameters (the
    device attributes: irdma's max_hw_ird 127 on GEN_2 and 63 on GEN_1, siw's
    SIW_MAX_IRD_QP 128, cxgb4's c4iw_max_read_depth)."""


@dataclass(frozen=True, slots=True)
class Texts:
    """The stack's own words in reports: why its MPA frame differs from a recorded one
    (``replay --semantic``), the kernel log to look at and the MPA timers that explain a
    close (``explain``, :mod:`mpa_emu.views.explanation`). Each text names the kernel
    function that decides."""

    crc_on: Callable[[str, HostConfig | None], str]
    """``crc_on(kind, config)``: why the emulated side set C where the recording has
    C=0, with the verb: ``"sets C (siw_connect: mpa_crc_required)"``; ``kind`` is
    ``"request"`` or ``"reply"``, ``config`` its :class:`ConfigRecord` record (or None)."""
    flag_off: Callable[[str, str], str]
    """``flag_off(flag, kind)``: why its flag ``flag`` (``"M"``, ``"C"``) differs where it
    did not set it, as a parenthesis after the sentence (``" (siw never asks for
    markers; ...)"``), or ``""``."""
    rtr: Callable[[str, RtrBlock, RtrBlock, HostConfig | None], list[str]]
    """``rtr(kind, ours, theirs, config)``: why its RFC 6581 block differs from the
    recorded one (one clause per field that differs; may be empty)."""
    debug_log: str
    """How to see its CM's kernel log, with ``{fn}`` for the function concerned
    (``"siw: dynamic debug ({fn}, siw_dbg_cep): echo 'module siw +p' > ..."``)."""
    parse_fn: str
    """The function :attr:`debug_log` names for an MPA frame it cannot read
    (``irdma_parse_mpa``; ``""`` when the log line names none)."""
    logs: Mapping[str, str]
    """Cause (a key of :data:`mpa_emu.judge.catalogue.CAUSES`) -> the kernel log line
    the stack prints for it, with the function and log level."""
    reply_timer_s: int | None
    """Seconds its initiator's MPA timer waits for the reply before giving up (siw's
    MPAREQ_TIMEOUT, cxgb4's ep_timeout_secs default); None when it has no MPA timer
    (irdma: the request's retransmissions run out, and it closes with a RST)."""
    request_timer_s: int | None
    """Seconds its responder waits for the MPA request before closing (siw's
    MPAREP_TIMEOUT, cxgb4's ep_timeout_secs default); None when it waits for ever
    (irdma: no MPA timer)."""


@dataclass(frozen=True, slots=True)
class Refusals:
    """What the stack refuses in an MPA frame it receives, each rule with the kernel
    function that refuses it (the judge, :mod:`mpa_emu.judge.rules`, applies them to
    every side judged as this stack; records and catalogue keys:
    :mod:`mpa_emu.stacks.refusals`). Written in the stack's ``refusals.py``."""

    responder: Callable[[Received], list[Refusal]]
    """``responder(r)``: every rule a responder of this stack finds the request ``r``
    breaking (its limits, then its checks in the kernel's order)."""
    initiator: Callable[[Received], list[Refusal]]
    """``initiator(r)``: every rule an initiator finds the reply ``r`` breaking
    (``r.request`` is the request it answers, when seen; a reject is no refusal)."""


ESTABLISHED_AT_REPLY: Final = "reply"
""":attr:`Outcomes.responder_established`: with its accepting reply (cxgb4)."""
ESTABLISHED_AT_RTR: Final = "rtr"
"""... with the peer's first FPDU, the RTR, always (irdma: the RTS AE)."""
ESTABLISHED_AT_CHOSEN_RTR: Final = "chosen-rtr"
"""... with the peer's first FPDU when its reply picked an RTR, else with the reply
(siw)."""
Established = Literal["reply", "rtr", "chosen-rtr"]


@dataclass(frozen=True, slots=True)
class Outcomes:
    """What an application of this stack sees in the outcomes ``mpa-emu explain``
    (:mod:`mpa_emu.views.explanation`) and ``replay --semantic`` tell apart, beyond
    :class:`ReplyStatuses`, each as its kernel function decides it."""

    syn_refused: int | None
    """CONNECT_REPLY status of an initiator whose SYN is answered with a RST (irdma
    -ECONNRESET, cxgb4 -ECONNREFUSED); None when the application gets no event (siw:
    rdma_connect itself fails, :attr:`connect_note`)."""
    syn_timeout: int | None
    """CONNECT_REPLY status of an initiator whose SYN gets no answer (irdma
    -ECONNRESET, siw and cxgb4 -ETIMEDOUT), None for no event."""
    connect_note: str
    """What explain adds when the TCP connect fails ("" for nothing; siw: its blocking
    kernel_bindconnect fails the application's rdma_connect)."""
    setup_terminate: int
    """CONNECT_REPLY status of an initiator that sends a Terminate as its first FPDU,
    during set-up (siw -EINVAL, cxgb4 -ENOMEM, irdma -ECONNRESET)."""
    responder_established: Established
    """When a responder's application gets ESTABLISHED after accepting:
    :data:`ESTABLISHED_AT_REPLY` (c4iw_accept_cr: established_upcall),
    :data:`ESTABLISHED_AT_RTR` (irdma_accept waits for the RTS AE) or
    :data:`ESTABLISHED_AT_CHOSEN_RTR` (siw_accept: wait_for_peer_rts when the reply
    chose an RTR, siw_rtr_data_ready)."""
    rst_retry: str
    """How its initiator retries a rev 2 request the responder reset, as explain says it
    after "retries" and "with a retry" (irdma: ``"at MPA rev 1 on the same ports
    (irdma_handle_rst_pkt)"``); "" when explain reports the reset as it is (siw; cxgb4,
    whose retry_with_mpa_v1 explain does not tell yet)."""
    tcp_findings: tuple[tuple[str, str, str], ...]
    """inspect's TCP findings that hold only for a receiver of this stack, as (the
    kernel function the finding names, the rule, words of the finding): irdma's own
    TCP (irdma_process_options' MSS, irdma_check_seq's window); () for a stack on
    Linux TCP or the NIC's."""


@dataclass(frozen=True, slots=True)
class FuzzModel:
    """What ``mpa-emu fuzz`` checks of a core alone, beyond the contract
    (:mod:`mpa_emu.campaign.fuzz`, :mod:`mpa_emu.campaign.two_core`): a stack whose
    states are a table of (state, input) rows (irdma's transitions.py). None for a
    stack the mixed fuzzer (``--mixed``) alone covers."""

    configs: int
    """How many core configurations the scripts choose from."""
    make_core: Callable[..., CoreApi]
    """``make_core(host, mac, index, *, seed, trace)``: a core with configuration
    ``index`` (0 .. :attr:`configs` - 1)."""
    held_unreachable: Callable[[Any], bool]
    """``held_unreachable(view)``: the node view sits in a state the table marks
    unreachable (never set, or transient within one call)."""
    change_allowed: Callable[[str, str], bool]
    """``change_allowed(old, new)``: a traced state change (kernel state names) is one a
    reachable row allows, or starts from a transient state."""
    refusal_changes: Callable[[str, Any], bool]
    """``refusal_changes(verb, view)``: a refused ``verb`` on a node with this view may
    change the node table (irdma_accept's error path releases the node first)."""
    unexplained_leaks: Callable[[Any], list[tuple[int, str]]]
    """``unexplained_leaks(core)``: the nodes left once every timer ran out that no
    kernel leak explains, as (conn, state name); empty when all is well."""


@dataclass(frozen=True, slots=True)
class Stack:
    """A registered stack: its name, title, parameters, core factory, documentation,
    states, kernel map and facts (every one required).

    ``make_core(host_name, mac, params, *, seed, trace, mtu)`` returns a
    :class:`~mpa_emu.stacks.contract.api.CoreApi`; ``params`` is what :func:`parse_params`
    returned (a stack with a :attr:`config` record is built from the record instead,
    :attr:`ConfigRecord.make_core`, wherever one is given or implied).
    ``peer_framing(params)`` gives the MPA framing of a stack with ``params`` (checked).
    Every other layer reads what differs between stacks from these fields, never from
    the stack's name (docs/stacks/README.md, tests/package/test_stack_peers.py).
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
    config: ConfigRecord | None
    """Its configuration record beyond the parameters (irdma's ``CmConfig``), or None."""
    replay: ReplayFacts
    """How replay plays it and reads a recorded host of it."""
    matrix: MatrixFacts
    """Its named parameter sets, matrix overlays and device IRD limit."""
    texts: Texts
    """Its cause texts and kernel log lines."""
    fuzz: FuzzModel | None
    """What the one- and two-core fuzzers check of its core alone, or None."""
    refusals: Refusals
    """What it refuses in a received MPA request or reply (the judge's rules)."""
    outcomes: Outcomes
    """What its applications see where explain and replay tell outcomes apart."""

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
    also: tuple[KernelMap, ...]
    """The stack's further source files, each mapped alike (qedr's qed_iwarp.c beside
    qedr_iw_cm.c: the qed half of its connection manager); ``()`` for a stack of one."""

    @property
    def files(self) -> tuple[KernelMap, ...]:
        """This map and :attr:`also`, in order: every source file of the stack."""
        return (self, *self.also)

    def find(self, function: str) -> tuple[KernelMap, MapEntry]:
        """The file and entry of one function in any of :attr:`files` (with or without
        a file's prefix); KeyError with a one-line message naming the files when none
        has it."""
        for kmap in self.files:
            try:
                return kmap, kmap.entry(function)
            except KeyError:
                continue
        names = " or ".join(k.file_name for k in self.files)
        raise KeyError(f"{function} is not a {names} function")

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
