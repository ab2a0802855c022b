"""The map from every function of the kernel's cm.c to what models it in mpa_emu.

One entry per function of ``drivers/infiniband/hw/irdma/cm.c`` (97 in mainline Linux
:data:`KERNEL_VERSION`, numbered as in the reference's function table). An entry either
names what models the function (dotted paths into mpa_emu: a module attribute, or
``Class.method``) or says why nothing does (hardware or OS plumbing whose guarantee is
kept another way). The test ``tests/stacks/irdma/test_kernel_map.py`` keeps the map complete and
true: every path must import.

``mpa-emu kernel-map`` prints it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

KERNEL_VERSION = "6.16"
"""The mainline Linux release whose ``drivers/infiniband/hw/irdma/cm.c`` (and ``cm.h``)
the model follows: the newest cm.c the reference was read from (the 6.16 timer API,
``timer_container_of``). Its state machine is the one of the 2023-2025 mainline trees
(the listener match with its ``ipv4`` check, ``IRDMA_DEFAULT_RETRANS`` 32 since Linux
6.3); they differ from it only in plumbing. docs/kernel-behaviour.md names the same
release (a test checks it)."""

MODELLED = "modelled"
PLUMBING = "plumbing"
NOT_YET = "not modelled yet"


@dataclass(frozen=True, slots=True)
class KernelEntry:
    """One cm.c function: its number and kind in the reference table (E emulated, P
    plumbing, H hybrid), the mpa_emu objects modelling it, and a note."""

    number: int
    function: str
    kind: str
    models: tuple[str, ...]
    note: str

    @property
    def status(self) -> str:
        """``not modelled yet`` (the note says so), ``plumbing`` (kind P: hardware or OS
        work with no packet-level behaviour; the note says how its guarantee is kept) or
        ``modelled``."""
        if self.note.startswith(NOT_YET):
            return NOT_YET
        return PLUMBING if self.kind.startswith("P") else MODELLED


_CORE = "mpa_emu.stacks.irdma.core."


def _e(number: int, function: str, kind: str, models: str, note: str = "") -> KernelEntry:
    """An entry; ``models`` is space-separated, ``CmCore.x`` short for the core's class."""
    paths = tuple(_CORE + m if m.startswith("CmCore.") else m for m in models.split())
    return KernelEntry(number, function, kind, paths, note)


