"""Every function of qedr's two connection-manager files and what models it here:
``drivers/infiniband/hw/qedr/qedr_iw_cm.c`` (the iw_cm provider) and
``drivers/net/ethernet/qlogic/qed/qed_iwarp.c`` (the qed half: the ramrods that hand the
connection to the firmware and the async events it raises).

An entry names the object (a dotted path) that models the function, or says why nothing
does: plumbing with no packet-level behaviour (references, address lookups, DMA buffers,
cid bitmaps, LL2 queues) or a path the model leaves out. :data:`FUNCTIONS` and
:data:`QED_FUNCTIONS` are the files' function lists as read at :data:`KERNEL_VERSION`;
``mpa-emu kernel-map --stack qedr`` prints :data:`KERNEL_MAP` and its ``also``,
:data:`QED_KERNEL_MAP`.
"""

from __future__ import annotations

from mpa_emu.stacks.base import MODELLED, NOT_YET, PLUMBING, KernelMap, MapEntry

KERNEL_VERSION = "5.8"
"""The mainline release both files were read at: qedr_iw_cm.c has the kref-counted
``qedr_iw_ep`` and the XArray ``dev->qps`` (qedr_iw_load_qp), QEDR_IWARP_CM_WAIT_FOR_*
flags and private data only in CONNECT_REPLY (qedr_iw_issue_event), all of 5.6 on; both
it and qed_iwarp.c (``smp_store_release(&ep->state, ...)`` paired with READ_ONCE in
qed_iwarp_destroy_qp) still carry the BSD licence text that 5.9 replaced with SPDX tags."""

SOURCE = "drivers/infiniband/hw/qedr/qedr_iw_cm.c"

FUNCTIONS: tuple[str, ...] = (
    "qedr_fill_sockaddr4", "qedr_fill_sockaddr6", "qedr_iw_free_qp", "qedr_iw_free_ep",
    "qedr_iw_mpa_request", "qedr_iw_issue_event", "qedr_iw_close_event", "qedr_iw_qp_event",
    "qedr_iw_disconnect_worker", "qedr_iw_disconnect_event", "qedr_iw_passive_complete",
    "qedr_iw_active_complete", "qedr_iw_mpa_reply", "qedr_iw_event_handler",
    "qedr_iw_get_vlan_ipv4", "qedr_iw_get_vlan_ipv6", "qedr_addr4_resolve",
    "qedr_addr6_resolve", "qedr_iw_load_qp", "qedr_iw_connect", "qedr_iw_create_listen",
    "qedr_iw_destroy_listen", "qedr_iw_accept", "qedr_iw_reject", "qedr_iw_qp_add_ref",
    "qedr_iw_qp_rem_ref", "qedr_iw_get_qp",
)
"""Every function defined in qedr_iw_cm.c, in file order (27)."""

_CM = "mpa_emu.stacks.qedr.qedr_iw_cm.QedrIwCm."
_CORE = "mpa_emu.stacks.qedr.core.QedrCore."

