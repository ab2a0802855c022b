"""Every function of ``drivers/infiniband/sw/siw/siw_cm.c`` and what models it here.

:data:`FUNCTIONS` is the file's function list in file order, as read at
:data:`KERNEL_VERSION`; :data:`KERNEL_MAP` gives each one the mpa_emu objects modelling
it (dotted paths) or says why nothing does: socket-callback bookkeeping, references,
work-element pools and locks have no packet-level behaviour, and their guarantee (one
handler at a time, no leaked endpoint) is the core's. ``mpa-emu kernel-map --stack siw``
prints it; ``tests/stacks/test_kernel_maps.py`` keeps it complete and true.
"""

from __future__ import annotations

from mpa_emu.stacks.base import MODELLED, PLUMBING, KernelMap, MapEntry

KERNEL_VERSION = "5.7"
"""The mainline release whose siw_cm.c the map was read from: the file still calls
``kernel_setsockopt`` (SO_REUSEADDR, TCP_NODELAY), which Linux 5.8 removed, and has
``siw_rtr_data_ready`` and the per-address ``siw_listen_address`` loop of
``siw_create_listen``. Its connection manager is the one docs/stacks/siw.md describes."""

SOURCE = "drivers/infiniband/sw/siw/siw_cm.c"

FUNCTIONS: tuple[str, ...] = (
    "siw_sk_assign_cm_upcalls", "siw_sk_save_upcalls", "siw_sk_restore_upcalls",
    "siw_qp_socket_assoc", "siw_socket_disassoc", "siw_rtr_data_ready",
    "siw_sk_assign_rtr_upcalls", "siw_cep_socket_assoc", "siw_cep_alloc",
    "siw_cm_free_work", "siw_cancel_mpatimer", "siw_put_work", "siw_cep_set_inuse",
    "siw_cep_set_free", "__siw_cep_dealloc", "siw_get_work", "siw_cm_alloc_work",
    "siw_cm_upcall", "siw_qp_cm_drop", "siw_cep_put", "siw_cep_get",
    "siw_send_mpareqrep", "siw_recv_mpa_rr", "siw_proc_mpareq", "siw_proc_mpareply",
    "siw_accept_newconn", "siw_cm_work_handler", "siw_cm_queue_work",
    "siw_cm_llp_data_ready", "siw_cm_llp_write_space", "siw_cm_llp_error_report",
    "siw_cm_llp_state_change", "kernel_bindconnect", "siw_connect", "siw_accept",
    "siw_reject", "siw_listen_address", "siw_drop_listeners", "siw_create_listen",
    "siw_destroy_listen", "siw_cm_init", "siw_cm_exit",
)
"""Every function defined in siw_cm.c, in file order (42)."""

_CORE = "mpa_emu.stacks.siw.core.SiwCore."
_BASE = "mpa_emu.stacks.siw.base.SiwBase."
_MPA = "mpa_emu.stacks.siw.mpa_rules.SiwMpa."
_QP = "mpa_emu.stacks.siw.qp.SiwQp."

_PREFIXES = {"core": _CORE, "base": _BASE, "mpa": _MPA, "qp": _QP}


