"""A TAP device file descriptor: whole Ethernet frames in and out, no packet-info header.

The interface is created in the network namespace of the calling thread when the file
descriptor is opened, and disappears when it is closed (it is not made persistent).
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import struct
from types import TracebackType

from mpa_emu.errors import MpaEmuError

TUN_DEVICE = "/dev/net/tun"
TUNSETIFF = 0x400454CA  # _IOW('T', 202, int), linux/if_tun.h
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
SIOCGIFHWADDR = 0x8927
IFF_UP = 0x1
IFNAMSIZ = 16
MAX_FRAME = 65536


class TapError(MpaEmuError):
    """The TAP device cannot be opened or used; the message says why in one line."""


class Tap:
    """One TAP interface, opened non-blocking with ``IFF_TAP | IFF_NO_PI``."""

    def __init__(self, name: str) -> None:
        if not name or len(name.encode()) >= IFNAMSIZ or "/" in name or " " in name:
            raise TapError(f"bad interface name {name!r} (1..15 characters, no '/' or space)")
        try:
            fd = os.open(TUN_DEVICE, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            raise TapError(f"{TUN_DEVICE} does not exist (no TUN/TAP support)") from None
        except PermissionError:
            raise TapError(f"opening {TUN_DEVICE} needs root or CAP_NET_ADMIN") from None
        request = struct.pack("16sH22x", name.encode(), IFF_TAP | IFF_NO_PI)
        try:
            answer = fcntl.ioctl(fd, TUNSETIFF, request)
        except OSError as exc:
            os.close(fd)
            reason = {errno.EPERM: "needs root or CAP_NET_ADMIN",
                      errno.EBUSY: "the interface is in use",
                      errno.EINVAL: "an interface of another kind has that name"}.get(
                          exc.errno or 0, exc.strerror or str(exc))
            raise TapError(f"cannot attach TAP {name!r}: {reason}") from None
        self._fd: int | None = fd
        self.name = answer[:IFNAMSIZ].rstrip(b"\0").decode()

    def fileno(self) -> int:
        """The file descriptor, for ``select``/``poll``."""
        if self._fd is None:
            raise TapError(f"TAP {self.name} is closed")
        return self._fd

    def read(self) -> bytes | None:
        """One frame, or ``None`` when nothing is queued."""
        try:
            return os.read(self.fileno(), MAX_FRAME)
        except BlockingIOError:
            return None

    def write(self, frame: bytes) -> None:
        """Hand one frame to the kernel as if it arrived on the wire. A full queue
        (``EAGAIN``) or a link that is down drops the frame, like a wire would."""
        try:
            os.write(self.fileno(), frame)
        except BlockingIOError:
            pass
        except OSError as exc:
            if exc.errno not in (errno.EIO, errno.ENOBUFS):
                raise TapError(f"writing to TAP {self.name}: {exc.strerror}") from None

    def close(self) -> None:
        """Close the descriptor; the interface goes away with it."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._fd is None

    def __enter__(self) -> Tap:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _ifreq(name: str, tail: bytes = b"") -> bytes:
    return struct.pack("16s", name.encode()) + tail.ljust(24, b"\0")


def set_link_up(name: str, up: bool = True) -> None:
    """Set or clear IFF_UP on an interface of the current network namespace."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            current = fcntl.ioctl(sock, SIOCGIFFLAGS, _ifreq(name))
            (flags,) = struct.unpack_from("H", current, IFNAMSIZ)
            flags = flags | IFF_UP if up else flags & ~IFF_UP
            fcntl.ioctl(sock, SIOCSIFFLAGS, _ifreq(name, struct.pack("H", flags)))
        except OSError as exc:
            raise TapError(f"cannot set {name} {'up' if up else 'down'}: "
                           f"{exc.strerror or exc}") from None


def link_mac(name: str) -> bytes:
    """The kernel's MAC address of an interface in the current network namespace."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            answer = fcntl.ioctl(sock, SIOCGIFHWADDR, _ifreq(name))
        except OSError as exc:
            raise TapError(f"cannot read the MAC of {name}: {exc.strerror or exc}") from None
    return bytes(answer[IFNAMSIZ + 2:IFNAMSIZ + 8])
