"""Network namespaces for live runs and tests: create, enter (per thread), remove.

``ip netns add`` makes a named namespace under /run/netns; :func:`entered` switches the
calling thread into it with ``setns(2)`` and back, so a TAP device or a socket opened
inside stays in that namespace after the thread returns (sockets and devices keep the
namespace they were created in).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from types import TracebackType

from mpa_emu.errors import MpaEmuError

CLONE_NEWNET = 0x40000000
NETNS_DIR = "/run/netns"


class NetnsError(MpaEmuError):
    """A namespace operation failed; the message carries the command's own error."""


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise NetnsError(f"setns: {os.strerror(err)}")


def run_ip(args: Sequence[str], namespace: str | None = None) -> str:
    """Run ``ip [-n NS] ARGS``; return stdout or raise :class:`NetnsError` with stderr."""
    ip = shutil.which("ip")
    if ip is None:
        raise NetnsError("the 'ip' command (iproute2) is not installed")
    command = [ip] + (["-n", namespace] if namespace else []) + list(args)
    done = subprocess.run(command, capture_output=True, text=True, timeout=10, check=False)
    if done.returncode != 0:
        raise NetnsError(f"{' '.join(command[1:])}: {done.stderr.strip() or done.returncode}")
    return done.stdout


@contextlib.contextmanager
def entered(name: str) -> Iterator[None]:
    """Run the body with the calling thread inside namespace ``name``."""
    with open("/proc/thread-self/ns/net", "rb") as home:
        try:
            target = os.open(os.path.join(NETNS_DIR, name), os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise NetnsError(f"no network namespace named {name!r}") from None
        try:
            _setns(target)
        finally:
            os.close(target)
        try:
            yield
        finally:
            _setns(home.fileno())


def entered_if(name: str | None) -> contextlib.AbstractContextManager[None]:
    """:func:`entered` for a named namespace, nothing for ``None`` (a fresh context
    manager per call: each block needs its own)."""
    return entered(name) if name else contextlib.nullcontext()


class Namespace:
    """A named network namespace that is removed (with its interfaces) on close."""

    def __init__(self, name: str) -> None:
        self.name = name
        run_ip(["netns", "add", name])
        self._open = True
        try:
            run_ip(["link", "set", "lo", "up"], name)
            # No router solicitations or DAD on the test links: they add frames the
            # tests do not expect and delay IPv6 addresses by a second.
            for key in ("net.ipv6.conf.all.accept_dad", "net.ipv6.conf.default.accept_dad",
                        "net.ipv6.conf.default.router_solicitations"):
                self.sysctl(key, "0")
        except Exception:
            self.close()
            raise

    def sysctl(self, key: str, value: str) -> None:
        """Write one sysctl inside the namespace."""
        path = "/proc/sys/" + key.replace(".", "/")
        with entered(self.name), open(path, "w") as handle:
            handle.write(value)

    def ip(self, *args: str) -> str:
        """``ip -n NAME ARGS``."""
        return run_ip(args, self.name)

    def close(self) -> None:
        """Delete the namespace; idempotent."""
        if self._open:
            self._open = False
            with contextlib.suppress(NetnsError):
                run_ip(["netns", "delete", self.name])

    def __enter__(self) -> Namespace:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
