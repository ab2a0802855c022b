"""irdma (drivers/infiniband/hw/irdma/cm.c): its registry entry and its room.

irdma's entry in the stack registry: today's :class:`~mpa_emu.stacks.irdma.core.CmCore` with a
:class:`~mpa_emu.stacks.irdma.config.CmConfig` (drivers/infiniband/hw/irdma/cm.c), unchanged.

irdma keeps these settings as compiled-in constants, not module parameters: its registry
parameters are the two ``CmConfig`` fields users meet between stacks (the MPA revision
and the hardware generation); every other knob is a ``CmConfig`` field or quirk, set
through ``Network.add_host(config=...)`` or a scenario's ``[host.config]`` table.

The connection manager is a sans-IO core, one :class:`CmCore` per host.

Layers, each importing only the ones above it:

* vocabulary: :mod:`~mpa_emu.stacks.irdma.states` (``CmState``, ``Input``, kernel names and
  values), :mod:`~mpa_emu.stacks.irdma.config` (``CmConfig``, ``Quirks``),
  :mod:`~mpa_emu.stacks.contract.events` (upcalls), :mod:`~mpa_emu.stacks.contract.errors`
  (``CmError``);
* policies and arithmetic: :mod:`~mpa_emu.stacks.irdma.tcp` (``irdma_check_seq``, options),
  :mod:`~mpa_emu.stacks.irdma.mpa_policy` (``irdma_parse_mpa``, IRD/ORD negotiation),
  :mod:`~mpa_emu.stacks.irdma.timing` (jiffies, the compiled back-off);
* state: :mod:`~mpa_emu.stacks.irdma.node` (the slotted node and listener),
  :mod:`~mpa_emu.stacks.irdma.nodes` (node table, listen list), :mod:`~mpa_emu.stacks.irdma.timers`
  (the
  shared core timer), :mod:`~mpa_emu.stacks.irdma.contract` (rows, outcomes, the actions' view of
  the core);
* behaviour: :mod:`~mpa_emu.stacks.irdma.send`, :mod:`~mpa_emu.stacks.irdma.upcalls`,
  :mod:`~mpa_emu.stacks.irdma.refs`, :mod:`~mpa_emu.stacks.irdma.actions` (the rows' bodies),
  :mod:`~mpa_emu.stacks.irdma.transitions` (the one (state, input) table and its theory of
  operation), :mod:`~mpa_emu.stacks.irdma.leaks`;
* after offload and by address: :mod:`~mpa_emu.stacks.irdma.disconnect`,
  :mod:`~mpa_emu.stacks.irdma.teardown`;
* the orchestrator: :mod:`~mpa_emu.stacks.irdma.core` (``CmCore``: verbs, receive, dispatch).

See docs/cm-core.md and docs/kernel-behaviour.md.
"""


from __future__ import annotations

import errno
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from mpa_emu.stacks.base import (
    ESTABLISHED_AT_RTR,
    OVERLAY_MPA_V1,
    RULED_OUT,
    ConfigRecord,
    Fingerprint,
    FuzzModel,
    HostConfig,
    KernelMap,
    Lifecycle,
    MapEntry,
    MatrixFacts,
    Outcomes,
    PeerFraming,
    Refusals,
    ReplayFacts,
    ReplyStatuses,
    StackFacts,
    StackParam,
    SynSignature,
    Texts,
    Weights,
)
from mpa_emu.stacks.contract.api import CoreApi, NodeWatch
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.events import IwEvent, Upcall
from mpa_emu.stacks.contract.trace import Trace
from mpa_emu.stacks.irdma import fuzzing, refusals
from mpa_emu.stacks.irdma import kernel_map as cm_map
from mpa_emu.stacks.irdma.config import PDATA_TAILS, CmConfig, Quirks
from mpa_emu.stacks.irdma.core import CmCore
from mpa_emu.stacks.irdma.limits import CONFIG_RANGES
from mpa_emu.stacks.irdma.profiles import PROFILES
from mpa_emu.stacks.irdma.states import CmState, Input
from mpa_emu.stacks.irdma.view import ListenerView, NodeView