def _paths(models: str) -> tuple[str, ...]:
    """``core.x`` / ``base.x`` / ``mpa.x`` / ``qp.x`` are short for the siw classes'
    methods; anything else is a full dotted path."""
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
    _p("siw_sk_assign_cm_upcalls", "socket callbacks: the core routes every socket event "
       "of its TCP to the endpoint owning the socket", "core._socket_event"),
    _p("siw_sk_save_upcalls", "the callbacks saved are the TCP model's own; nothing to "
       "save"),
    _p("siw_sk_restore_upcalls", "nothing was replaced, so nothing to restore"),
    _m("siw_qp_socket_assoc", "core._data_ready qp._qp_rx",
       "in RDMA_MODE the socket's bytes go to the QP's receive path"),
    _p("siw_socket_disassoc", "the socket leaves the core's socket table",
       "base._release_socket"),
    _m("siw_rtr_data_ready", "qp._qp_rx",
       "the first read that does not fail gives ESTABLISHED (responder awaiting the RTR)"),
    _m("siw_sk_assign_rtr_upcalls", "core.accept",
       "set when the reply picked an RTR: the endpoint waits for it (Cep.wait_rtr)"),
    _p("siw_cep_socket_assoc", "the socket joins the core's socket table",
       "core.connect core.create_listen"),
    _m("siw_cep_alloc", "base._new_cep", "with its \"new endpoint\" debug line"),
    _p("siw_cm_free_work", "work elements are entries of the core's work queue; "
       "nothing to free"),
    _m("siw_cancel_mpatimer", "core.accept core.reject mpa._proc_mpareply core._release",
       "the endpoint's MPA deadline cleared"),
    _p("siw_put_work", "work elements are entries of the core's work queue"),
    _p("siw_cep_set_inuse", "locking: the core runs one call at a time"),
    _p("siw_cep_set_free", "locking: the core runs one call at a time"),
    _p("__siw_cep_dealloc", "reference drop: the endpoint leaves the core's tables",
       "base._forget"),
    _p("siw_get_work", "work elements are entries of the core's work queue"),
    _p("siw_cm_alloc_work", "the work queue has no fixed pool: its -ENOMEM is not "
       "modelled"),
    _m("siw_cm_upcall", "base._upcall",
       "IRD/ORD (swapped for CONNECT_REQUEST), private data without the RFC 6581 block"),
    _m("siw_qp_cm_drop", "qp._cm_drop qp._apply",
       "schedule 0: at once (CONNECT_REPLY(-EINVAL) or CLOSE); 1: SIW_CM_WORK_CLOSE_LLP"),
    _p("siw_cep_put", "reference count: the core forgets an endpoint once released"),
    _p("siw_cep_get", "reference count"),
    _m("siw_send_mpareqrep", "mpa._send_mpareqrep"),
    _m("siw_recv_mpa_rr", "mpa_emu.stacks.mpa_stream.FrameReader.step mpa._recv_log",
       "reassembles over segments; extra bytes after the frame are -EPROTO"),
    _m("siw_proc_mpareq", "mpa._proc_mpareq"),
    _m("siw_proc_mpareply", "mpa._proc_mpareply mpa._reply_err"),
    _m("siw_accept_newconn", "core._accept_work core._accept_newconn",
       "AWAIT_MPAREQ with MPAREP_TIMEOUT; an already queued request is read at once"),
    _m("siw_cm_work_handler", "core._run_work core._work core._release",
       "READ_MPAHDR, CLOSE_LLP, PEER_CLOSE and MPATIMEOUT, then release_cep"),
    _m("siw_cm_queue_work", "core._queue_mpa_timer",
       "the work queue in order; MPAREQ_TIMEOUT (10 s) awaiting the reply, "
       "MPAREP_TIMEOUT (5 s) otherwise"),
    _m("siw_cm_llp_data_ready", "core._data_ready"),
    _p("siw_cm_llp_write_space", "a debug line only: no connection-manager behaviour"),
    _p("siw_cm_llp_error_report", "a debug line and the saved callback: no "
       "connection-manager behaviour"),
    _m("siw_cm_llp_state_change", "core._socket_event",
       "TCP_ESTABLISHED on a listener: ACCEPT work; TCP_CLOSE / TCP_CLOSE_WAIT: "
       "PEER_CLOSE work"),
    _m("kernel_bindconnect", "core.connect mpa_emu.stacks.tcp.TcpStack.connect",
       "a failed connect is logged as kernel_bindconnect's error"),
    _m("siw_connect", "core.connect core._connected"),
    _m("siw_accept", "core.accept core._accept_error"),
    _m("siw_reject", "core.reject"),
    _m("siw_listen_address", "core.create_listen",
       "one listening socket bound to the wildcard or the address"),
    _m("siw_drop_listeners", "core.destroy_listen"),
    _m("siw_create_listen", "core.create_listen",
       "a wildcard listen is one socket here, where the kernel binds one per interface "
       "address: the same ports answer"),
    _m("siw_destroy_listen", "core.destroy_listen"),
    _p("siw_cm_init", "module init: the core's work queue exists with the core"),
    _p("siw_cm_exit", "module exit"),
)

LEGEND = ("kind: E emulated (packet and state level), P plumbing (socket callbacks, "
          "references, work pools and locks, kept another way)")

KERNEL_MAP = KernelMap(source=SOURCE, kernel_version=KERNEL_VERSION, functions=FUNCTIONS,
                       entries=ENTRIES, prefix="siw_", legend=LEGEND, also=())
"""siw's map, the registry's ``STACKS["siw"].kernel_map``."""
