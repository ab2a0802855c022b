"""Every function of ``drivers/infiniband/hw/qedr/qedr_iw_cm.c`` and what models it here.

An entry names the object (a dotted path) that models the function, or says why nothing
does: plumbing with no packet-level behaviour (references, address lookups) or a path the
model leaves out. :data:`FUNCTIONS` is the file's function list as read at
:data:`KERNEL_VERSION`; ``mpa-emu kernel-map --stack qedr`` prints :data:`KERNEL_MAP`.
The qed_iwarp.c functions the connection runs through are listed, each with its model,
in docs/stacks/qedr.md (the map has one source file).
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


KERNEL_MAP = KernelMap(
    source=SOURCE, kernel_version=KERNEL_VERSION, functions=FUNCTIONS,
    entries=tuple(_entry(FUNCTIONS.index(f) + 1, f, m, n) for f, m, n in _ENTRIES),
    prefix="qedr_", legend=LEGEND)
"""qedr's map, the registry's ``STACKS["qedr"].kernel_map``."""