_CONSTANT = "constant in irdma (cm.h): a non-default value means a rebuilt or patched irdma"

PARAMS: tuple[StackParam, ...] = (
    StackParam("mpa_rev", int, 2, 1, 2, _CONSTANT,
               "IRDMA_CM_DEFAULT_MPA_VER: the MPA revision irdma_connect requests and the "
               "highest irdma_parse_mpa accepts (CmConfig.mpa_rev)."),
    StackParam("gen", int, 2, 1, 2, "the hardware: 2 = E810 (icrdma), 1 = X722 (i40iw)",
               "hardware generation (CmConfig.gen): GEN_1 frames the CM's packets through "
               "the UDA queue, GEN_2 through the AH; IRD limits differ."),
)
"""irdma's registry parameters (the rest of its settings are ``CmConfig``)."""

STATES = tuple(state.name for state in CmState)
"""enum irdma_cm_node_state without the prefix, in kernel order (cm.h)."""


def make_core(host: str, mac: bytes, params: Mapping[str, int | bool], *, seed: int,
              trace: Trace | None, mtu: int = 1500) -> CoreApi:
    """An irdma CM core with the default configuration and ``mtu``."""
    config = CmConfig(mtu=mtu, mpa_rev=int(params.get("mpa_rev", 2)),
                      gen=int(params.get("gen", 2)))
    return CmCore(host, mac, config, seed=seed, trace=trace)


KERNEL_MAP = KernelMap(
    source="drivers/infiniband/hw/irdma/cm.c", kernel_version=cm_map.KERNEL_VERSION,
    functions=tuple(e.function for e in cm_map.ENTRIES),
    entries=tuple(MapEntry(e.number, e.function, e.kind, e.models, e.note, e.status)
                  for e in cm_map.ENTRIES),
    prefix="irdma_", legend=cm_map.KIND_LEGEND, also=())
"""irdma's map (:mod:`mpa_emu.stacks.irdma.kernel_map`, numbered as the reference's function
table, whose copy tests/stacks/irdma/test_kernel_map.py checks it against)."""

FACTS = StackFacts(
    name="irdma", title="Intel E810/X722 (irdma)",
    # irdma_parse_mpa: PD_Length > IETF_MAX_PRIV_DATA_LEN (512) -> -EOVERFLOW.
    max_pd_length=refusals.MAX_PD_LENGTH, pd_limit_fn="irdma_parse_mpa",
    # irdma_parse_mpa reads one segment's payload: no reassembly, -EOVERFLOW.
    reassembles=False, reassembly_fn="irdma_parse_mpa",
    mpa_timer="no MPA timer: the initiator's wait for the reply is the CM "
              "retransmission schedule of the request (irdma_cm_timer_tick: RST and "
              "CONNECT_REPLY -ECONNRESET at expiry); a responder that never gets a "
              "request waits for ever",
    mpa_timer_fix="find why the reply never came: the peer's kernel log, its "
                  "listener and its MPA checks",
    log_prefix="irdma",
)
"""irdma's MPA limits and timers (the judge's and the explanations')."""

STATUSES = ReplyStatuses(
    reject=-errno.ECONNREFUSED, reject_fn="irdma_cm_event_handler (MPA_REJECT)",
    reset=-errno.ECONNRESET, reset_fn="irdma_event_connect_error (ABORTED)",
    timeout=-errno.ECONNRESET,
    timeout_fn="irdma_cm_timer_tick (retransmission expiry: RST, "
               "irdma_event_connect_error)",
)
"""CONNECT_REPLY statuses of an irdma initiator."""


