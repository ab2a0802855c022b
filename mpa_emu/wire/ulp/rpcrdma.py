"""RPC-over-RDMA version 1: the CM private data (RFC 8797) and the transport header
(RFC 8166 section 4), XDR, big-endian.

The private data is Linux's ``struct rpcrdma_connect_private``
(``include/linux/sunrpc/rpc_rdma.h``): the format identifier 0xf6ab0e18, version 1,
flags (bit 0: the sender may be sent Send with Invalidate,
``RPCRDMA_CMP_F_SND_W_INV_OK``), then the inline send size and the inline receive size,
each one byte in 1 KiB units minus one (``rpcrdma_decode_buffer_size``: (value + 1) <<
10). Without it a peer assumes the RFC 8166 default inline threshold of 1,024 bytes
(section 3.3).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from mpa_emu.wire.ulp.values import FieldValue

NFS_RDMA_PORT = 20049
"""The NFS/RDMA port (RFC 8267)."""
CMP_MAGIC = 0xF6AB0E18
"""``rpcrdma_cmp_magic``."""
CMP_VERSION = 1
"""``RPCRDMA_CMP_VERSION``."""
CMP_F_SND_W_INV_OK = 0x01
"""``RPCRDMA_CMP_F_SND_W_INV_OK``."""
CMP_SIZE = 8
DEFAULT_INLINE = 1024
"""RFC 8166 section 3.3: the inline threshold a peer assumes without other knowledge."""

PROCS = {0: "RDMA_MSG", 1: "RDMA_NOMSG", 2: "RDMA_MSGP", 3: "RDMA_DONE", 4: "RDMA_ERROR"}
"""RFC 8166 section 4.2.4 ``enum rdma_proc`` (``enum rpcrdma_proc``)."""
RDMA_MSG, RDMA_NOMSG, RDMA_ERROR = 0, 1, 4
ERRORS = {1: "ERR_VERS", 2: "ERR_CHUNK"}
"""RFC 8166 section 4.2.4 ``enum rpcrdma_errcode``."""
RPC_VERSION_1 = 1


def buffer_size(value: int) -> int:
    """``rpcrdma_decode_buffer_size``: (value + 1) KiB."""
    return (value + 1) << 10


def encode_buffer_size(size: int) -> int:
    """``rpcrdma_encode_buffer_size``: size in KiB minus one."""
    return (size >> 10) - 1


@dataclass(frozen=True, slots=True)
class ConnectPrivate:
    """RFC 8797's private data: version, remote-invalidation flag, inline sizes."""

    version: int
    flags: int
    send_size: int
    recv_size: int

    kind = "RPC-over-RDMA CM private data"

    @classmethod
    def decode(cls, data: bytes) -> ConnectPrivate | None:
        """The block when ``data`` is 8 bytes opening with the format identifier."""
        if len(data) != CMP_SIZE:
            return None
        magic, version, flags, send, recv = struct.unpack(">IBBBB", data)
        if magic != CMP_MAGIC:
            return None
        return cls(version, flags, buffer_size(send), buffer_size(recv))

    def encode(self) -> bytes:
        """The 8 bytes."""
        return struct.pack(">IBBBB", CMP_MAGIC, self.version, self.flags,
                           encode_buffer_size(self.send_size),
                           encode_buffer_size(self.recv_size))

    @property
    def remote_invalidate(self) -> bool:
        """The sender accepts Send with Invalidate."""
        return bool(self.flags & CMP_F_SND_W_INV_OK)

    def text(self) -> str:
        """One line."""
        return (f"{self.kind}: version {self.version}, inline send {self.send_size:,} "
                f"bytes, inline receive {self.recv_size:,} bytes, remote invalidation "
                f"{'accepted' if self.remote_invalidate else 'not accepted'}")

    def fields(self) -> dict[str, FieldValue]:
        """version, flags, send_size, recv_size (bytes)."""
        return {"version": self.version, "flags": self.flags, "send_size": self.send_size,
                "recv_size": self.recv_size, "remote_invalidate": self.remote_invalidate}


