"""The live-test lab: a private network namespace holding the kernel's side of a
TAP device, whose file descriptor (the emulated host's side) stays in the test process.

Only documentation addresses are used (192.0.2.0/24, 2001:db8::/32), inside namespaces
the tests create and delete. Every wait is bounded.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from mpa_emu.stacks.contract.trace import Trace, TraceRecord
from mpa_emu.stacks.irdma.config import CmConfig

from mpa_emu.live.driver import FaultHook, LiveHost
from mpa_emu.live.netns import Namespace, entered
from mpa_emu.live.sinks import MemorySink, SeenFrame
from mpa_emu.live.tap import Tap, link_mac
from mpa_emu.wire import codec
from mpa_emu.wire.addr import ip_bytes, mac_bytes
from mpa_emu.wire.segment import Segment

TAP_NAME = "mpatap0"
KERNEL_V4, EMU_V4 = "192.0.2.1", "192.0.2.2"
KERNEL_V6, EMU_V6 = "2001:db8::1", "2001:db8::2"
EMU_MAC = mac_bytes("02:00:00:00:00:02")

_names = itertools.count()


@dataclass
class Lab:
    """One namespace with the kernel end of a TAP; ``tap`` is the emulated host's end."""

    ns: Namespace
    tap: Tap
    kernel_mac: bytes

    def in_kernel(self, fn: Callable[..., Any], *args: Any) -> KernelThread:
        """Run ``fn(*args)`` in a thread inside the namespace (the kernel's side)."""
        thread = KernelThread(self.ns.name, fn, args)
        thread.start()
        return thread


class KernelThread(threading.Thread):
    """A thread whose sockets belong to the lab namespace; :meth:`result` re-raises."""

    def __init__(self, ns: str, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        super().__init__(daemon=True)
        self._ns, self._fn, self._args = ns, fn, args
        self._value: Any = None
        self._error: BaseException | None = None

    def run(self) -> None:
        try:
            with entered(self._ns):
                self._value = self._fn(*self._args)
        except BaseException as exc:  # handed to the test thread by result()
            self._error = exc

    def result(self, timeout: float = 10.0) -> Any:
        self.join(timeout)
        assert not self.is_alive(), f"kernel-side thread still running after {timeout} s"
        if self._error is not None:
            raise self._error
        return self._value


def make_lab() -> Iterator[Lab]:
    """Create the namespace and TAP, yield the lab, remove both (generator for fixtures)."""
    ns = Namespace(f"mpaemu{os.getpid()}n{next(_names)}")
    try:
        with entered(ns.name):
            tap = Tap(TAP_NAME)
            kernel_mac = link_mac(TAP_NAME)
        try:
            ns.ip("link", "set", TAP_NAME, "up")
            ns.ip("addr", "add", f"{KERNEL_V4}/24", "dev", TAP_NAME)
            ns.ip("addr", "add", f"{KERNEL_V6}/64", "dev", TAP_NAME, "nodad")
            yield Lab(ns, tap, kernel_mac)
        finally:
            tap.close()
    finally:
        ns.close()


def packed(text: str) -> bytes:
    """Packed address from text."""
    return ip_bytes(text)


@dataclass
class EmulatedHost:
    """A LiveHost on the lab's TAP with its capture and trace kept in memory."""

    host: LiveHost
    capture: MemorySink
    trace: Trace

    def segments(self, direction: str) -> list[tuple[SeenFrame, Segment]]:
        """Captured TCP frames sent ("tx") or received ("rx") by the emulated host."""
        out = []
        for frame in self.capture.frames:
            try:
                seg = codec.decode(frame.data)
            except codec.DecodeError:
                continue
            if (seg.src_mac == EMU_MAC) == (direction == "tx"):
                out.append((frame, seg))
        return out

    def dropped(self, reason_part: str) -> list[TraceRecord]:
        """Trace records of dropped segments whose reason mentions ``reason_part``."""
        return [r for r in self.trace.of_kind("segment_dropped")
                if reason_part in str(r.fields.get("reason", ""))]


def make_host(lab: Lab, *, fault: FaultHook | None = None, seed: int = 1,
              v6: bool = False, config: CmConfig | None = None, stack: str = "irdma",
              params: dict[str, int | bool] | None = None) -> EmulatedHost:
    """An emulated host on the lab's TAP with one address: the irdma CM core with
    ``config``, or another registered ``stack`` with its ``params``."""
    from mpa_emu.stacks.contract.api import CoreApi
    from mpa_emu.stacks.irdma.core import CmCore

    from mpa_emu.stacks import STACKS, parse_params

    trace = Trace()
    capture = MemorySink()
    core: CoreApi
    if stack == "irdma":
        core = CmCore("emu", EMU_MAC, config or CmConfig(), seed=seed, trace=trace)
    else:
        core = STACKS[stack].make_core("emu", EMU_MAC, parse_params(stack, params or {}),
                                       seed=seed, trace=trace)
    host = LiveHost(lab.tap, core, EMU_MAC, trace=trace, capture=capture, fault=fault)
    host.add_address(packed(EMU_V6 if v6 else EMU_V4))
    return EmulatedHost(host, capture, trace)
