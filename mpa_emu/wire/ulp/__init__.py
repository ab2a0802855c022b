"""The upper protocols iWARP carries, read from their bytes: SMB Direct ([MS-SMBD]),
NVMe over Fabrics on RDMA (``include/linux/nvme-rdma.h``, the NVMe-oF RDMA transport
binding), iSER (``drivers/infiniband/ulp/iser``, RFC 7145) and RPC-over-RDMA (RFC 8166,
RFC 8797).

Each module only reads (and, for the emulator, writes) bytes into small frozen values;
:mod:`~mpa_emu.wire.ulp.detect` says which protocol a connection speaks, by content
first and by well-known port second, and never guesses a format it cannot prove: what
it does not recognise stays "unknown upper protocol" with its bytes in hex.
"""

from __future__ import annotations

from mpa_emu.wire.ulp.detect import (
    ISER,
    NVME,
    PROTOCOL_NAMES,
    RPCRDMA,
    SMBD,
    UNKNOWN,
    WELL_KNOWN_PORTS,
    Recognition,
    decode_message,
    decode_private_data,
    recognise,
)

__all__ = [
    "ISER",
    "NVME",
    "PROTOCOL_NAMES",
    "RPCRDMA",
    "SMBD",
    "UNKNOWN",
    "WELL_KNOWN_PORTS",
    "Recognition",
    "decode_message",
    "decode_private_data",
    "recognise",
]
