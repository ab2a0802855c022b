"""The whole recording as the replay's frame source (:class:`RecordingSource`): every
frame and every scripted verb of the application in one timeline, in capture order."""

from __future__ import annotations

from mpa_emu.replay.engine import AppAction, Engine, FlowRun, connection_starts
from mpa_emu.replay.recording import Frame, Recording, offload_classes
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.wire.flow import FlowKey, flow_key, flow_vlan
from mpa_emu.wire.mpa import mpa_kind
from mpa_emu.wire.segment import ACK, FIN, RST, SYN


class RecordingSource:
    """The whole recording as the frame source: every frame and every scripted verb in
    one timeline, and the recording's answers looked up directly."""

    def __init__(self, rec: Recording) -> None:
        self.rec = rec
        self.flows: dict[FlowKey, FlowRun] = {
            key: FlowRun(key, [f.seg.seq for f in connection_starts(flow.frames)])
            for key, flow in rec.flows.items()}
        self.by_ports: dict[tuple[int, bytes, int], FlowKey] = {
            (k[1], k[2], k[3]): k for k in rec.flows}
        self._by_number: dict[int, Frame] = {f.number: f for f in rec.frames}
        self._answer_times: dict[FlowKey, list[int]] = {}

    def setup(self, engine: Engine) -> None:
        """The address, the recorded neighbours, a listener on every port a SYN reaches."""
        rec, core = self.rec, engine.core
        core.add_address(rec.ip, vlan=rec.vlan, now_ns=0)
        for ip, mac in sorted(rec.neighbours.items()):
            core.set_neighbour(ip, mac)
        ports: dict[tuple[int, int | None], None] = {}
        for flow in rec.flows.values():
            for f in flow.frames:
                if not f.outbound and f.seg.flags & SYN and not f.seg.flags & ACK:
                    ports[(flow.key[1], flow_vlan(flow.key))] = None
                    break
        backlog = engine.opt.backlog
        for port, vlan in ports:
            try:
                core.create_listen(rec.ip, port, backlog=backlog, ipv6=rec.ipv6,
                                   vlan=vlan, now_ns=0)
                engine.actions.append(AppAction(0, 0, "listen",
                                                flow_key(rec.ip, port, b"", 0, vlan),
                                                f"port {port} backlog {backlog}"))
            except CmError as exc:
                engine.notes.append(f"listen on port {port} refused: {exc}")

    def _script(self, engine: Engine | None = None) -> list[tuple[int, int, int, str, FlowKey]]:
        """Timeline: (time, frame number, order, what, flow) for every recorded frame and
        every scripted verb, in capture order; with an ``engine`` whose application issues
        RDMA Reads, the recorded host's Read Requests too."""
        plans = engine.plan_of if engine is not None and engine.issues_reads() else None
        frames_by_number = self._by_number
        items: list[tuple[int, int, int, str, FlowKey]] = []
        for f in self.rec.frames:
            items.append((f.time_ns, f.number, 1, "frame", f.flow))
        for key, flow in self.rec.flows.items():
            # One connect per connection the recorded host opened (port reuse included;
            # a v2 to v1 retry SYN belongs to the same connection).
            for f in connection_starts(flow.frames):
                if not f.seg.flags & ACK:
                    items.append((f.time_ns, f.number, 0, "connect", key))
            if not flow.active:
                # One answer per MPA reply or reject (the NIC's resends share the seq).
                answered: set[int] = set()
                for f in flow.frames:
                    if f.outbound and f.seg.seq not in answered and mpa_kind(
                            f.seg.payload) in ("reply", "reject"):
                        answered.add(f.seg.seq)
                        self._answer_times.setdefault(key, []).append(f.time_ns)
                        items.append((f.time_ns, f.number, 0, "answer", key))
            if plans is not None:
                # The recorded host's RDMA Read Requests, issued again where it sent them.
                for number in sorted({r.frame for r in plans(key).reads}):
                    f = frames_by_number[number]
                    items.append((f.time_ns, number, 0, "read", key))
            closing = _first_nic_close(flow.frames)
            if closing is not None:
                items.append((closing.time_ns, closing.number, 0, "disconnect", key))
        items.sort(key=lambda it: (it[0], it[1], it[2]))
        return items

    def play(self, engine: Engine) -> None:
        """Every frame and verb of the timeline, then the timers up to the horizon."""
        frames_by_number = self._by_number
        items = self._script(engine)
        total = len(self.rec.frames)
        progress = engine.progress
        done = 0
        due: int | None = None
        due_known = False  # the core has not been called since ``due`` was read
        for time_ns, number, _order, what, key in items:
            frame = frames_by_number[number]
            due = engine.catch_up(time_ns, due, due_known,
                                  inbound=what == "frame" and not frame.outbound)
            due_known = True
            if what == "frame":
                engine.position = number
                done += 1
                if progress is not None and done % 2048 == 0:
                    progress(done, total)
                if frame.outbound:
                    continue  # a checkpoint only: the timers up to it have run
                engine.inject(frame)
            else:
                engine.run_verb(what, key, frame)
            due_known = False
        engine.position = max((f.number for f in self.rec.frames), default=0)
        engine.advance(self.rec.end_ns + engine.opt.horizon_ns)

    def recorded_isn(self, lport: int, remote: bytes, rport: int) -> int | None:
        """The ISN of the recorded host's next SYN or SYN-ACK on these ports."""
        key = self.by_ports.get((lport, remote, rport))
        run = self.flows.get(key) if key is not None else None
        return run.peek_isn() if run is not None else None

    def first_outbound_seq(self, key: FlowKey) -> int | None:
        """The seq of the first frame the recorded host sent in the flow, if any."""
        flow = self.rec.flows.get(key)
        if flow is None:
            return None
        return next((f.seg.seq for f in flow.frames if f.outbound), None)

    def recorded_request(self, key: FlowKey, number: int) -> Frame | None:
        """The first MPA request the recorded host sent in the flow after ``number``."""
        return next((f for f in self.rec.flows[key].frames if f.outbound
                     and f.number > number and mpa_kind(f.seg.payload) == "request"), None)

    def answer_pending(self, key: FlowKey, now: int) -> bool:
        """True when the recording still holds an answer of this flow's host to come."""
        return any(t >= now for t in self._answer_times.get(key, ()))

    def flow_of(self, ports: tuple[int, bytes, int]) -> FlowKey | None:
        """The recorded flow on these ports."""
        return self.by_ports.get(ports)

    def sending_flow(self, key: FlowKey) -> FlowRun:
        """The flow, made when the capture has none on these addresses and ports."""
        run = self.flows.get(key)
        if run is None:
            run = self.flows[key] = FlowRun(key, [])
        return run


def _first_nic_close(frames: list[Frame]) -> Frame | None:
    classes = offload_classes([(f.outbound, f.seg) for f in frames])
    for f, nic in zip((f for f in frames if f.outbound), classes, strict=True):
        if nic and f.seg.flags & (FIN | RST):
            return f
    return None
