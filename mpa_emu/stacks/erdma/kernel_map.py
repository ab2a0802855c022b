"""Every function of ``drivers/infiniband/hw/erdma/erdma_cm.c`` and what models it here.

:data:`FUNCTIONS` is the file's function list in file order, as read at
:data:`KERNEL_VERSION`; :data:`KERNEL_MAP` gives each one the mpa_emu objects modelling
it (dotted paths) or says why nothing does: socket-callback bookkeeping, references,
work-element pools and locks have no packet-level behaviour. ``mpa-emu kernel-map
--stack erdma`` prints it; ``tests/stacks/test_kernel_maps.py`` keeps it complete.
"""

from __future__ import annotations

from mpa_emu.stacks.base import MODELLED, PLUMBING, KernelMap, MapEntry

KERNEL_VERSION = "6.19"
"""The mainline release whose erdma_cm.c the map was read from: kernel_bindconnect and
erdma_create_listen pass ``struct sockaddr_unsized`` to ``bind``, and erdma_accept and
erdma_proc_mpareply move the QP with erdma_modify_qp_state_iwarp (ERDMA_QPS_IWARP_*,
ERDMA_QPA_IWARP_CC). Earlier releases differ in those names only, not in the MPA rules
(docs/stacks/erdma.md, "Versions")."""

SOURCE = "drivers/infiniband/hw/erdma/erdma_cm.c"

FUNCTIONS: tuple[str, ...] = (
    "erdma_sk_assign_cm_upcalls", "erdma_sk_save_upcalls", "erdma_sk_restore_upcalls",
    "erdma_socket_disassoc", "erdma_cep_socket_assoc", "erdma_disassoc_listen_cep",
    "erdma_cep_alloc", "erdma_cm_free_work", "erdma_cancel_mpatimer", "erdma_put_work",
    "erdma_cep_set_inuse", "erdma_cep_set_free", "__erdma_cep_dealloc", "erdma_get_work",
    "erdma_cm_alloc_work", "erdma_cm_upcall", "erdma_qp_cm_drop", "erdma_cep_put",
    "erdma_cep_get", "erdma_send_mpareqrep", "ksock_recv", "__recv_mpa_hdr",
    "__mpa_rr_set_revision", "__mpa_rr_revision", "__mpa_ext_set_cc", "__mpa_ext_cc",
    "erdma_recv_mpa_rr", "erdma_proc_mpareq", "erdma_proc_mpareply",
    "erdma_accept_newconn", "erdma_newconn_connected", "erdma_cm_work_handler",
    "erdma_cm_queue_work", "erdma_cm_llp_data_ready", "erdma_cm_llp_error_report",
    "erdma_cm_llp_state_change", "kernel_bindconnect", "erdma_connect", "erdma_accept",
    "erdma_reject", "erdma_create_listen", "erdma_drop_listeners",
    "erdma_destroy_listen", "erdma_cm_init", "erdma_cm_exit",
)
"""Every function defined in erdma_cm.c, in file order (45)."""

_PREFIXES = {
    "core": "mpa_emu.stacks.erdma.core.ErdmaCore.",
    "base": "mpa_emu.stacks.erdma.base.ErdmaBase.",
    "mpa": "mpa_emu.stacks.erdma.mpa.ErdmaMpa.",
    "work": "mpa_emu.stacks.erdma.work.ErdmaWorkQueue.",
    "info": "mpa_emu.stacks.erdma.cep.MpaInfo.",
    "wire": "mpa_emu.wire.erdma_mpa.",
}


def _paths(models: str) -> tuple[str, ...]:
    """``core.x`` / ``base.x`` / ``mpa.x`` / ``work.x`` / ``info.x`` / ``wire.x`` are
    short for erdma's classes and wire module; anything else is a full dotted path."""
    out = []
    for m in models.split():
        head, _, rest = m.partition(".")
        out.append(_PREFIXES[head] + rest if head in _PREFIXES else m)
    return tuple(out)


def _m(function: str, models: str, note: str = "") -> MapEntry:
    return MapEntry(FUNCTIONS.index(function) + 1, function, "E", _paths(models), note,
                    MODELLED)


def _p(function: str, note: str, models: str = "") -> MapEntry:
    return MapEntry(FUNCTIONS.index(function) + 1, function, "P", _paths(models), note,
                    PLUMBING)


