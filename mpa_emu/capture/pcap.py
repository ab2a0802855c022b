"""Capture files: a streaming pcapng writer and a reader for pcap and pcapng.

Writer (:class:`PcapngWriter`): one Section Header Block, one Interface Description
Block per emulated host interface (``if_name``, ``if_tsresol`` = 9, nanoseconds), and an
Enhanced Packet Block per frame with the emulator's virtual time and an ``opt_comment``
naming the kernel function and transition behind the frame. Output is deterministic:
every field comes from the caller (no wall clock, host name or OS string), every integer
is written little-endian whatever the machine, so the same frames give the same file.

Reader (:func:`read_capture`): classic pcap in both byte orders with microsecond or
nanosecond magic, and pcapng with sections of either byte order, any number of
interfaces, ``if_tsresol`` (powers of 10 and of 2), ``if_tsoffset``, Enhanced, Simple
and obsolete Packet Blocks, and frame comments. It yields :class:`CaptureRecord` values
and raises :class:`CaptureError` for truncated, inconsistent or unknown files.

Formats: pcapng per draft-ietf-opsawg-pcapng (sections 4.1-4.4 for the blocks used here),
pcap per draft-ietf-opsawg-pcap.
"""

from __future__ import annotations

import io
import os
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO, BinaryIO, Final, NamedTuple

from mpa_emu.errors import MpaEmuError

LINKTYPE_ETHERNET: Final = 1
DEFAULT_SNAPLEN: Final = 262144  # what tcpdump writes; no emulated frame comes near it

# pcapng block types (draft-ietf-opsawg-pcapng section 10.1).
BT_SHB: Final = 0x0A0D0D0A
BT_IDB: Final = 0x00000001
BT_OPB: Final = 0x00000002  # obsolete Packet Block (appendix A)
BT_SPB: Final = 0x00000003
BT_EPB: Final = 0x00000006
BYTE_ORDER_MAGIC: Final = 0x1A2B3C4D

# Option codes.
OPT_ENDOFOPT: Final = 0
OPT_COMMENT: Final = 1
SHB_USERAPPL: Final = 4
IF_NAME: Final = 2
IF_DESCRIPTION: Final = 3
IF_TSRESOL: Final = 9
IF_TSOFFSET: Final = 14

# pcap magic numbers as read little-endian (draft-ietf-opsawg-pcap section 4).
_PCAP_MAGICS: Final = {
    b"\xd4\xc3\xb2\xa1": ("<", 1000),  # microseconds, little-endian
    b"\xa1\xb2\xc3\xd4": (">", 1000),
    b"\x4d\x3c\xb2\xa1": ("<", 1),  # nanoseconds
    b"\xa1\xb2\x3c\x4d": (">", 1),
}
_PCAPNG_MAGIC: Final = b"\x0a\x0d\x0d\x0a"
_CHUNK = 1 << 18
"""Bytes asked of the file at a time: a quarter MB reads as fast as larger requests and
keeps the reader's buffer (twice this while it refills) small beside what a reading
command holds for the connections it follows. Not Final: the memory tests read with a
smaller buffer (a Final name is a constant of the compiled build; this one is read once
per refill)."""


class CaptureError(MpaEmuError, ValueError):
    """A capture file that cannot be read (or a record that cannot be written)."""


def capture_error(path: str, message: str) -> str:
    """A capture reader's error, with a pointer when ``path`` is a scenario file."""
    if path.lower().endswith(".toml"):
        return f"{message} (a scenario file? mpa-emu run or diagram take those)"
    return message


class CaptureRecord(NamedTuple):
    """One captured frame (a named tuple: cheap to build on a 100,000-frame replay).

    ``time_ns`` is nanoseconds since the epoch (``None`` for a pcapng Simple Packet
    Block, which has no timestamp); ``interface`` the interface index within its
    section; ``interface_name`` its ``if_name`` (``None`` if unnamed, and for pcap);
    ``linktype`` the LINKTYPE_* value; ``frame`` the captured bytes; ``orig_len`` the
    length on the wire; ``comment`` the frame's comments joined by newlines, or ``None``.
    """

    time_ns: int | None
    interface: int
    interface_name: str | None
    linktype: int
    frame: bytes
    orig_len: int
    comment: str | None = None