ENTRIES: tuple[KernelEntry, ...] = (
    _e(1, "irdma_free_sqbuf", "P", "",
       "ILQ buffer refcount: frames are immutable Segment values, garbage-collected"),
    _e(2, "irdma_record_ird_ord", "E",
       "mpa_emu.stacks.irdma.nodes.record_ird_ord",
       ""),
    _e(3, "irdma_copy_ip_ntohl", "P", "mpa_emu.wire.addr.ip_bytes",
       "addresses stay packed bytes; no byte-order copies"),
    _e(4, "irdma_copy_ip_htonl", "P", "mpa_emu.wire.addr.ip_text",
       "addresses stay packed bytes; no byte-order copies"),
    _e(5, "irdma_get_addr_info", "P", "",
       "qhash request plumbing: the node's 4-tuple and VLAN are read directly"),
    _e(6, "irdma_fill_sockaddr4", "P", "mpa_emu.stacks.contract.events.Upcall",
       "the upcall carries packed addresses and ports"),
    _e(7, "irdma_fill_sockaddr6", "P", "mpa_emu.stacks.contract.events.Upcall",
       "the upcall carries packed addresses and ports"),
    _e(8, "irdma_get_cmevent_info", "H",
       "mpa_emu.stacks.irdma.upcalls.send_cm_event mpa_emu.stacks.contract.events.Upcall",
       "by behaviour: CONNECT_REPLY carries private data, IRD and ORD from the node"),
    _e(9, "irdma_send_cm_event", "E",
       "mpa_emu.stacks.contract.events.Upcall CmCore._send_cm_event "
       "mpa_emu.stacks.irdma.upcalls.send_cm_event",
       "u8 private-data length: Quirks.pdata_len_u8"),
    _e(10, "irdma_timer_list_prep", "H",
       "mpa_emu.stacks.irdma.timers.timer_tick CmCore.get_timer",
       "a heap of due times replaces the node walk; arming rules kept (add_timer only "
       "when the timer is idle)"),
    _e(11, "irdma_create_event", "E",
       "mpa_emu.stacks.irdma.upcalls.create_event mpa_emu.stacks.irdma.states.CmEventType",
       ""),
    _e(12, "irdma_free_retrans_entry", "E",
       "mpa_emu.stacks.irdma.timers.free_retrans_entry mpa_emu.stacks.irdma.node.SendEntry",
       ""),
    _e(13, "irdma_cleanup_retrans_entry", "E",
       "mpa_emu.stacks.irdma.send.cleanup mpa_emu.stacks.irdma.node.SendEntry",
       ""),
    _e(14, "irdma_form_ah_cm_frame", "E",
       "mpa_emu.stacks.irdma.send.form mpa_emu.wire.segment.Segment",
       "GEN_2 framing: TCP built by the CM, L2/L3 from the AH"),
    _e(15, "irdma_form_uda_cm_frame", "E",
       "mpa_emu.stacks.irdma.send.form mpa_emu.wire.codec.encode",
       "GEN_1 framing: the whole Ethernet/IP/TCP frame"),
    _e(16, "irdma_send_reset", "E",
       "mpa_emu.stacks.irdma.send.send_reset",
       ""),
    _e(17, "irdma_active_open_err", "E",
       "mpa_emu.stacks.irdma.actions.active_open_err",
       ""),
    _e(18, "irdma_passive_open_err", "E",
       "mpa_emu.stacks.irdma.actions.passive_open_err",
       ""),
    _e(19, "irdma_event_connect_error", "E",
       "mpa_emu.stacks.irdma.upcalls.event_connect_error",
       ""),
    _e(20, "irdma_process_options", "E",
       "mpa_emu.stacks.irdma.tcp.process_options mpa_emu.stacks.irdma.tcp.OptionResult",
       "length-0 option loop: Quirks.zero_len_option_loop"),
    _e(21, "irdma_handle_tcp_options", "E",
       "mpa_emu.stacks.irdma.actions.tcp_options mpa_emu.stacks.irdma.tcp.process_options",
       ""),
    _e(22, "irdma_build_mpa_v1", "E",
       "mpa_emu.stacks.irdma.mpa_policy.build_mpa_frame "
       "mpa_emu.stacks.irdma.mpa_policy.MpaParams", ""),
    _e(23, "irdma_build_mpa_v2", "E",
       "mpa_emu.stacks.irdma.mpa_policy.build_mpa_frame mpa_emu.stacks.irdma.mpa_policy.MpaParams "
       "mpa_emu.wire.mpa.RtrBlock",
       "by behaviour: rev 2 frames get flag 0x10 and the RFC 6581 block (MpaParams cites "
       "irdma_build_mpa_v1/v2)"),
    _e(24, "irdma_cm_build_mpa_frame", "E",
       "mpa_emu.stacks.irdma.mpa_policy.build_mpa_frame "
       "mpa_emu.stacks.irdma.send.cm_build_mpa_frame",
       "rcv_mark_en set on every v2 build with iw_ooo (irdma_build_mpa_v2)"),
    _e(25, "irdma_send_mpa_request", "E",
       "mpa_emu.stacks.irdma.send.send_mpa_request",
       ""),
    _e(26, "irdma_send_mpa_reject", "E",
       "mpa_emu.stacks.irdma.actions.reject mpa_emu.stacks.irdma.mpa_policy.build_mpa_frame",
       "reject frame with ACK|FIN, FIN_WAIT1"),
    _e(27, "irdma_negotiate_mpa_v2_ird_ord", "E",
       "mpa_emu.stacks.irdma.mpa_policy.negotiate_mpa_v2_ird_ord", ""),
    _e(28, "irdma_parse_mpa", "E", "mpa_emu.stacks.irdma.mpa_policy.parse_mpa",
       "v2 +4 private data: Quirks.v2_pdata_plus4"),
    _e(29, "irdma_schedule_cm_timer", "E",
       "mpa_emu.stacks.irdma.send.schedule_send mpa_emu.stacks.irdma.send.schedule_close "
       "mpa_emu.stacks.irdma.node.SendEntry "
       "mpa_emu.stacks.irdma.node.CloseEntry",
       ""),
    _e(30, "irdma_retrans_expired", "E",
       "mpa_emu.stacks.irdma.actions.expire_free mpa_emu.stacks.irdma.actions.expire_reset "
       "mpa_emu.stacks.irdma.actions.expire_abort",
       "one transition-table row per old state"),
    _e(31, "irdma_handle_close_entry", "H", "mpa_emu.stacks.irdma.disconnect.handle_close_entry",
    ""),
    _e(32, "irdma_cm_timer_tick", "E",
       "mpa_emu.stacks.irdma.timers.timer_tick mpa_emu.stacks.irdma.timing.backoff_gap "
       "mpa_emu.stacks.irdma.timing.retransmit_schedule",
       "int-shift back-off: Quirks.backoff_int_shift"),
    _e(33, "irdma_send_syn", "E",
       "mpa_emu.stacks.irdma.send.send_syn mpa_emu.stacks.irdma.tcp.syn_options",
       ""),
    _e(34, "irdma_send_ack", "E",
       "mpa_emu.stacks.irdma.send.send_ack",
       ""),
    _e(35, "irdma_send_fin", "E",
       "mpa_emu.stacks.irdma.send.send_fin",
       ""),
    _e(36, "irdma_find_listener", "E",
       "mpa_emu.stacks.irdma.nodes.NodeTable.find_listener",
       ""),
    _e(37, "irdma_del_multiple_qhash", "P", "mpa_emu.stacks.irdma.node.ChildListener",
       "qhash steering rules: child listeners hold the per-address SYN rule"),
    _e(38, "irdma_get_vlan_mac_ipv6", "P", "CmCore.add_address mpa_emu.net.host.Host.add_address",
       "the local address table records each address's VLAN"),
    _e(39, "irdma_iw_get_vlan_prio", "P", "",
       "VLAN egress QoS map: frames carry the priority from the listener/route (pcp)"),
    _e(40, "irdma_get_vlan_ipv4", "P",
       "CmCore.add_address mpa_emu.net.host.Host.add_address CmCore._set_node_vlan",
       "the local address table records each address's VLAN; irdma_accept re-reads it"),
    _e(41, "irdma_add_mqh_6", "P", "mpa_emu.stacks.irdma.node.ChildListener",
       "one child listener per local address of a wildcard listener"),
    _e(42, "irdma_add_mqh_4", "P", "mpa_emu.stacks.irdma.node.ChildListener",
       "one child listener per local address of a wildcard listener"),
    _e(43, "irdma_add_mqh", "P", "mpa_emu.stacks.irdma.node.ChildListener",
       "dispatch to the IPv4 or IPv6 variant"),
    _e(44, "irdma_reset_list_prep", "H",
       "mpa_emu.stacks.irdma.refs.dec_refcnt_listen mpa_emu.stacks.irdma.actions.listener_reset",
       "nodes of the listener collected with a reference"),
    _e(45, "irdma_dec_refcnt_listen", "E/H",
       "mpa_emu.stacks.irdma.refs.dec_refcnt_listen mpa_emu.stacks.irdma.node.Listener",
       ""),
    _e(46, "irdma_cm_del_listen", "E",
       "CmCore.destroy_listen",
       ""),
    _e(47, "irdma_addr_resolve_neigh", "P", "CmCore.set_neighbour CmCore._make_cm_node",
       "neighbour table per host; a miss fails connect (-ENOMEM) or drops the SYN"),
    _e(48, "irdma_get_dst_ipv6", "P", "",
       "routing: every emulated host shares one link, no routes to look up"),
    _e(49, "irdma_addr_resolve_neigh_ipv6", "P", "CmCore.set_neighbour CmCore._make_cm_node",
       "neighbour table per host, as for IPv4"),
    _e(50, "irdma_find_node", "E",
       "CmCore._receive_one mpa_emu.stacks.irdma.node.CmNode mpa_emu.stacks.irdma.node.segment_key",
       "exact 4-tuple + VLAN lookup"),
    _e(51, "irdma_add_hte_node", "E",
       "CmCore._make_cm_node",
       "by behaviour: the new node goes into the core's node table"),
    _e(52, "irdma_ipv4_is_lpb", "E/P",
       "mpa_emu.stacks.irdma.nodes.is_loopback",
       ""),
    _e(53, "irdma_ipv6_is_lpb", "E/P",
       "mpa_emu.stacks.irdma.nodes.is_loopback",
       ""),
    _e(54, "irdma_cm_create_ah", "P", "mpa_emu.stacks.irdma.actions.passive_open "
                                      "CmCore._qhash_done",
       "AH creation is a latency (CmConfig.ah_latency_ns) before the passive SYN-ACK; "
       "the node's ah_valid gates every CM frame (irdma_form_ah_cm_frame)"),
    _e(55, "irdma_cm_free_ah", "P", "", "no hardware object to free"),
    _e(56, "irdma_make_cm_node", "E",
       "CmCore._make_cm_node mpa_emu.stacks.irdma.node.CmNode",
       ""),
    _e(57, "irdma_destroy_connection", "H",
       "mpa_emu.stacks.irdma.refs.destroy_connection",
       ""),
    _e(58, "irdma_rem_ref_cm_node", "E",
       "mpa_emu.stacks.irdma.refs.rem_ref",
       ""),
    _e(59, "irdma_handle_fin_pkt", "E",
       "mpa_emu.stacks.irdma.actions.fin_to_last_ack mpa_emu.stacks.irdma.actions.fin_abort "
       "mpa_emu.stacks.irdma.actions.fin_simultaneous "
       "mpa_emu.stacks.irdma.actions.fin_time_wait mpa_emu.stacks.irdma.transitions.row",
       "one row per (state, FIN) pair"),
    _e(60, "irdma_handle_rst_pkt", "E",
       "CmCore._process_pkt mpa_emu.stacks.irdma.actions.rst_active "
       "mpa_emu.stacks.irdma.actions.rst_indicated "
       "mpa_emu.stacks.irdma.transitions.row",
       "v2 -> v1 retry: Quirks.mpa_v1_fallback"),
    _e(61, "irdma_handle_rcv_mpa", "E",
       "mpa_emu.stacks.irdma.actions.mpa_request mpa_emu.stacks.irdma.actions.mpa_reply "
       "mpa_emu.stacks.irdma.actions.mpa_unexpected "
       "mpa_emu.stacks.irdma.transitions.row",
       ""),
    _e(62, "irdma_check_syn", "E",
       "mpa_emu.stacks.irdma.actions.synack_active_open",
       "SYN-ACK ack must equal loc_seq_num, else RST + ABORTED"),
    _e(63, "irdma_check_seq", "E",
       "CmCore._check_seq mpa_emu.stacks.irdma.tcp.check_seq mpa_emu.stacks.irdma.tcp.between",
       ""),
    _e(64, "irdma_add_conn_est_qh", "P/E",
       "CmCore._qhash_done",
       "the qhash completion sends the SYN-ACK after CmConfig.ah_latency_ns"),
    _e(65, "irdma_handle_syn_pkt", "E",
       "mpa_emu.stacks.irdma.actions.passive_open mpa_emu.stacks.irdma.transitions.row",
       "one row per (state, SYN) pair"),
    _e(66, "irdma_handle_synack_pkt", "E",
       "mpa_emu.stacks.irdma.actions.synack_active_open mpa_emu.stacks.irdma.transitions.row",
       "one row per (state, SYN-ACK) pair"),
    _e(67, "irdma_handle_ack_pkt", "E",
       "CmCore._process_pkt mpa_emu.stacks.irdma.actions.syn_rcvd_ack "
       "mpa_emu.stacks.irdma.actions.established_data "
       "mpa_emu.stacks.irdma.actions.mpareq_sent_data mpa_emu.stacks.irdma.transitions.row",
       "one row per (state, ACK) pair"),
    _e(68, "irdma_process_pkt", "E",
       "CmCore._process_pkt mpa_emu.stacks.irdma.states.Input mpa_emu.stacks.irdma.transitions.row",
       ""),
    _e(69, "irdma_make_listen_node", "E",
       "CmCore.create_listen mpa_emu.stacks.irdma.node.Listener",
       ""),
    _e(70, "irdma_create_cm_node", "E",
       "CmCore.connect CmCore._make_cm_node",
       "by behaviour: connect makes the active node (client, rcv_wscale, IRD/ORD, pdata)"),
    _e(71, "irdma_cm_reject", "E",
       "CmCore.reject mpa_emu.stacks.irdma.actions.reject",
       ""),
    _e(72, "irdma_cm_close", "E",
       "CmCore._cm_close",
       ""),
    _e(73, "irdma_receive_ilq", "E",
       "CmCore.receive CmCore._receive_one",
       ""),
    _e(74, "irdma_add_qh", "P", "mpa_emu.stacks.irdma.actions.passive_open CmCore._qhash_done",
       "GEN_1 (CmConfig.gen = 1) sends the SYN-ACK from the qhash completion"),
    _e(75, "irdma_cm_free_ah_nop", "P", "", "GEN_1 no-op"),
    _e(76, "irdma_setup_cm_core", "P/E", "mpa_emu.stacks.irdma.config.CmConfig",
       "one core per host, built from its CmConfig"),
    _e(77, "irdma_cleanup_cm_core", "P", "", "nothing outlives the Python object"),
    _e(78, "irdma_init_tcp_ctx", "H", "mpa_emu.stacks.irdma.offload.qp_records.QpInit", ""),
    _e(79, "irdma_cm_init_tsa_conn", "H",
       "mpa_emu.stacks.irdma.upcalls.init_tsa_conn mpa_emu.stacks.irdma.offload.qp_records.QpInit",
       ""),
    _e(80, "irdma_cm_disconn", "H", "mpa_emu.stacks.irdma.disconnect.cm_disconn", ""),
    _e(81, "irdma_qp_disconnect", "H", "mpa_emu.stacks.irdma.disconnect.cm_disconn_true",
       "the CLOSE branch calls cm_close on the node"),
    _e(82, "irdma_cm_disconn_true", "H",
       "mpa_emu.stacks.irdma.disconnect.cm_disconn_true "
       "mpa_emu.stacks.irdma.disconnect.disconn_decision", ""),
    _e(83, "irdma_disconnect_worker", "P", "mpa_emu.stacks.irdma.disconnect.cm_disconn",
       "the worker runs synchronously"),
    _e(84, "irdma_free_lsmm_rsrc", "P", "", "the MPA reply buffer is an immutable bytes value"),
    _e(85, "irdma_accept", "E",
       "CmCore.accept mpa_emu.stacks.irdma.actions.accept",
       "RTS AE wait: CmConfig.rts_ae_timeout_ns"),
    _e(86, "irdma_reject", "E",
       "CmCore.reject",
       "u8 pdata length: Quirks.reject_pdata_u8"),
    _e(87, "irdma_connect", "E",
       "CmCore.connect",
       ""),
    _e(88, "irdma_create_listen", "E",
       "CmCore.create_listen",
       ""),
    _e(89, "irdma_destroy_listen", "E",
       "CmCore.destroy_listen",
       ""),
    _e(90, "irdma_teardown_list_prep", "E/H", "mpa_emu.stacks.irdma.teardown.select_nodes", ""),
    _e(91, "irdma_cm_event_connected", "H/E",
       "mpa_emu.stacks.irdma.upcalls.event_connected "
       "mpa_emu.stacks.irdma.offload.qp.OffloadedQp.send_rtr",
       "offload, RTR, CONNECT_REPLY(0)"),
    _e(92, "irdma_cm_event_reset", "H", "mpa_emu.stacks.irdma.states.CmEventType",
       "by behaviour: dead in the kernel (IRDMA_CM_EVENT_RESET is never posted), so "
       "nothing calls it; the event type exists"),
    _e(93, "irdma_cm_event_handler", "E",
       "mpa_emu.stacks.irdma.upcalls.event_handler",
       ""),
    _e(94, "irdma_cm_post_event", "P",
       "mpa_emu.stacks.irdma.upcalls.create_event",
       "the ordered workqueue is the core's upcall queue (next_event)"),
    _e(95, "irdma_cm_teardown_connections", "E/H",
    "mpa_emu.stacks.irdma.teardown.teardown_connections",
       "missing NULL-QP check: Quirks.teardown_null_qp_oops"),
    _e(96, "irdma_qhash_ctrl", "P", "mpa_emu.stacks.irdma.teardown.qhash_ctrl",
       "the SYN steering rule of a wildcard child, toggled per address"),
    _e(97, "irdma_if_notify", "E/H",
       "mpa_emu.stacks.irdma.teardown.if_notify mpa_emu.stacks.irdma.teardown.notify_vlan",
       "lower-device VLAN: Quirks.if_notify_lower_dev"),
)