_ENTRIES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("qedr_fill_sockaddr4", (_CM + "_upcall",), "the event's addresses and ports"),
    ("qedr_fill_sockaddr6", (_CM + "_upcall",), "the same for IPv6"),
    ("qedr_iw_free_qp", (), "kref release"),
    ("qedr_iw_free_ep", (_CORE + "_release",), "the last reference: the ep and its cm_id go"),
    ("qedr_iw_mpa_request", (_CM + "qedr_iw_mpa_request",), ""),
    ("qedr_iw_issue_event", (_CM + "qedr_iw_issue_event", _CM + "_upcall"), ""),
    ("qedr_iw_close_event", (_CM + "qedr_iw_close_event",), ""),
    ("qedr_iw_qp_event", (_CM + "qedr_iw_qp_event",), "the IB event is traced"),
    ("qedr_iw_disconnect_worker", (_CM + "qedr_iw_disconnect_worker",), ""),
    ("qedr_iw_disconnect_event", (_CM + "qedr_iw_disconnect_event",),
     "queue_work on iwarp_wq: run in order after the event"),
    ("qedr_iw_passive_complete", (_CM + "qedr_iw_passive_complete",), ""),
    ("qedr_iw_active_complete", (_CM + "qedr_iw_active_complete",), ""),
    ("qedr_iw_mpa_reply", (_CM + "qedr_iw_mpa_reply",), ""),
    ("qedr_iw_event_handler", (_CM + "qedr_iw_event_handler",), ""),
    ("qedr_iw_get_vlan_ipv4", (), "VLAN of the local netdev: the core's address table"),
    ("qedr_iw_get_vlan_ipv6", (), "VLAN of the local netdev: the core's address table"),
    ("qedr_addr4_resolve", (_CORE + "set_neighbour",),
     "the neighbour lookup; an unresolved neighbour is not modelled as the kernel has it "
     "(rc stays 0 and the SYN goes to an unset MAC): the model refuses the connect"),
    ("qedr_addr6_resolve", (_CORE + "set_neighbour",), "as qedr_addr4_resolve"),
    ("qedr_iw_load_qp", (), "QP lookup and reference (the verbs take no QP number)"),
    ("qedr_iw_connect", (_CORE + "connect",
                         "mpa_emu.stacks.qedr.qed_iwarp.QedIwarp.qed_iwarp_connect"), ""),
    ("qedr_iw_create_listen", (_CORE + "create_listen",), ""),
    ("qedr_iw_destroy_listen", (_CORE + "destroy_listen",), ""),
    ("qedr_iw_accept", (_CORE + "accept", _CM + "qedr_iw_accept"), ""),
    ("qedr_iw_reject", (_CORE + "reject", _CM + "qedr_iw_reject"), ""),
    ("qedr_iw_qp_add_ref", (), "refcount"),
    ("qedr_iw_qp_rem_ref", (), "refcount"),
    ("qedr_iw_get_qp", (), "QP lookup for iw_cm (iw_cm_get_qp)"),
)

LEGEND = ("kind: E emulated (packet and state level), P plumbing (references, lookups), "
          "N a path the model leaves out (the note names it)")


def _entry(number: int, function: str, models: tuple[str, ...], note: str) -> MapEntry:
    if models:
        return MapEntry(number, function, "E", models, note, MODELLED)
    if "not modelled" in note:
        return MapEntry(number, function, "N", (), note, NOT_YET)
    return MapEntry(number, function, "P", (), note, PLUMBING)


QED_SOURCE = "drivers/net/ethernet/qlogic/qed/qed_iwarp.c"