# ---- writer ----------------------------------------------------------------------

_U16: Final = struct.Struct("<H")
_OPT_HEAD: Final = struct.Struct("<HH")
_BLOCK_HEAD: Final = struct.Struct("<II")
_SHB_BODY: Final = struct.Struct("<IHHq")
_IDB_BODY: Final = struct.Struct("<HHI")
# type, length, interface, ts high, ts low, caplen, len
_EPB_HEAD: Final = struct.Struct("<IIIIIII")
_U32: Final = struct.Struct("<I")
_PADDING: Final = (b"", b"\x00", b"\x00\x00", b"\x00\x00\x00")
"""Zero bytes that pad 0 to 3 bytes of a frame to a multiple of 4."""
_COMMENTS_KEPT: Final = 1024
"""Distinct frame comments a writer remembers encoded; past this many it starts over."""


def _option(code: int, value: bytes) -> bytes:
    return _OPT_HEAD.pack(code, len(value)) + value + b"\x00" * (-len(value) % 4)


def _options(opts: list[bytes]) -> bytes:
    return b"".join(opts) + b"\x00\x00\x00\x00" if opts else b""  # opt_endofopt


def _block(block_type: int, body: bytes) -> bytes:
    total = 12 + len(body)
    return _BLOCK_HEAD.pack(block_type, total) + body + _U32.pack(total)


class PcapngWriter:
    """Stream frames into a pcapng file object.

    The Section Header Block is written at once; interfaces are declared with
    :meth:`add_interface` (or on first use of a name with :meth:`interface`) and frames
    written with :meth:`write`. The writer does not close ``stream``; call
    :meth:`flush` (or use it as a context manager) when done.
    """

    def __init__(self, stream: IO[bytes], *, application: str = "mpa_emu",
                 comment: str | None = None) -> None:
        self._stream = stream
        self._names: dict[str, int] = {}
        self._snaplens: list[int] = []
        self._comments: dict[str, bytes] = {}
        opts = [_option(SHB_USERAPPL, application.encode())]
        if comment is not None:
            opts.append(_option(OPT_COMMENT, _utf8(comment)))
        # Section length -1: not known when streaming (pcapng section 4.1).
        body = _SHB_BODY.pack(BYTE_ORDER_MAGIC, 1, 0, -1) + _options(opts)
        stream.write(_block(BT_SHB, body))

    def add_interface(self, name: str, *, linktype: int = LINKTYPE_ETHERNET,
                      snaplen: int = DEFAULT_SNAPLEN, description: str | None = None) -> int:
        """Declare an interface; returns its index for :meth:`write`."""
        if name in self._names:
            raise CaptureError(f"interface {name!r} is already declared")
        if not 0 <= linktype <= 0xFFFF or not 0 <= snaplen <= 0xFFFFFFFF:
            raise CaptureError(f"bad linktype {linktype} or snaplen {snaplen}")
        opts = [_option(IF_NAME, _utf8(name))]
        if description is not None:
            opts.append(_option(IF_DESCRIPTION, _utf8(description)))
        opts.append(_option(IF_TSRESOL, b"\x09"))  # 10^-9 s: the virtual clock's unit
        self._stream.write(_block(BT_IDB, _IDB_BODY.pack(linktype, 0, snaplen)
                                  + _options(opts)))
        index = len(self._snaplens)
        self._names[name] = index
        self._snaplens.append(snaplen)
        return index

    def interface(self, name: str) -> int:
        """The index of interface ``name``, declaring it (Ethernet) on first use."""
        index = self._names.get(name)
        return self.add_interface(name) if index is None else index

    @property
    def interfaces(self) -> dict[str, int]:
        """Declared interface names and their indices."""
        return dict(self._names)

    def write(self, time_ns: int, frame: bytes, *, interface: int | str = 0,
              comment: str | None = None, orig_len: int | None = None) -> None:
        """Append one Enhanced Packet Block.

        ``interface`` is an index or a name (declared on first use); ``time_ns`` the
        virtual time in nanoseconds; ``comment`` becomes ``opt_comment``. Frames longer
        than the interface's snaplen are cut, keeping ``orig_len``.
        """
        index = self.interface(interface) if isinstance(interface, str) else interface
        if not 0 <= index < len(self._snaplens):
            raise CaptureError(f"interface {index} is not declared")
        if not 0 <= time_ns < 1 << 64:
            raise CaptureError(f"timestamp {time_ns} ns is outside 0..2**64-1")
        wire_len = len(frame) if orig_len is None else orig_len
        snaplen = self._snaplens[index]
        if snaplen and len(frame) > snaplen:
            frame = frame[:snaplen]
        caplen = len(frame)
        opts = b"" if comment is None else self._comment_options(comment)
        pad = -caplen % 4
        total = 32 + caplen + pad + len(opts)
        self._stream.write(b"".join((
            _EPB_HEAD.pack(BT_EPB, total, index, time_ns >> 32, time_ns & 0xFFFFFFFF,
                           caplen, wire_len),
            frame, _PADDING[pad], opts, _U32.pack(total))))

    def _comment_options(self, comment: str) -> bytes:
        """The options of a frame with ``comment``: ``opt_comment`` and the end of
        options, remembered per text (most frames of a capture repeat a few comments)."""
        opts = self._comments.get(comment)
        if opts is None:
            opts = _option(OPT_COMMENT, _utf8(comment)) + b"\x00" * 4
            if len(self._comments) >= _COMMENTS_KEPT:
                self._comments.clear()
            self._comments[comment] = opts
        return opts

    def write_record(self, record: CaptureRecord) -> None:
        """Write a record read from another capture (its interface declared by name,
        ``if<index>`` when unnamed; a record without a timestamp is written at 0)."""
        name = record.interface_name or f"if{record.interface}"
        index = self._names.get(name)
        if index is None:
            index = self.add_interface(name, linktype=record.linktype)
        self.write(record.time_ns or 0, record.frame, interface=index,
                   comment=record.comment, orig_len=record.orig_len)

    def flush(self) -> None:
        """Flush the underlying stream."""
        self._stream.flush()

    def __enter__(self) -> PcapngWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.flush()


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CaptureError(f"text is not encodable as UTF-8: {exc}") from None