def peer_framing(p: Mapping[str, int | bool]) -> PeerFraming:
    """irdma_send_mpa_request / irdma_build_mpa_v2: C always, P2P always, both RTRs
    offered; irdma_negotiate_mpa_v2_ird_ord picks Read as responder; 512 bytes. Under
    v1 irdma_cm_event_connected still posts send_rdma0_op's RTR (a zero-length Read:
    only a v2 negotiation picks Write), and irdma_accept waits for the RTS AE it
    brings."""
    return PeerFraming(int(p.get("mpa_rev", 2)), True, True, "both", 512, "read", True,
                       None)


FINGERPRINT = Fingerprint(
    syn=SynSignature((2, 3, 0), 65535,
                     "SYN options MSS, WS, EOL with window 65535 (irdma_send_syn)", 3),
    flag=None,
    revision=None,  # irdma_build_mpa_v1/v2: revision 1 or 2, RFC 5044 layout
    weights=Weights(
        syn_linux_options=RULED_OUT,  # irdma_send_syn: MSS, WS, EOL only
        syn_mss_ws_only=0,
        no_crc=RULED_OUT,  # irdma_build_mpa_v1/v2: C always
        own_crc=1,
        socket_request_crc=0,
        mpa_rev1=0,
        no_p2p=RULED_OUT,  # irdma_build_mpa_v2: P2P always
        socket_request_p2p=0,
        request_write_and_read=1,  # irdma_build_mpa_v2: both RTRs offered
        request_read_only=0,
        reply_read_over_both=2,  # irdma_negotiate_mpa_v2_ird_ord: Read first
        reply_write_over_both=0,
        bitfield_terminate=0,
        rfc_terminate=0,
        syn_ts_no_sack=RULED_OUT,  # irdma_send_syn: MSS and WS, never timestamps
        request_send_rtr=RULED_OUT,  # irdma_build_mpa_v2: Write and Read, never Send
        reply_unoffered_rtr=0,
        synack_unasked_mss_ws=0,  # irdma_send_syn is its own signature
        reply_several_rtrs=RULED_OUT,  # irdma_negotiate_mpa_v2_ird_ord picks one type
    ),
)
"""irdma's own TCP sends exactly ``MSS, WS, EOL`` with the window field 65535
(``irdma_send_syn``, ``rcv_wnd`` in ``irdma_make_cm_node``) and never SACK or
timestamps."""

LIFECYCLE = Lifecycle(
    # irdma_cm_init_tsa_conn (both sides: irdma_accept, the active MPA reply)
    connected_state="OFFLOADED",
    # no MPA timer: irdma_cm_timer_tick's retransmission schedule of the request runs
    # out even once the request is acknowledged: RST, ABORTED. IRDMA_DEFAULT_RETRANS 32
    # with the gap HZ << n as compiled (HZ 1000): resends at 1, 3, 7, 15, 27 s, every
    # 12 s up to 315 s, three more a jiffy apart, expiry at 316.003 s
    reply_timeout_s=316,
    # irdma_handle_rst_pkt in MPAREQ_SENT with mpa_frame_rev 2: rev 1, irdma_send_syn
    # again on the same 4-tuple (Quirks.mpa_v1_fallback)
    rst_retries_v1=True,
    # modify_qp(ERR) after offload: the hardware TCP sends a RST
    abort_sends_rst=True,
    # irdma_parse_mpa: for v2 PD_Length still counts the 4 RTR bytes past the 24-byte
    # header, so the upcall's private_data_len is the user's + 4 (Quirks.v2_pdata_plus4)
    upcall_pdata_extra=4,
)
"""irdma's connection life where it differs from another stack's."""


IsnChooser = Callable[[bytes, int, bytes, int], "int | None"]


def make_configured_core(host: str, mac: bytes, config: CmConfig, *, seed: int,
                         trace: Trace | None, isn: IsnChooser | None = None,
                         watch: NodeWatch | None = None) -> CoreApi:
    """An irdma CM core with ``config`` (:attr:`ConfigRecord.make_core`)."""
    return CmCore(host, mac, config, seed=seed, trace=trace, isn=isn, watch=watch)