ENTRIES: tuple[MapEntry, ...] = (
    _p("erdma_sk_assign_cm_upcalls", "socket callbacks: the core routes every socket "
       "event of its TCP to the endpoint owning the socket", "work._socket_event"),
    _p("erdma_sk_save_upcalls", "the callbacks saved are the TCP model's own"),
    _p("erdma_sk_restore_upcalls", "nothing was replaced, so nothing to restore"),
    _p("erdma_socket_disassoc", "the socket leaves the core's socket table",
       "base._release_socket"),
    _p("erdma_cep_socket_assoc", "the socket joins the core's socket table",
       "core.connect core.create_listen"),
    _p("erdma_disassoc_listen_cep", "the endpoint forgets its listener (Cep.listen_cep)",
       "work._work"),
    _m("erdma_cep_alloc", "base._new_cep"),
    _p("erdma_cm_free_work", "work elements are entries of the core's work queue"),
    _m("erdma_cancel_mpatimer", "core.accept core.reject mpa._proc_mpareply work._release",
       "the endpoint's delayed-work deadline cleared"),
    _p("erdma_put_work", "work elements are entries of the core's work queue"),
    _p("erdma_cep_set_inuse", "locking: the core runs one call at a time"),
    _p("erdma_cep_set_free", "locking: the core runs one call at a time"),
    _p("__erdma_cep_dealloc", "reference drop: the endpoint leaves the core's tables",
       "base._forget"),
    _p("erdma_get_work", "work elements are entries of the core's work queue"),
    _p("erdma_cm_alloc_work", "the work queue has no fixed pool: its -ENOMEM is not "
       "modelled"),
    _m("erdma_cm_upcall", "base._upcall",
       "CONNECT_REQUEST: the device's max_ird/max_ord; other events IRD/ORD 0; private "
       "data as received (no block to hide)"),
    _m("erdma_qp_cm_drop", "work._qp_cm_drop core._modify_qp",
       "CONNECT_REPLY(-EINVAL) in AWAIT_MPAREP, CLOSE(0) in RDMA_MODE; the socket "
       "released"),
    _p("erdma_cep_put", "reference count: the core forgets an endpoint once released"),
    _p("erdma_cep_get", "reference count"),
    _m("erdma_send_mpareqrep", "mpa._send_mpareqrep wire.ErdmaFrame.to_bytes",
       "header, 8-byte extension PD_Length does not count, private data"),
    _p("ksock_recv", "a non-blocking kernel_recvmsg: bytes leave the socket's queue",
       "info.recv"),
    _m("__recv_mpa_hdr", "info.recv",
       "a short read is -EAGAIN; nothing at all (EOF) would be -ECONNABORTED"),
    _m("__mpa_rr_set_revision", "mpa._newconn_connected wire.build"),
    _m("__mpa_rr_revision", "info.recv core.reject"),
    _m("__mpa_ext_set_cc", "mpa._newconn_connected core.accept wire.build"),
    _m("__mpa_ext_cc", "mpa._modify_qp_rts wire.ErdmaFrame.cc"),
    _m("erdma_recv_mpa_rr", "info.recv",
       "reassembles over segments; revision 129 and PD_Length <= 256 checked once the "
       "20-byte header is in; 4+ bytes past the frame -EPROTO, 1-3 dropped (-EAGAIN)"),
    _m("erdma_proc_mpareq", "mpa._proc_mpareq"),
    _m("erdma_proc_mpareply", "mpa._proc_mpareply mpa._reply_err mpa._modify_qp_rts"),
    _m("erdma_accept_newconn", "work._accept_work work._accept_newconn",
       "AWAIT_MPAREQ with MPAREQ_TIMEOUT (20 s); an already queued request is read at "
       "once"),
    _m("erdma_newconn_connected", "mpa._newconn_connected",
       "the request, AWAIT_MPAREP, MPAREP_TIMEOUT (10 s)"),
    _m("erdma_cm_work_handler", "work._run_work work._work work._release "
       "work._qp_llp_close core.handle_timer",
       "CONNECTED, CONNECTTIMEOUT, ACCEPT, READ_MPAHDR, CLOSE_LLP, PEER_CLOSE, "
       "MPATIMEOUT, then release_cep"),
    _m("erdma_cm_queue_work", "base._queue_work",
       "MPAREP_TIMEOUT (10 s) in AWAIT_MPAREP, MPAREQ_TIMEOUT (20 s) otherwise, "
       "CONNECT_TIMEOUT (10 s)"),
    _m("erdma_cm_llp_data_ready", "work._data_ready"),
    _p("erdma_cm_llp_error_report", "calls the saved callback: no connection-manager "
       "behaviour"),
    _m("erdma_cm_llp_state_change", "work._socket_event",
       "TCP_ESTABLISHED: CONNECTED (CONNECTING) or ACCEPT; TCP_CLOSE / TCP_CLOSE_WAIT: "
       "PEER_CLOSE"),
    _m("kernel_bindconnect", "core.connect mpa_emu.stacks.tcp.TcpStack.connect",
       "non-blocking: -EINPROGRESS, the handshake goes on"),
    _m("erdma_connect", "core.connect"),
    _m("erdma_accept", "core.accept core._accept_error"),
    _m("erdma_reject", "core.reject"),
    _m("erdma_create_listen", "core.create_listen",
       "AF_INET only; a wildcard listen is bound to the device's netdev"),
    _m("erdma_drop_listeners", "core.destroy_listen"),
    _m("erdma_destroy_listen", "core.destroy_listen"),
    _p("erdma_cm_init", "module init: the core's work queue exists with the core"),
    _p("erdma_cm_exit", "module exit"),
)

LEGEND = ("kind: E emulated (packet and state level), P plumbing (socket callbacks, "
          "references, work pools and locks, kept another way)")

KERNEL_MAP = KernelMap(source=SOURCE, kernel_version=KERNEL_VERSION, functions=FUNCTIONS,
                       entries=ENTRIES, prefix="erdma_", legend=LEGEND, also=())
"""erdma's map, the registry's ``STACKS["erdma"].kernel_map``."""
