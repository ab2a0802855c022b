"""SMB Direct's negotiation on an emulated connection, between any two stacks.

:class:`SmbdServer` is a listener policy that answers as ksmbd does
(:mod:`mpa_emu.ulp.upper.ksmbd`): ``smb_direct_prepare_negotiation`` posts one receive
for the Negotiate Request, accepts (``smb_direct_accept_client``, with its IRD/ORD
private data on iWARP), then posts its other receives (``smb_direct_post_recv_credits``);
``smb_direct_prepare`` then waits for the request and answers it with the Negotiate
Response, the failed response, or a disconnect.

:class:`SmbdClient` is the initiator's side as cifs.ko runs it
(:mod:`mpa_emu.ulp.upper.cifs`): once rdma_cm reports the connection established,
``smbd_negotiate`` posts a receive for the response and sends the Negotiate Request as
the connection's first Send; ``process_negotiation_response`` checks the answer, and a
refused answer (or none in 120 s) ends in rdma_disconnect.

Both sides learn of a received Send from their host's receive completions
(:meth:`mpa_emu.net.host.Host.received_sends`), read as soon as a frame reaches the host.

    net = Network(seed=1)
    client = net.add_host("client", "192.0.2.1", stack="siw")
    server = net.add_host("server", "192.0.2.2", stack="cxgb4")
    server.listen(5445, policy=SmbdServer())
    conn = client.connect(server, 5445)
    smbd = SmbdClient().attach(client, conn)
    net.run()
    smbd.response  # the Negotiate Response, decoded
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mpa_emu.errors import ConfigError
from mpa_emu.net.host import Host
from mpa_emu.stacks.contract.events import IwEvent, Upcall
from mpa_emu.ulp.upper import cifs, ksmbd
from mpa_emu.ulp.upper.ksmbd import KsmbdLimits
from mpa_emu.wire.segment import Segment
from mpa_emu.wire.ulp.smbd import NegotiateRequest, NegotiateResponse


class _Receives:
    """Tells each watcher of a host when a frame has reached it (after the host's core
    took it), through the network's delivery tap, which it chains to."""

    def __init__(self, net: Any) -> None:
        self.net = net
        self.watchers: list[tuple[Host, Callable[[], bool]]] = []
        self.chained: Callable[[Host, bytes | Segment], None] | None = net.delivery_tap
        net.delivery_tap = self._tap

    def _tap(self, host: Host, data: bytes | Segment) -> None:
        if self.chained is not None:
            self.chained(host, data)
        if any(h is host for h, _ in self.watchers):
            # The tap runs before the core takes the frame: look once it has.
            self.net.after(0, self._check, host)

    def _check(self, host: Host) -> None:
        current, self.watchers = self.watchers, []
        kept = [(h, fn) for h, fn in current if h is not host or fn()]
        self.watchers = kept + self.watchers  # and those a watcher started meanwhile


def _watch(host: Host, fn: Callable[[], bool]) -> None:
    """Call ``fn`` after each frame reaches ``host`` (and once now) until it returns
    False. One :class:`_Receives` per network: the one its delivery tap already is."""
    net = host.net
    receives = getattr(getattr(net, "delivery_tap", None), "__self__", None)
    if not isinstance(receives, _Receives) or receives.net is not net:
        receives = _Receives(net)
    if fn():
        receives.watchers.append((host, fn))


_FIRST_LOOK_NS = 1_000_000
"""A wait's deadline is looked at after 1 ms, then ten times later each time (10 ms,
100 ms, ...) up to the deadline: a wait that ended early stops being looked at, so a
run with nothing left to do ends soon after it, not at the peer's 120-second timeout."""