def _with_params(config: CmConfig, params: Mapping[str, int | bool]) -> CmConfig:
    """irdma's registry parameters are ``CmConfig`` fields of the same names."""
    changes: dict[str, Any] = {k: int(v) for k, v in params.items()}
    return replace(config, **changes)


CONFIG = ConfigRecord(
    default_profile="irdma", profiles=PROFILES, ranges=CONFIG_RANGES,
    choices={"rtr_preference": ("read", "write"), "quirks.v2_pdata_tail": PDATA_TAILS},
    fixed=frozenset({"profile"}), with_params=_with_params,
    make_core=make_configured_core)
"""irdma's settings are compiled-in constants, gathered in ``CmConfig``
(mpa_emu/stacks/irdma/config.py), its profiles in mpa_emu/stacks/irdma/profiles.py."""

REPLAY = ReplayFacts(
    # the registry parameter is CmConfig.mpa_rev (IRDMA_CM_DEFAULT_MPA_VER)
    rev_param="mpa_rev",
    # irdma_make_cm_node: Transmit.conn is the cm_node
    conn_is_node=True,
    # irdma_accept never reads conn_param->ird/ord (irdma_record_ird_ord at connect)
    accept_takes_ird_ord=False,
    # irdma_cm_init_tsa_conn hands the connection to the hardware: the NIC model
    # (offload/) raises the RTS AE (irdma_accept waits for it) and the CRC-error AE
    nic_offload=True,
    aliases={},
    auto_labels=("irdma",),
    # irdma_cm_timer_tick and the segment handlers keep the replay order
    frames_before_due_work=False,
)
"""How replay plays irdma."""


def _max_ird(params: Mapping[str, int | bool]) -> int:
    """max_hw_ird: IRDMA_MAX_IRD_SIZE 127 on GEN_2 (icrdma), 63 on GEN_1 (i40iw)."""
    return 63 if params.get("gen") == 1 else 127


MATRIX = MatrixFacts(
    named_sets=(),
    # IRDMA_CM_DEFAULT_MPA_VER rebuilt as 1; CRC and markers are not settings (C always,
    # irdma_build_mpa_v1/v2), nor the RTR (both offered, Read picked)
    overlays={OVERLAY_MPA_V1: {"mpa_rev": 1}},
    max_ird=_max_ird,
)
"""irdma in the matrix."""


def _default(config: HostConfig | None) -> bool:
    return config is None or config.profile == CONFIG.default_profile


def _crc_on(kind: str, config: HostConfig | None) -> str:
    if _default(config):
        return "always sets C (irdma_build_mpa_v1/v2)"
    return "sets C (the profile keeps irdma_build_mpa_v1's flags)"


def _flag_off(flag: str, kind: str) -> str:
    return ""