def write_pcapng(path: str | os.PathLike[str], records: Iterable[CaptureRecord]) -> None:
    """Write ``records`` to a new pcapng file at ``path``."""
    with open(path, "wb") as stream, PcapngWriter(stream) as writer:
        for record in records:
            writer.write_record(record)


# ---- reader ----------------------------------------------------------------------

class _Input:
    """A read buffer over a binary stream that hands out whole blocks."""

    __slots__ = ("base", "buf", "pos", "stream")

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.buf = b""
        self.pos = 0
        self.base = 0  # file offset of buf[0]

    def ensure(self, need: int) -> int:
        """Make ``need`` bytes available from ``pos``; return how many are (may be less
        at end of file)."""
        have = len(self.buf) - self.pos
        if have >= need:
            return have
        parts = [self.buf[self.pos:]]
        self.base += self.pos
        while have < need:
            # Bounded requests: a corrupt length must not make read() allocate gigabytes.
            try:
                chunk = self.stream.read(max(_CHUNK, min(need - have, 64 * _CHUNK)))
            except OSError as exc:
                raise CaptureError(f"cannot read capture at offset {self.base + have}: "
                                   f"{exc}") from None
            if not chunk:
                break
            parts.append(chunk)
            have += len(chunk)
        self.buf = b"".join(parts)
        self.pos = 0
        return have

    @property
    def offset(self) -> int:
        return self.base + self.pos


