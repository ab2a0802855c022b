"""The connections a scenario names: the active opens its ``[[connect]]`` entries made,
and how their peer nodes are found on another host."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from mpa_emu.net import Host, Network, RunResult
from mpa_emu.scenario.model import Scenario


@dataclass
class ConnRecord:
    """One active open made by a ``[[connect]]`` entry: its host, id, and the 4-tuple
    noted when it was created (so its peer node can be found later)."""

    host: str
    conn: int
    local_ip: bytes | None = None
    local_port: int | None = None
    remote_ip: bytes | None = None
    remote_port: int | None = None


class RunLike(Protocol):
    """What the expectations read of a run (:class:`mpa_emu.scenario.runner.ScenarioRun`)."""

    @property
    def scenario(self) -> Scenario:
        """The scenario that ran."""

    @property
    def net(self) -> Network:
        """The network after the run."""

    @property
    def result(self) -> RunResult:
        """Why the run stopped."""

    @property
    def connections(self) -> dict[str, list[ConnRecord]]:
        """The named active opens."""

    @property
    def listeners(self) -> dict[str, tuple[str, int]]:
        """The named listeners: (host, listener id)."""


def conn_ids(run: RunLike, name: str, host: str) -> list[int]:
    """The ids of the named connections on ``host``: their own ids on the connecting
    host, the peer nodes' ids (found by 4-tuple, then by CONNECT_REQUEST upcall) on
    another host."""
    out: list[int] = []
    target = run.net.host(host)
    for rec in run.connections.get(name, []):
        if rec.host == host:
            out.append(rec.conn)
            continue
        peer = peer_conn(target, rec)
        if peer is not None:
            out.append(peer)
    return out


def peer_conn(target: Host, rec: ConnRecord) -> int | None:
    """The node on ``target`` at the other end of ``rec``."""
    if rec.local_port is None:
        return None
    for conn in target.conns():
        view = target.node(conn)
        if view is None:
            continue
        if (getattr(view, "rem_port", None) == rec.local_port
                and getattr(view, "loc_port", None) == rec.remote_port
                and getattr(view, "rem_addr", None) == rec.local_ip):
            return conn
    for up in target.upcalls:
        if (up.remote_port == rec.local_port and up.local_port == rec.remote_port
                and up.remote_ip == rec.local_ip):
            return up.conn
    return None
