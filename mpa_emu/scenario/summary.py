"""A finished scenario run as JSON-ready values (``mpa-emu run --json``). The arrays that
grow with the run (frames, upcalls) are :class:`~mpa_emu.views.streamed_json.Rows`,
read from the run's records as they are written
(:func:`~mpa_emu.views.streamed_json.write_json`;
:func:`~mpa_emu.views.streamed_json.materialize` for plain lists)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mpa_emu.stacks import stack_label
from mpa_emu.stacks.contract.trace import TraceRecord
from mpa_emu.views.describe import errno_text
from mpa_emu.views.ladder import describe_frame
from mpa_emu.views.streamed_json import Rows
from mpa_emu.wire.addr import ip_text

if TYPE_CHECKING:
    from mpa_emu.scenario.runner import ScenarioRun
    from mpa_emu.stacks.contract.events import Upcall


def summary(run: ScenarioRun) -> dict[str, Any]:
    """Scenario, run outcome, expectations, upcalls (each with the rdma_cm event it gave,
    ``rdma_cm_events``, in the same order), verb failures and kernel log lines per host,
    frames."""
    sc = run.scenario
    hosts: dict[str, Any] = {}
    for name, host in run.net.hosts.items():
        hosts[name] = {
            "profile": host.config.profile if host.config is not None else None,
            "stack": stack_label(host.stack, host.params),
            "addresses": [ip_text(a) for a in host.addresses],
            "upcalls": Rows(host.upcalls, _upcall),
            "verb_failures": [{"t_ns": f.time_ns, "verb": f.verb, "errno": f.errno,
                               "errno_name": _errno_name(f.errno),
                               "message": f.message} for f in host.failures],
            "rdma_cm_events": [step.as_dict() for step in host.ulp_steps],
            "kernel_log": [dict(r.fields, t_ns=r.time_ns, fn=r.fn)
                           for r in _records(run, "kernel_log", name)],
            "nodes": {str(c): _state(host.node(c)) for c in host.conns()},
        }
    return {
        "scenario": sc.name, "file": sc.path, "seed": sc.seed, "ok": run.ok,
        "run": {"reason": run.result.reason, "events": run.result.events,
                "end_ns": run.result.now_ns},
        "expectations": [{"line": e.line, "what": e.what, "ok": e.ok, "actual": e.actual}
                         for e in run.expectations],
        "connections": {name: [{"host": r.host, "conn": r.conn} for r in recs]
                        for name, recs in run.connections.items()},
        "hosts": hosts,
        "frames": Rows(run.net.frames, describe_frame),
    }


def _upcall(u: Upcall) -> dict[str, Any]:
    return {"t_ns": u.time_ns, "event": u.event.name, "conn": u.conn,
            "status": u.status,
            "status_text": errno_text(u.status) if u.status else "0",
            "private_data": u.private_data.hex(),
            "private_data_len": u.private_data_len,
            "private_data_past_frame": u.private_data_past_frame,
            "ird": u.ird, "ord": u.ord,
            "local": f"{ip_text(u.local_ip)}:{u.local_port}",
            "remote": f"{ip_text(u.remote_ip)}:{u.remote_port}"}


def refusal_lines(run: ScenarioRun) -> list[str]:
    """One line per verb a host refused (a connect refused included), with the errno
    name and the message: ``alice: connect refused at 0.000000 s: EADDRNOTAVAIL: ...``."""
    out = []
    for name, host in run.net.hosts.items():
        for f in host.failures:
            errno_part = f"{_errno_name(f.errno)}: " if f.errno else ""
            out.append(f"{name}: {f.verb} refused at {f.time_ns / 1e9:.6f} s: "
                       f"{errno_part}{f.message}")
    return out


def _errno_name(number: int) -> str:
    return errno_text(-number).lstrip("-") if number else ""


def _records(run: ScenarioRun, kind: str, host: str) -> list[TraceRecord]:
    trace = run.net.trace
    if trace is None:
        return []
    return [r for r in trace.kept() if r.kind == kind and r.host == host]


def _state(view: object) -> str:
    if view is None:
        return "freed"
    state = getattr(view, "state", None)
    return str(getattr(state, "name", state))