def _deadline(net: Any, total_ns: int, over: Callable[[], bool],
              fire: Callable[[], None], start_ns: int | None = None,
              step_ns: int = _FIRST_LOOK_NS) -> None:
    """Call ``fire`` ``total_ns`` after now unless ``over()`` is true by then."""
    start = net.now_ns if start_ns is None else start_ns
    at = min(start + step_ns, start + total_ns)

    def look() -> None:
        if over():
            return
        if net.now_ns >= start + total_ns:
            fire()
        else:
            _deadline(net, total_ns, over, fire, start, step_ns * 10)

    net.at(at, look)


@dataclass
class _Waiting:
    """One side's wait for the peer's next Send on ``conn``: ``seen`` messages were
    there before; ``on_message`` takes the new one; ``done`` once it came or the wait
    ended."""

    host: Host
    conn: int
    on_message: Callable[[bytes], None]
    seen: int = 0
    done: bool = False
    on_gone: Callable[[], None] | None = None

    def __call__(self) -> bool:
        if self.done:
            return False
        if self.conn not in self.host.conns():
            self.done = True  # the connection went first
            if self.on_gone is not None:
                self.on_gone()
            return False
        messages = self.host.received_sends(self.conn)
        if len(messages) > self.seen:
            self.done = True
            self.on_message(messages[self.seen])
            return False
        return True


@dataclass
class SmbdServer:
    """Listener policy: an SMB Direct server with ksmbd's limits (:class:`KsmbdLimits`,
    transport_rdma.c's defaults) that accepts, waits for the Negotiate Request and
    answers it as ``smb_direct_prepare`` does (:func:`mpa_emu.ulp.upper.ksmbd.answer`).
    ``private_data`` is what the accept carries (ksmbd's IRD/ORD header by default);
    ``delay_ns`` delays the accept as the other policies do. ``answers`` records, per
    connection, what ksmbd decided."""

    limits: KsmbdLimits = field(default_factory=KsmbdLimits)
    private_data: bytes = ksmbd.ACCEPT_PRIVATE_DATA
    delay_ns: int = 0
    answers: dict[int, ksmbd.KsmbdAnswer] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.limits, KsmbdLimits):
            raise ConfigError(f"SmbdServer: limits must be KsmbdLimits, got {self.limits!r}")
        problem = self.limits.problem()
        if problem is not None:
            raise ConfigError(f"SmbdServer: {problem}")

    def __call__(self, host: Host, upcall: Upcall) -> None:
        """On the CONNECT_REQUEST ``upcall``: accept after ``delay_ns`` and negotiate."""
        host.net.after(self.delay_ns, self._accept, host, upcall.conn)

    def _accept(self, host: Host, conn: int) -> None:
        size = self.limits.max_receive_size
        # smb_direct_prepare_negotiation: the request's receive first, then rdma_accept.
        host.guarded("post_recv", host.post_recv, conn, size)
        refused = len(host.failures)
        host.guarded("accept", host.accept, conn, self.private_data)
        if any(f.verb == "accept" for f in host.failures[refused:]):
            return
        # smb_direct_post_recv_credits: every other receive of the pool.
        for _ in range(self.limits.receive_credit_max - 1):
            host.guarded("post_recv", host.post_recv, conn, size)
        waiting = _Waiting(host, conn, lambda data: self._request(host, conn, data))
        _watch(host, waiting)
        _deadline(host.net, ksmbd.NEGOTIATE_TIMEOUT_NS,
                  lambda: (conn in self.answers and not self.answers[conn].ignored)
                  or conn not in host.conns(),
                  lambda: self._timeout(host, conn, waiting))

    def _request(self, host: Host, conn: int, data: bytes) -> None:
        verdict = ksmbd.answer(data, self.limits)
        self.answers[conn] = verdict
        host.net.note(host.name, "smbd", "smb_direct_prepare", conn=conn, why=verdict.why)
        if verdict.ignored:
            # recv_done puts the request's buffer back empty; the receives posted since
            # are SMB_DIRECT_MSG_DATA_TRANSFER ones, so no later Send sets
            # negotiation_requested: smb_direct_prepare waits until its timeout.
            return
        if verdict.response is not None:
            host.guarded("post_send", host.post_send, conn, verdict.response)
        if verdict.disconnect:
            host.guarded("disconnect", host.disconnect, conn, graceful=True)

    def _timeout(self, host: Host, conn: int, waiting: _Waiting) -> None:
        waiting.done = True
        if conn in host.conns():
            host.net.note(host.name, "smbd", "smb_direct_prepare", conn=conn,
                          why="no negotiate request in SMB_DIRECT_NEGOTIATE_TIMEOUT: -ETIMEDOUT")
            host.guarded("disconnect", host.disconnect, conn, graceful=True)