def resolve(path: str) -> Any:
    """Import ``path`` (``package.module.attr`` or ``package.module.Class.method``) and
    return the object; raise ``LookupError`` naming the path when it does not exist."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for name in parts[cut:]:
                obj = getattr(obj, name)
        except AttributeError:
            break
        return obj
    raise LookupError(f"{path} does not resolve")


def entry(function: str) -> KernelEntry:
    """The entry of one cm.c function (with or without the ``irdma_`` prefix)."""
    name = function if function.startswith("irdma_") else f"irdma_{function}"
    for e in ENTRIES:
        if e.function == name:
            return e
    raise KeyError(f"{function} is not a cm.c function")


def format_table(entries: tuple[KernelEntry, ...] = ENTRIES) -> str:
    """The map as an aligned text table, followed by counts per status."""
    width = max((len(e.function) for e in entries), default=len("function"))
    lines = [f"{'#':>3} {'function':<{width}} {'kind':<4} modelled by  (note)"]
    for e in entries:
        target = ", ".join(e.models) if e.models else "-"
        note = f"  ({e.note})" if e.note else ""
        lines.append(f"{e.number:>3} {e.function:<{width}} {e.kind:<4} {target}{note}")
    counts = {s: sum(1 for e in entries if e.status == s) for s in (MODELLED, PLUMBING, NOT_YET)}
    lines.append("")
    noun = "function" if len(entries) == 1 else "functions"
    lines.append(f"{len(entries)} {noun}: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
    lines.append(KIND_LEGEND)
    return "\n".join(lines) + "\n"


KIND_LEGEND = ("kind: E emulated (packet and state level), P plumbing (hardware or OS, kept "
               "another way), H hybrid (hand-off to the offloaded QP, upcalls), E/H both")
"""The last line of :func:`format_table`: what the letters of the kind column mean."""