@dataclass(frozen=True, slots=True)
class TransportHeader:
    """RFC 8166 section 4.2 ``struct rdma_msg``: XID, version, credits, procedure, and for
    RDMA_MSG / RDMA_NOMSG the chunk lists (read segments, write chunks, reply chunk);
    for RDMA_ERROR its code. ``rpc_call`` is True, False or None: the RPC message after
    an RDMA_MSG header is a call, a reply, or not read."""

    xid: int
    vers: int
    credits: int
    proc: int
    read_segments: int = 0
    write_chunks: int = 0
    reply_chunk: bool = False
    header_length: int = 16
    error: int | None = None
    rpc_call: bool | None = None
    rpc_program: int | None = None

    kind = "RPC-over-RDMA"

    @classmethod
    def decode(cls, data: bytes) -> TransportHeader | None:
        """The header when ``data`` opens with one of version 1 and a known procedure,
        its chunk lists well formed (else None)."""
        if len(data) < 16:
            return None
        xid, vers, credits, proc = struct.unpack_from(">IIII", data)
        if vers != RPC_VERSION_1 or proc not in PROCS:
            return None
        if proc == RDMA_ERROR:
            err = struct.unpack_from(">I", data, 16)[0] if len(data) >= 20 else None
            return cls(xid, vers, credits, proc, header_length=min(len(data), 28), error=err)
        if proc not in (RDMA_MSG, RDMA_NOMSG):
            return cls(xid, vers, credits, proc)
        lists = _chunk_lists(data, 16)
        if lists is None:
            return None
        reads, writes, reply, end = lists
        call: bool | None = None
        program: int | None = None
        if proc == RDMA_MSG and len(data) >= end + 8:
            mtype = struct.unpack_from(">I", data, end + 4)[0]
            call = mtype == 0 if mtype in (0, 1) else None
            if call and len(data) >= end + 16:
                program = struct.unpack_from(">I", data, end + 12)[0]
        return cls(xid, vers, credits, proc, reads, writes, reply, end, None, call, program)

    @property
    def proc_name(self) -> str:
        """``RDMA_MSG``."""
        return PROCS[self.proc]

    @property
    def chunked(self) -> bool:
        """Any chunk: a read list, a write list or a reply chunk."""
        return bool(self.read_segments or self.write_chunks or self.reply_chunk)

    def chunk_text(self) -> str:
        """``read list 2 segments, no write list, reply chunk``."""
        return ", ".join([
            f"read list {self.read_segments} segment{'s' * (self.read_segments != 1)}"
            if self.read_segments else "no read list",
            f"write list {self.write_chunks} chunk{'s' * (self.write_chunks != 1)}"
            if self.write_chunks else "no write list",
            "reply chunk" if self.reply_chunk else "no reply chunk"])

    def text(self) -> str:
        """One line."""
        head = f"{self.kind} {self.proc_name}: XID 0x{self.xid:08x}, credits {self.credits}"
        if self.error is not None:
            return f"{head}, {ERRORS.get(self.error, f'error {self.error}')}"
        if self.proc not in (RDMA_MSG, RDMA_NOMSG):
            return head
        rpc = ""
        if self.rpc_call is not None:
            rpc = "; RPC call" if self.rpc_call else "; RPC reply"
            if self.rpc_program is not None:
                rpc += f" to program {self.rpc_program}" + (
                    " (NFS)" if self.rpc_program == 100003 else "")
        return f"{head}, {self.chunk_text()}{rpc}"

    def fields(self) -> dict[str, FieldValue]:
        """xid, vers, credits, proc, chunk counts, error, RPC direction."""
        return {"xid": self.xid, "vers": self.vers, "credits": self.credits,
                "proc": self.proc, "proc_name": self.proc_name,
                "read_segments": self.read_segments, "write_chunks": self.write_chunks,
                "reply_chunk": self.reply_chunk, "error": self.error,
                "rpc_call": self.rpc_call, "rpc_program": self.rpc_program}


def _chunk_lists(data: bytes, pos: int) -> tuple[int, int, bool, int] | None:
    """(read segments, write chunks, reply chunk present, offset after the lists), or None
    when they run past ``data``. RFC 8166 section 4.2.1: a read list is a chain of
    (1, position, handle, length, offset); a write list a chain of (1, count, count x
    (handle, length, offset)); the reply chunk optional (1, count, segments) or 0."""
    def word(at: int) -> int | None:
        return struct.unpack_from(">I", data, at)[0] if at + 4 <= len(data) else None

    reads = 0
    while True:
        more = word(pos)
        if more is None or more > 1:
            return None
        pos += 4
        if not more:
            break
        pos += 20  # position, handle, length, offset (8)
        reads += 1
    writes = 0
    while True:
        more = word(pos)
        if more is None or more > 1:
            return None
        pos += 4
        if not more:
            break
        count = word(pos)
        if count is None:
            return None
        pos += 4 + 16 * count
        writes += 1
    more = word(pos)
    if more is None or more > 1:
        return None
    pos += 4
    reply = bool(more)
    if reply:
        count = word(pos)
        if count is None:
            return None
        pos += 4 + 16 * count
    return (reads, writes, reply, pos) if pos <= len(data) else None