@dataclass
class SmbdClient:
    """The SMB Direct client of one connection, as cifs.ko negotiates: ``request`` (cifs's
    defaults unless given) is sent as the first Send once the connection is
    established, and the answer is checked by ``process_negotiation_response``.
    ``response`` is the answer decoded (None until one came or when it is none),
    ``check`` the verdict, ``outcome`` one line of what happened."""

    request: NegotiateRequest = cifs.DEFAULT_REQUEST
    response: NegotiateResponse | None = None
    check: cifs.ResponseCheck | None = None
    outcome: str = "waiting for the connection"
    _host: Host | None = None
    _conn: int = -1

    def __post_init__(self) -> None:
        if not isinstance(self.request, NegotiateRequest):
            raise ConfigError(f"SmbdClient: request must be a NegotiateRequest, got "
                              f"{self.request!r}")

    def attach(self, host: Host, conn: int) -> SmbdClient:
        """Negotiate on ``host``'s connection ``conn`` (from ``host.connect``) once it is
        established (CONNECT_REPLY with status 0: RDMA_CM_EVENT_ESTABLISHED)."""
        if not isinstance(host, Host):
            raise ConfigError(f"SmbdClient.attach: expected a Host, got {host!r}")
        self._host, self._conn = host, conn
        host.on(self._established, IwEvent.CONNECT_REPLY)
        return self

    def _established(self, host: Host, up: Upcall) -> None:
        if up.conn != self._conn or self._host is not host:
            return
        if up.status != 0:
            self.outcome = f"the connection failed ({up.status}): no negotiation"
            return
        conn = self._conn
        # smbd_negotiate: the response's receive, then smbd_post_send_negotiate_req.
        host.guarded("post_recv", host.post_recv, conn, self.request.max_receive_size)
        host.guarded("post_send", host.post_send, conn, self.request.encode())
        self.outcome = "Negotiate Request sent, waiting for the response"
        waiting = _Waiting(host, conn, self._response, seen=len(host.received_sends(conn)),
                           on_gone=self._gone)
        _watch(host, waiting)
        _deadline(host.net, cifs.NEGOTIATE_TIMEOUT_NS,
                  lambda: waiting.done or conn not in host.conns(),
                  lambda: self._timeout(waiting))

    def _response(self, data: bytes) -> None:
        host = self._host
        assert host is not None
        self.response = NegotiateResponse.decode(data)
        self.check = cifs.check_response(data, self.request)
        host.net.note(host.name, "smbd", "process_negotiation_response", conn=self._conn,
                      ok=self.check.ok, why=self.check.why)
        if self.check.ok:
            self.outcome = "negotiated"
            return
        self.outcome = f"negotiation refused ({self.check.why}): disconnected"
        host.guarded("disconnect", host.disconnect, self._conn, graceful=True)

    def _gone(self) -> None:
        self.outcome = "the connection ended without a Negotiate Response"

    def _timeout(self, waiting: _Waiting) -> None:
        host = self._host
        assert host is not None
        waiting.done = True
        self.outcome = "no Negotiate Response in SMBD_NEGOTIATE_TIMEOUT: disconnected"
        host.guarded("disconnect", host.disconnect, self._conn, graceful=True)
