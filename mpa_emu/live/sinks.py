"""Where the live driver puts the frames crossing the TAP: a pcapng file or memory."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import BinaryIO

from mpa_emu.capture.pcap import PcapngWriter


class PcapngSink:
    """Frames streamed to a pcapng file, one interface named after the TAP, each frame
    with its comment; flushed after every frame so an abrupt end loses nothing."""

    def __init__(self, path: str, interface: str, description: str | None = None) -> None:
        try:
            self._file: BinaryIO | None = open(path, "wb")  # noqa: SIM115 (closed in close())
        except OSError as exc:
            raise OSError(f"cannot write capture {path!r}: {exc.strerror or exc}") from None
        self._writer = PcapngWriter(self._file, application="mpa_emu live")
        self._index = self._writer.add_interface(interface, description=description)
        self.frames = 0

    def add(self, time_ns: int, data: bytes, comment: str) -> None:
        """Append one frame (``time_ns``: wall-clock ns since the epoch)."""
        if self._file is None:
            return
        self._writer.write(time_ns, data, interface=self._index, comment=comment or None)
        self._file.flush()
        self.frames += 1

    def close(self) -> None:
        """Flush and close the file; later frames are ignored."""
        if self._file is not None:
            self._writer.flush()
            self._file.close()
            self._file = None


@dataclass(frozen=True, slots=True)
class SeenFrame:
    """One frame kept by :class:`MemorySink`."""

    time_ns: int
    data: bytes
    comment: str


@dataclass
class MemorySink:
    """Frames kept in a list (tests, or a caller that writes them later)."""

    frames: list[SeenFrame] = field(default_factory=list)
    closed: bool = False

    def add(self, time_ns: int, data: bytes, comment: str) -> None:
        """Keep one frame."""
        self.frames.append(SeenFrame(time_ns, data, comment))

    def close(self) -> None:
        """Mark the sink closed (frames stay available)."""
        self.closed = True