@dataclass(slots=True)
class _Interface:
    linktype: int
    snaplen: int
    name: str | None
    tsresol: int  # the if_tsresol byte
    tsoffset_ns: int
    ns_per_tick: int = 0  # set when a tick is a whole number of ns (the usual case)

    def finish(self) -> _Interface:
        """Precompute the common conversion once the options are read."""
        if not self.tsresol & 0x80 and self.tsresol <= 9:
            self.ns_per_tick = 10 ** (9 - self.tsresol)
        return self

    def to_ns(self, ticks: int) -> int:
        res = self.tsresol
        if res & 0x80:
            ns = ticks * 1_000_000_000 >> (res & 0x7F)
        elif res <= 9:
            ns = ticks * 10 ** (9 - res)
        else:
            ns = ticks // 10 ** (res - 9)
        return ns + self.tsoffset_ns


Source = str | os.PathLike[str] | BinaryIO | IO[bytes] | bytes
"""What the readers take: a path, a binary file object or the file's bytes."""

_new_record = tuple.__new__
"""Makes a :class:`CaptureRecord` from a tuple of its fields without the named tuple's
own ``__new__`` (a Python function): ``_new_record(CaptureRecord, fields)``."""


def read_capture(source: Source) -> Iterator[CaptureRecord]:
    """Yield every frame of a pcap or pcapng capture, in file order.

    ``source`` is a path, a binary file object or the file's bytes. Raises
    :class:`CaptureError` for an unknown format, a truncated file or an inconsistent
    block; records before the fault have been yielded.
    """
    reader = CaptureReader(source, comments=True)
    try:
        while (frame := reader.next_frame()) is not None:
            yield _new_record(CaptureRecord, (
                reader.time_ns, reader.interface, reader.interface_name, reader.linktype,
                frame, reader.orig_len, reader.comment))
    finally:
        reader.close()


def read_intact(source: Source) -> tuple[list[CaptureRecord], CaptureError | None]:
    """Every record of a capture up to its first fault, and that fault (``None`` when
    the capture reads to its end): for a capture cut short (an interrupted tcpdump, a full
    disk) whose intact frames are still worth using."""
    records: list[CaptureRecord] = []
    try:
        for record in read_capture(source):
            records.append(record)
    except CaptureError as exc:
        return records, exc
    return records, None


_START: Final = 0
_PCAPNG: Final = 1
_PCAP: Final = 2
_DONE: Final = 3
_EPB: Final = BT_EPB
_EpbHead = tuple[int, int, int, int, int, int, int]
"""An Enhanced Packet Block's type, length, interface, timestamp (high, low), captured
and original length."""