QED_FUNCTIONS: tuple[str, ...] = (
    "qed_iwarp_init_devinfo", "qed_iwarp_init_hw", "qed_iwarp_cid_cleaned",
    "qed_iwarp_init_fw_ramrod", "qed_iwarp_alloc_cid", "qed_iwarp_set_tcp_cid",
    "qed_iwarp_alloc_tcp_cid", "qed_iwarp_create_qp", "qed_iwarp_modify_fw",
    "qed_roce2iwarp_state", "qed_iwarp2roce_state", "qed_iwarp_modify_qp",
    "qed_iwarp_fw_destroy", "qed_iwarp_destroy_ep", "qed_iwarp_destroy_qp",
    "qed_iwarp_create_ep", "qed_iwarp_print_tcp_ramrod", "qed_iwarp_tcp_offload",
    "qed_iwarp_mpa_received", "qed_iwarp_mpa_offload", "qed_iwarp_return_ep",
    "qed_iwarp_parse_private_data", "qed_iwarp_mpa_reply_arrived", "qed_iwarp_mpa_complete",
    "qed_iwarp_mpa_v2_set_private", "qed_iwarp_connect", "qed_iwarp_get_free_ep",
    "qed_iwarp_wait_cid_map_cleared", "qed_iwarp_wait_for_all_cids",
    "qed_iwarp_free_prealloc_ep", "qed_iwarp_prealloc_ep", "qed_iwarp_alloc",
    "qed_iwarp_resc_free", "qed_iwarp_accept", "qed_iwarp_reject", "qed_iwarp_print_cm_info",
    "qed_iwarp_ll2_post_rx", "qed_iwarp_ep_exists", "qed_iwarp_get_listener",
    "qed_iwarp_parse_rx_pkt", "qed_iwarp_get_curr_fpdu", "qed_iwarp_mpa_classify",
    "qed_iwarp_init_fpdu", "qed_iwarp_cp_pkt", "qed_iwarp_update_fpdu_length",
    "qed_iwarp_recycle_pkt", "qed_iwarp_win_right_edge", "qed_iwarp_send_fpdu",
    "qed_iwarp_mpa_get_data", "qed_iwarp_process_mpa_pkt", "qed_iwarp_process_pending_pkts",
    "qed_iwarp_ll2_comp_mpa_pkt", "qed_iwarp_ll2_comp_syn_pkt", "qed_iwarp_ll2_rel_rx_pkt",
    "qed_iwarp_ll2_comp_tx_pkt", "qed_iwarp_ll2_rel_tx_pkt", "qed_iwarp_ll2_slowpath",
    "qed_iwarp_ll2_stop", "qed_iwarp_ll2_alloc_buffers", "qed_iwarp_ll2_start",
    "qed_iwarp_setup", "qed_iwarp_stop", "qed_iwarp_qp_in_error",
    "qed_iwarp_exception_received", "qed_iwarp_tcp_connect_unsuccessful",
    "qed_iwarp_connect_complete", "qed_iwarp_check_ep_ok", "qed_iwarp_async_event",
    "qed_iwarp_create_listen", "qed_iwarp_destroy_listen", "qed_iwarp_send_rtr",
    "qed_iwarp_query_qp",
)
"""Every function defined in qed_iwarp.c, in file order (72; the forward declarations of
qed_iwarp_async_event and qed_iwarp_recycle_pkt are not definitions)."""

_QED = "mpa_emu.stacks.qedr.qed_iwarp.QedIwarp."
_FW = "mpa_emu.stacks.qedr.firmware.Firmware."
_P = "mpa_emu.stacks.qedr.params."
_ALIGN = ("not modelled: the driver's realignment of FPDUs that reach the LL2 MPA queue "
          "split or unaligned (the firmware's out-of-order and partial-FPDU path); the "
          "model's firmware reads whole FPDUs from the in-order stream (Firmware.fw_rdma_rx)")
_LL2 = "LL2 (light L2) queue buffers and callbacks: no packet of the connection's own"