def _rtr(kind: str, ours: Any, theirs: Any, config: HostConfig | None) -> list[str]:
    """Why irdma's RFC 6581 block differs from the recorded one, in kernel terms (for
    irdma itself: another profile's block follows the profile, not cm.c)."""
    if not _default(config):
        return []
    cfg = config if isinstance(config, CmConfig) else CmConfig()
    out: list[str] = []
    if (ours.ird, ours.ord) != (theirs.ird, theirs.ord):
        if kind == "request":
            # irdma_connect -> irdma_create_cm_node -> irdma_record_ird_ord: the ULP's
            # values, clamped; replay passes the recorded request's IRD/ORD to connect.
            out.append("irdma_record_ird_ord takes the application's IRD/ORD from connect, "
                       f"clamped to max_hw_ird {cfg.max_ird}/max_hw_ord "
                       f"{cfg.max_ord}, ORD 0 raised to 1 for a READ0 RTR")
        else:
            # irdma_accept never reads conn_param->ird/ord: irdma_build_mpa_v2 writes the
            # node's ird_size (max_hw_ird for a passive node, irdma_make_cm_node) and the
            # ord_size irdma_negotiate_mpa_v2_ird_ord lowered to the request's IRD.
            out.append("irdma_accept ignores the application's IRD/ORD: the reply carries "
                       f"the node's ird_size (max_hw_ird {cfg.max_ird}, or 1 for a READ0 "
                       "request with ORD 0) and its ord_size lowered to the request's IRD "
                       "by irdma_negotiate_mpa_v2_ird_ord")
    rtr_ours = (ours.write0, ours.read0, ours.zero_len_send)
    if rtr_ours != (theirs.write0, theirs.read0, theirs.zero_len_send):
        if kind == "request":
            # irdma_build_mpa_v2, MPA_KEY_REQUEST: ctrl_ord |= RDMA0_WRITE | RDMA0_READ,
            # whatever the ULP asked; iw_cm passes no RTR choice to irdma_connect.
            out.append("irdma_build_mpa_v2 offers WRITE0|READ0 in every request; the "
                       "application cannot narrow the offer")
        else:
            # irdma_negotiate_mpa_v2_ird_ord: READ0 if offered, else WRITE0.
            out.append("irdma_negotiate_mpa_v2_ird_ord picks READ0 whenever the request "
                       "offers it, else WRITE0")
    if ours.peer_to_peer != theirs.peer_to_peer:
        out.append("irdma_build_mpa_v2 always sets P2P")
    return out


TEXTS = Texts(
    crc_on=_crc_on, flag_off=_flag_off, rtr=_rtr,
    debug_log="irdma: dynamic debug of cm.c ({fn}): echo 'file cm.c +p' > "
              "/sys/kernel/debug/dynamic_debug/control",
    parse_fn="irdma_parse_mpa",
    logs={},
    # no MPA timer (irdma_cm_timer_tick: the request's retransmissions run out, RST);
    # a responder that never gets a request waits for ever
    reply_timer_s=None, request_timer_s=None,
)
"""irdma's cause texts and kernel log."""

FUZZ = FuzzModel(
    configs=fuzzing.CONFIGS, make_core=fuzzing.make_core,
    held_unreachable=fuzzing.held_unreachable, change_allowed=fuzzing.change_allowed,
    refusal_changes=fuzzing.refusal_changes, unexplained_leaks=fuzzing.unexplained_leaks)
"""The one- and two-core fuzzers' model of irdma (mpa_emu/stacks/irdma/fuzzing.py)."""

OUTCOMES = Outcomes(
    # irdma_connect's SYN answered with a RST, or never: irdma_cm_timer_tick's
    # retransmissions run out, irdma_event_connect_error (ABORTED)
    syn_refused=-errno.ECONNRESET, syn_timeout=-errno.ECONNRESET, connect_note="",
    # the initiator's first FPDU a Terminate: the QP goes to ERROR, the connection is
    # reset (irdma_cm_disconn_true)
    setup_terminate=-errno.ECONNRESET,
    # irdma_accept waits for the RTS AE the peer's first FPDU brings
    responder_established=ESTABLISHED_AT_RTR,
    # irdma_handle_rst_pkt in MPAREQ_SENT: mpa_frame_rev 2 -> 1, irdma_send_syn again
    rst_retry="at MPA rev 1 on the same ports (irdma_handle_rst_pkt)",
    tcp_findings=(("irdma_process_options", "mss", " MSS "),
                  ("irdma_check_seq", "receive-window", " segment starts ")),
)
"""What irdma's applications see where explain tells outcomes apart."""

REFUSALS = Refusals(responder=refusals.responder, initiator=refusals.initiator)
"""What irdma_parse_mpa and irdma_negotiate_mpa_v2_ird_ord refuse
(mpa_emu/stacks/irdma/refusals.py)."""


__all__ = ["CmConfig", "CmCore", "CmError", "CmState", "Input", "IwEvent", "ListenerView",
"NodeView", "Quirks", "Upcall"]