class CaptureReader:
    """The frames of a pcap or pcapng capture pulled one at a time (what
    :func:`read_capture` yields, without a record per frame): :meth:`next_frame` returns
    the next frame's bytes and leaves what the capture says of it in the attributes.

    ``source`` is opened at the first :meth:`next_frame`, which raises
    :class:`CaptureError` as :func:`read_capture` does; :meth:`close` closes a file the
    reader opened. ``comments``: read each frame's comments into :attr:`comment` (else
    it stays None)."""

    time_ns: int | None = None
    """The last frame's time in ns since the epoch (None: a Simple Packet Block)."""
    interface_name: str | None = None
    comment: str | None = None

    def __init__(self, source: Source, *, comments: bool = False) -> None:
        self.source = source
        self.comments = comments
        self.interface = 0
        self.linktype = 0
        self.orig_len = 0
        self._state = _START
        self._inp = _Input(io.BytesIO(b""))
        self._owned: IO[bytes] | None = None
        # pcapng: the section's byte order and structs, its interfaces.
        self._endian = "<"
        self._head = struct.Struct("<II")
        self._epb = struct.Struct("<IIIII")
        # The usual block, an Enhanced Packet Block already in the buffer, in two
        # unpacks: its whole head from the block start, and its trailing length.
        self._epb_block = struct.Struct("<IIIIIII")
        self._tail = _U32
        self._interfaces: list[_Interface] = []
        # pcap: the record header, the tick, the snap length and link type, the index.
        self._record_head = struct.Struct("<IIII")
        self._ns_per_tick = 1
        self._snaplen = 0
        self._index = 0

    def close(self) -> None:
        """Close the file the reader opened (a stream it was given stays open)."""
        self._state = _DONE
        if self._owned is not None:
            self._owned.close()
            self._owned = None

    def next_frame(self) -> bytes | None:
        """The next frame's captured bytes (None at the end of the capture), its time,
        interface, link type, length on the wire and comment in the attributes."""
        state = self._state
        if state == _PCAPNG:
            # The usual block first (see __init__); anything else below.
            inp = self._inp
            buf = inp.buf
            pos = inp.pos
            if len(buf) - pos >= 32:
                # Typed: the compiled build does the arithmetic on machine integers.
                head: _EpbHead = self._epb_block.unpack_from(buf, pos)
                block_type, length, index, ts_high, ts_low, caplen, wire_len = head
                end = pos + length - 4
                data_end = pos + 28 + caplen
                interfaces = self._interfaces
                if (block_type == _EPB and length >= 32 and not length & 3
                        and pos + length <= len(buf) and data_end <= end
                        and index < len(interfaces)
                        and self._tail.unpack_from(buf, end)[0] == length):
                    iface = interfaces[index]
                    ticks = ts_high << 32 | ts_low
                    ns_per_tick = iface.ns_per_tick
                    self.time_ns = (ticks * ns_per_tick + iface.tsoffset_ns if ns_per_tick
                                    else iface.to_ns(ticks))
                    self.interface = index
                    self.interface_name = iface.name
                    self.linktype = iface.linktype
                    self.orig_len = wire_len
                    if self.comments:
                        opt_start = data_end + (-caplen % 4)
                        self.comment = (_comments(buf, opt_start, end, self._endian, inp)
                                        if opt_start < end else None)
                    inp.pos = pos + length
                    return buf[pos + 28:data_end]
            return self._pcapng_block()
        if state == _PCAP:
            return self._pcap_record()
        if state == _START:
            self._start()
            return self.next_frame()
        return None

    def _start(self) -> None:
        """Open the source and read what kind of capture it is (and a pcap file header)."""
        self._state = _DONE  # whatever goes wrong here ends the capture
        source = self.source
        if isinstance(source, bytes):
            stream: IO[bytes] = io.BytesIO(source)
        elif isinstance(source, str | os.PathLike):
            try:
                stream = open(source, "rb")  # noqa: SIM115 - closed by close()
            except OSError as exc:
                raise CaptureError(f"cannot open capture: {exc}") from None
            self._owned = stream
        else:
            stream = source
        inp = self._inp = _Input(stream)
        have = inp.ensure(4)
        if have == 0:
            raise CaptureError("empty file: not a pcap or pcapng capture")
        magic = inp.buf[:4]
        if magic == _PCAPNG_MAGIC:
            self._state = _PCAPNG
        elif magic in _PCAP_MAGICS:
            endian, self._ns_per_tick = _PCAP_MAGICS[magic]
            if inp.ensure(24) < 24:
                raise CaptureError("truncated pcap file header (needs 24 bytes)")
            major, minor, _zone, _sigfigs, snaplen, network = struct.unpack_from(
                endian + "HHiIII", inp.buf, inp.pos + 4)
            if major != 2:
                raise CaptureError(f"unsupported pcap version {major}.{minor}")
            self._snaplen = snaplen
            self.linktype = network & 0xFFFF  # the upper bits carry FCS information
            inp.pos += 24
            self._record_head = struct.Struct(endian + "IIII")
            self._state = _PCAP
        else:
            raise CaptureError(f"not a pcap or pcapng file (starts with {magic.hex(' ')})")

    def _pcap_record(self) -> bytes | None:
        inp = self._inp
        index = self._index
        have = inp.ensure(16)
        if have == 0:
            self._state = _DONE
            return None
        self._state = _DONE  # until the record is whole
        if have < 16:
            raise CaptureError(f"truncated pcap record header {index} at offset {inp.offset}")
        sec, frac, caplen, wire_len = self._record_head.unpack_from(inp.buf, inp.pos)
        snaplen = self._snaplen
        if caplen > max(snaplen, DEFAULT_SNAPLEN):
            raise CaptureError(f"pcap record {index} at offset {inp.offset} claims "
                               f"{caplen} captured bytes (snaplen {snaplen})")
        if inp.ensure(16 + caplen) < 16 + caplen:
            raise CaptureError(f"truncated pcap record {index} at offset {inp.offset}: "
                               f"{caplen} bytes announced")
        self._state = _PCAP
        start = inp.pos + 16
        self.time_ns = sec * 1_000_000_000 + frac * self._ns_per_tick
        self.orig_len = wire_len
        inp.pos = start + caplen
        self._index = index + 1
        return inp.buf[start:start + caplen]

    def _pcapng_block(self) -> bytes | None:
        """The blocks up to the next frame, read the careful way (any block the fast
        path of :meth:`next_frame` leaves)."""
        inp = self._inp
        self._state = _DONE  # until a frame is found or the file ends cleanly
        while True:
            have = inp.ensure(12)
            if have == 0:
                return None
            if have < 8:
                raise CaptureError(f"truncated pcapng block header at offset {inp.offset}")
            block_type, = _U32.unpack_from(inp.buf, inp.pos)
            if block_type == BT_SHB:
                if have < 12:
                    raise CaptureError(f"truncated section header at offset {inp.offset}")
                bom = inp.buf[inp.pos + 8:inp.pos + 12]
                if bom == b"\x4d\x3c\x2b\x1a":
                    endian = "<"
                elif bom == b"\x1a\x2b\x3c\x4d":
                    endian = ">"
                else:
                    raise CaptureError(f"bad byte-order magic {bom.hex()} at offset "
                                       f"{inp.offset}")
                self._endian = endian
                self._head = struct.Struct(endian + "II")
                self._epb = struct.Struct(endian + "IIIII")
                self._epb_block = struct.Struct(endian + "IIIIIII")
                self._tail = struct.Struct(endian + "I")
                self._interfaces = []
            endian = self._endian
            block_type, length = self._head.unpack_from(inp.buf, inp.pos)
            if length < 12 or length & 3:
                raise CaptureError(f"pcapng block of type 0x{block_type:08x} at offset "
                                   f"{inp.offset} has bad length {length}")
            if inp.ensure(length) < length:
                raise CaptureError(f"truncated pcapng block of type 0x{block_type:08x} at "
                                   f"offset {inp.offset}: {length} bytes announced")
            buf = inp.buf
            pos = inp.pos
            end = pos + length - 4
            if struct.unpack_from(endian + "I", buf, end)[0] != length:
                raise CaptureError(f"pcapng block at offset {inp.offset}: trailing length "
                                   f"differs from {length}")
            interfaces = self._interfaces
            frame: bytes | None = None
            if block_type == BT_EPB:
                if length < 32:
                    raise CaptureError(f"enhanced packet block at offset {inp.offset} is "
                                       f"too short ({length} bytes)")
                index, ts_high, ts_low, caplen, wire_len = self._epb.unpack_from(buf, pos + 8)
                data_end = pos + 28 + caplen
                if data_end > end:
                    raise CaptureError(f"enhanced packet block at offset {inp.offset}: "
                                       f"captured length {caplen} overruns the block")
                if index >= len(interfaces):
                    _interface(interfaces, index, inp.offset)  # raises
                iface = interfaces[index]
                opt_start = data_end + (-caplen % 4)
                comment = _comments(buf, opt_start, end, endian, inp) if opt_start < end else None
                ticks = ts_high << 32 | ts_low
                self.time_ns = (ticks * iface.ns_per_tick + iface.tsoffset_ns
                                if iface.ns_per_tick else iface.to_ns(ticks))
                self._frame_of(index, iface, wire_len, comment)
                frame = buf[pos + 28:data_end]
            elif block_type == BT_SPB:
                iface = _interface(interfaces, 0, inp.offset)
                (wire_len,) = struct.unpack_from(endian + "I", buf, pos + 8)
                caplen = min(wire_len, end - pos - 12)
                if iface.snaplen:
                    caplen = min(caplen, iface.snaplen)
                self.time_ns = None
                self._frame_of(0, iface, wire_len, None)
                frame = buf[pos + 12:pos + 12 + caplen]
            elif block_type == BT_OPB:
                if length < 32:
                    raise CaptureError(f"packet block at offset {inp.offset} is too short")
                index, _drops, ts_high, ts_low, caplen, wire_len = struct.unpack_from(
                    endian + "HHIIII", buf, pos + 8)
                data_end = pos + 28 + caplen
                if data_end > end:
                    raise CaptureError(f"packet block at offset {inp.offset}: captured "
                                       f"length {caplen} overruns the block")
                iface = _interface(interfaces, index, inp.offset)
                opt_start = data_end + (-caplen % 4)
                comment = _comments(buf, opt_start, end, endian, inp) if opt_start < end else None
                self.time_ns = iface.to_ns(ts_high << 32 | ts_low)
                self._frame_of(index, iface, wire_len, comment)
                frame = buf[pos + 28:data_end]
            elif block_type == BT_IDB:
                if length < 20:
                    raise CaptureError(f"interface block at offset {inp.offset} is too short")
                linktype, _reserved, snaplen = struct.unpack_from(endian + "HHI", buf, pos + 8)
                interfaces.append(_read_idb_options(
                    _Interface(linktype, snaplen, None, 6, 0), buf, pos + 16, end, endian,
                    inp).finish())
            elif block_type == BT_SHB:
                major, _minor = struct.unpack_from(endian + "HH", buf, pos + 12)
                if major != 1:
                    raise CaptureError(f"unsupported pcapng version {major} at offset "
                                       f"{inp.offset}")
            # Any other block (name resolution, statistics, custom...) carries no frame.
            inp.pos = pos + length
            if frame is not None:
                self._state = _PCAPNG
                return frame

    def _frame_of(self, index: int, iface: _Interface, wire_len: int,
                  comment: str | None) -> None:
        self.interface = index
        self.interface_name = iface.name
        self.linktype = iface.linktype
        self.orig_len = wire_len
        self.comment = comment if self.comments else None