_QED_ENTRIES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("qed_iwarp_init_devinfo", (_P + "QED_IWARP_ORD_DEFAULT", _P + "QED_IWARP_IRD_DEFAULT"),
     "the device's read resources, 32 each (what connect/accept check and a request is "
     "capped to); max_qp and max_inline are plumbing"),
    ("qed_iwarp_init_hw", (), "the parser's TCP search register"),
    ("qed_iwarp_cid_cleaned", (), "cid bitmap release"),
    ("qed_iwarp_init_fw_ramrod", (),
     "not modelled: tcp.max_fin_rt (QED_IWARP_MAX_FIN_RT_DEFAULT, 2): the firmware's FIN "
     "retransmission count; the shared TCP retransmits a FIN by its own timers"),
    ("qed_iwarp_alloc_cid", (), "cid allocation"),
    ("qed_iwarp_set_tcp_cid", (), "marks a preallocated cid in tcp_cid_map: no wire effect"),
    ("qed_iwarp_alloc_tcp_cid", (), "cid allocation for a passive ep"),
    ("qed_iwarp_create_qp", (), "create-QP ramrod: queues, PD, CQs (the QP starts IDLE)"),
    ("qed_iwarp_modify_fw", (_FW + "fw_modify_qp",),
     "MODIFY_QP ramrod: CLOSING is the firmware's FIN, ERROR its RST"),
    ("qed_roce2iwarp_state", (_CORE + "disconnect", _CORE + "modify_qp_err"),
     "the verbs' RTS/SQD/ERR as iWARP RTS/CLOSING/ERROR, which the core's verbs take"),
    ("qed_iwarp2roce_state", (), "ibv_query_qp's state name; the view shows the iWARP state"),
    ("qed_iwarp_modify_qp", (_QED + "qed_iwarp_modify_qp",), ""),
    ("qed_iwarp_fw_destroy", (), "destroy-QP ramrod"),
    ("qed_iwarp_destroy_ep", (), "frees the ep and its DMA buffer"),
    ("qed_iwarp_destroy_qp", (_CORE + "close",),
     "the QP to ERROR unless it is there; the wait of up to 200 x 100 ms for the ep to "
     "close is a sleep of the caller, not modelled"),
    ("qed_iwarp_create_ep", (_CORE + "_new_ep",), "the ep in INIT"),
    ("qed_iwarp_print_tcp_ramrod", (), "debug print"),
    ("qed_iwarp_tcp_offload", (_QED + "qed_iwarp_tcp_offload",
                               "mpa_emu.stacks.qedr.tcp.qed_shape"),
     "the ramrod's MSS, timestamps (TS_EN), delayed ACK (DA_EN), window scale, TTL: the "
     "firmware TCP's shape"),
    ("qed_iwarp_mpa_received", (_QED + "qed_iwarp_mpa_received",), ""),
    ("qed_iwarp_mpa_offload", (_QED + "qed_iwarp_mpa_offload", _FW + "fw_send_mpa"), ""),
    ("qed_iwarp_return_ep", (_QED + "qed_iwarp_return_ep",), ""),
    ("qed_iwarp_parse_private_data", (_QED + "qed_iwarp_parse_private_data",), ""),
    ("qed_iwarp_mpa_reply_arrived", (_QED + "qed_iwarp_mpa_reply_arrived",), ""),
    ("qed_iwarp_mpa_complete", (_QED + "qed_iwarp_mpa_complete",
                                "mpa_emu.stacks.qedr.qed_iwarp.MPA_COMPLETE_STATUS"), ""),
    ("qed_iwarp_mpa_v2_set_private", (_QED + "qed_iwarp_mpa_v2_set_private",
                                      "mpa_emu.stacks.qedr.frames.v2_block"), ""),
    ("qed_iwarp_connect", (_QED + "qed_iwarp_check_connect", _QED + "qed_iwarp_connect"), ""),
    ("qed_iwarp_get_free_ep", (_CORE + "_syn_checks",),
     "the free list's length ('Ep list is empty'); a cid allocation that fails is not"),
    ("qed_iwarp_wait_cid_map_cleared", (), "device teardown"),
    ("qed_iwarp_wait_for_all_cids", (), "device teardown"),
    ("qed_iwarp_free_prealloc_ep", (), "device teardown"),
    ("qed_iwarp_prealloc_ep", (_QED + "qed_iwarp_accept",),
     "the count only: each accept adds one ep back to the free list"),
    ("qed_iwarp_alloc", (_P + "QED_IWARP_PREALLOC_CNT",),
     "the 256 preallocated passive eps; the cid bitmap and OOO resources are plumbing"),
    ("qed_iwarp_resc_free", (), "device teardown"),
    ("qed_iwarp_accept", (_QED + "qed_iwarp_accept",), ""),
    ("qed_iwarp_reject", (_QED + "qed_iwarp_reject",), ""),
    ("qed_iwarp_print_cm_info", (), "debug print"),
    ("qed_iwarp_ll2_post_rx", (), _LL2),
    ("qed_iwarp_ep_exists", (_CORE + "_syn_checks",),
     "a SYN on an ep's 4-tuple is dropped ('SYN received on active connection')"),
    ("qed_iwarp_get_listener", (_CORE + "qed_iwarp_ll2_comp_syn_pkt",
                                "mpa_emu.stacks.qedr.tcp.QedTcp._no_socket"),
     "the port with a wildcard or the exact address: the TCP listener the SYN found; "
     "none found: the SYN goes back to the host"),
    ("qed_iwarp_parse_rx_pkt", (),
     "the SYN's Ethernet, IP and TCP headers read into cm_info; the model's SYN arrives "
     "parsed (a Segment)"),
    ("qed_iwarp_get_curr_fpdu", (), _ALIGN),
    ("qed_iwarp_mpa_classify", (), _ALIGN),
    ("qed_iwarp_init_fpdu", (), _ALIGN),
    ("qed_iwarp_cp_pkt", (), _ALIGN),
    ("qed_iwarp_update_fpdu_length", (), _ALIGN),
    ("qed_iwarp_recycle_pkt", (), _ALIGN),
    ("qed_iwarp_win_right_edge", (), _ALIGN),
    ("qed_iwarp_send_fpdu", (), _ALIGN),
    ("qed_iwarp_mpa_get_data", (), _ALIGN),
    ("qed_iwarp_process_mpa_pkt", (), _ALIGN),
    ("qed_iwarp_process_pending_pkts", (), _ALIGN),
    ("qed_iwarp_ll2_comp_mpa_pkt", (), _ALIGN),
    ("qed_iwarp_ll2_comp_syn_pkt", (_CORE + "qed_iwarp_ll2_comp_syn_pkt",
                                    _CORE + "_syn_checks"),
     "a SYN nobody listens on goes back to the host's TCP (QED_LL2_TX_DEST_LB)"),
    ("qed_iwarp_ll2_rel_rx_pkt", (), _LL2),
    ("qed_iwarp_ll2_comp_tx_pkt", (), _LL2),
    ("qed_iwarp_ll2_rel_tx_pkt", (), _LL2),
    ("qed_iwarp_ll2_slowpath", (), _ALIGN),
    ("qed_iwarp_ll2_stop", (), _LL2),
    ("qed_iwarp_ll2_alloc_buffers", (), _LL2),
    ("qed_iwarp_ll2_start", (), _LL2),
    ("qed_iwarp_setup", (_P + "PARAMS",),
     "tcp_flags (TS_EN only), the receive window and its scale, crc_needed, mpa_rev, "
     "peer2peer, rtr_type: the stack's parameters"),
    ("qed_iwarp_stop", (), "device teardown"),
    ("qed_iwarp_qp_in_error", (_QED + "qed_iwarp_qp_in_error",), ""),
    ("qed_iwarp_exception_received", (_QED + "qed_iwarp_exception_received",), ""),
    ("qed_iwarp_tcp_connect_unsuccessful", (_QED + "qed_iwarp_tcp_connect_unsuccessful",
                                            "mpa_emu.stacks.qedr.qed_iwarp."
                                            "TCP_CONNECT_STATUS"), ""),
    ("qed_iwarp_connect_complete", (_QED + "qed_iwarp_connect_complete",), ""),
    ("qed_iwarp_check_ep_ok", (), "the async handle's signature check"),
    ("qed_iwarp_async_event", (_FW + "fw_tcp_event",),
     "the firmware model raises each event (which one, which return code) by calling "
     "its handler; SRQ and CQ events are not in the connection's life"),
    ("qed_iwarp_create_listen", (_CORE + "create_listen",), ""),
    ("qed_iwarp_destroy_listen", (_CORE + "destroy_listen",), ""),
    ("qed_iwarp_send_rtr", (_QED + "qed_iwarp_send_rtr", _FW + "fw_send_rtr"), ""),
    ("qed_iwarp_query_qp", (_CORE + "qp_state",), ""),
)

QED_KERNEL_MAP = KernelMap(
    source=QED_SOURCE, kernel_version=KERNEL_VERSION, functions=QED_FUNCTIONS,
    entries=tuple(_entry(QED_FUNCTIONS.index(f) + 1, f, m, n) for f, m, n in _QED_ENTRIES),
    prefix="qed_iwarp_", legend=LEGEND, also=())
"""qed_iwarp.c's map, the second file of qedr's (``KERNEL_MAP.also``)."""

KERNEL_MAP = KernelMap(
    source=SOURCE, kernel_version=KERNEL_VERSION, functions=FUNCTIONS,
    entries=tuple(_entry(FUNCTIONS.index(f) + 1, f, m, n) for f, m, n in _ENTRIES),
    prefix="qedr_", legend=LEGEND, also=(QED_KERNEL_MAP,))
"""qedr's map, the registry's ``STACKS["qedr"].kernel_map``: qedr_iw_cm.c, then
qed_iwarp.c."""
