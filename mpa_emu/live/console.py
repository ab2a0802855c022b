"""What the emulated NIC did, one console line per event, as it happens.

The CM core and the disconnect path already describe every asynchronous event, every
Terminate and every move of the QP in trace records; :class:`ObservedTrace` hands each
record to an observer as it is emitted, and :func:`nic_line` turns the ones a person
watching a live run wants to see into one line:

* ``ae``: an AE the driver took from the AEQ (``irdma_process_aeq``), with the TCP and
  iWARP states the NIC reported;
* ``terminate``: the Terminate the driver asked the NIC to send
  (``irdma_terminate_connection``), with its Layer, EType and Error Code (RFC 5040
  section 4.8);
* ``terminate_received``: a Terminate from the peer (``irdma_terminate_received``);
* ``qp_modify``: the QP moved to CLOSING or ERROR, and whether that put a RST on the wire
  (``reset_tcp_conn`` with the NIC's TCP connection still alive);
* ``disconnect_decision``: ``irdma_cm_disconn_true``'s DISCONNECT and CLOSE upcalls;
* ``kernel_log``: what the driver would write to the kernel log (``(dyndbg)`` marks a
  line only seen with dynamic debug on).

The rdma_cm event of each upcall (:func:`rdma_cm_line`) is printed right after the
upcall's own line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import IO, Any

from mpa_emu.stacks.contract.trace import Trace, TraceRecord
from mpa_emu.ulp.rdma_cm import UlpStep
from mpa_emu.views.describe import log_label, rdma_cm_label

LAYERS = {0: "RDMAP", 1: "DDP", 2: "LLP/MPA"}
"""RFC 5040 section 4.8: the Layer nibble of a Terminate's control field."""


class ObservedTrace(Trace):
    """A :class:`~mpa_emu.stacks.contract.trace.Trace` that also calls ``observer(record)`` for
    every
    record, after keeping or streaming it."""

    def __init__(self, stream: IO[str] | None = None, keep: bool = True, *,
                 observer: Callable[[TraceRecord], None] | None = None) -> None:
        super().__init__(stream=stream, keep=keep)
        self.observer = observer

    def emit(self, record: TraceRecord) -> None:
        """Record one entry, then show it to the observer."""
        super().emit(record)
        if self.observer is not None:
            self.observer(record)


def _layer(layer: Any) -> str:
    return f"layer {layer} ({LAYERS.get(layer, 'unknown')})" if isinstance(layer, int) \
        else "layer ?"


def _hex(value: Any) -> str:
    return f"0x{value:02x}" if isinstance(value, int) else "?"


def nic_line(record: TraceRecord) -> str | None:
    """One console line for a record that says what the NIC or its driver did; ``None``
    for every other record."""
    f = record.fields
    head = f"t={record.time_ns / 1e9:.3f}s conn {f.get('conn')}"
    kind = record.kind
    if kind == "ae":
        return (f"{head} AE {f.get('ae')} (NIC: TCP {f.get('tcp_state')}, "
                f"iWARP {f.get('iwarp_state')})")
    if kind == "terminate":
        return (f"{head} Terminate sent for {f.get('ae')}: {_layer(f.get('layer'))}, "
                f"etype {f.get('etype')}, error code {_hex(f.get('error_code'))}")
    if kind == "terminate_received":
        layer_etype = f.get("layer_etype")
        layer = layer_etype >> 4 if isinstance(layer_etype, int) else None
        etype = layer_etype & 0x0F if isinstance(layer_etype, int) else "?"
        then = "the QP closes at once" if f.get("closes_now") else \
            "terminate timer started, FIN sent"
        return (f"{head} Terminate received: {_layer(layer)}, etype {etype}, "
                f"error code {_hex(f.get('error_code'))}; {then}")
    if kind == "qp_modify":
        if f.get("rst"):
            reset = ", RST sent"
        elif f.get("reset_tcp_conn"):
            reset = ", reset_tcp_conn (TCP already closed: no RST)"
        else:
            reset = ""
        return f"{head} QP to {f.get('target')} ({record.fn}){reset}"
    if kind == "kernel_log":
        return f"t={record.time_ns / 1e9:.3f}s {log_label(f)} ({record.fn})"
    if kind == "disconnect_decision" and (f.get("issue_disconn") or f.get("issue_close")):
        upcalls = [name for name, on in (("DISCONNECT", f.get("issue_disconn")),
                                         ("CLOSE", f.get("issue_close"))) if on]
        return (f"{head} QP closing: {' and '.join(upcalls)} (irdma_cm_disconn_true, "
                f"NIC TCP {f.get('hw_tcp_state')}, last AE {f.get('last_ae')})")
    return None


def rdma_cm_line(step: UlpStep) -> str:
    """``t=0.002s conn 1 => RDMA_CM_EVENT_REJECTED status -111 (-ECONNREFUSED)``: what
    the application gets from rdma_cm for the upcall just printed."""
    return (f"t={step.upcall.time_ns / 1e9:.3f}s conn {step.upcall.conn} "
            f"{rdma_cm_label(step.trace_fields())}")