def _interface(interfaces: list[_Interface], index: int, offset: int) -> _Interface:
    if index >= len(interfaces):
        raise CaptureError(f"packet at offset {offset} refers to interface {index}, but "
                           f"the section declares {len(interfaces)}")
    return interfaces[index]


def _iter_options(buf: bytes, pos: int, end: int, endian: str,
                  inp: _Input) -> Iterator[tuple[int, bytes]]:
    while pos + 4 <= end:
        code, length = struct.unpack_from(endian + "HH", buf, pos)
        if code == OPT_ENDOFOPT:
            return
        value_end = pos + 4 + length
        if value_end > end:
            raise CaptureError(f"option {code} in the block at offset {inp.offset} "
                               f"overruns the block")
        yield code, buf[pos + 4:value_end]
        pos = value_end + (-length % 4)


def _comments(buf: bytes, pos: int, end: int, endian: str, inp: _Input) -> str | None:
    code, length = struct.unpack_from(endian + "HH", buf, pos)
    if (code == OPT_COMMENT and pos + 4 + length + (-length % 4) + 4 == end
            and buf[end - 4:end] == b"\x00\x00\x00\x00"):
        # The usual shape (ours): one comment, then opt_endofopt.
        return buf[pos + 4:pos + 4 + length].decode("utf-8", "replace")
    texts = [value.decode("utf-8", "replace")
             for code, value in _iter_options(buf, pos, end, endian, inp)
             if code == OPT_COMMENT]
    return "\n".join(texts) if texts else None


def _read_idb_options(iface: _Interface, buf: bytes, pos: int, end: int, endian: str,
                      inp: _Input) -> _Interface:
    for code, value in _iter_options(buf, pos, end, endian, inp):
        if code == IF_NAME:
            iface.name = value.decode("utf-8", "replace")
        elif code == IF_TSRESOL and len(value) >= 1:
            iface.tsresol = value[0]
        elif code == IF_TSOFFSET and len(value) >= 8:
            (seconds,) = struct.unpack_from(endian + "q", value)
            iface.tsoffset_ns = seconds * 1_000_000_000
    return iface
