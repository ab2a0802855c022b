"""Private data by format, for scenarios and the Python API: a table naming one upper
protocol's block and its fields, turned into the bytes that protocol's Linux side puts in
``rdma_conn_param.private_data``.

    private_data = { nvme = { qid = 1, hrqsize = 128, hsqsize = 127 } }

Formats: ``nvme`` (``struct nvme_rdma_cm_req``: qid, hrqsize, hsqsize, cntlid, recfmt),
``nvme_accept`` (``nvme_rdma_cm_rep``: crqsize), ``nvme_reject`` (``nvme_rdma_cm_rej``:
status, a number or a name such as ``INVALID_HSQSIZE``), ``smbd`` ([MS-SMBD] 6.1 legacy
IRD/ORD: ird, ord, byte_order), ``iser`` (``struct iser_cm_hdr``: zbva,
send_with_invalidate) and ``rpcrdma`` (RFC 8797: send_size, recv_size in bytes, a
multiple of 1,024 from 1,024 to 262,144, remote_invalidate).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from mpa_emu.wire.private_data import encode_legacy
from mpa_emu.wire.ulp import iser, nvme_rdma, rpcrdma

FieldSpec = tuple[str, int, int, int | bool | str]
"""(name, lo, hi, default) of an integer field; a bool or str default marks its type."""

_U16 = 0xFFFF


def _nvme(v: Mapping[str, object]) -> bytes:
    return nvme_rdma.CmRequest(qid=_int(v, "qid", 0, _U16, 0),
                               hrqsize=_int(v, "hrqsize", 0, _U16, 32),
                               hsqsize=_int(v, "hsqsize", 0, _U16, 31),
                               cntlid=_int(v, "cntlid", 0, _U16, 0),
                               recfmt=_int(v, "recfmt", 0, _U16, 0)).encode()


def _nvme_accept(v: Mapping[str, object]) -> bytes:
    return nvme_rdma.CmReply(crqsize=_int(v, "crqsize", 0, _U16, 32),
                             recfmt=_int(v, "recfmt", 0, _U16, 0)).encode()


def status_value(raw: object) -> int:
    """An NVMe-RDMA reject status from its number or its name (``INVALID_HSQSIZE`` or
    ``NVME_RDMA_CM_INVALID_HSQSIZE``)."""
    if isinstance(raw, bool):
        raise ValueError(f"nvme_reject status: expected a number or a name, got {raw!r}")
    if isinstance(raw, int):
        if not 0 <= raw <= _U16:
            raise ValueError(f"nvme_reject status: {raw} is not a 16-bit value")
        return raw
    if isinstance(raw, str):
        want = raw.upper().removeprefix("NVME_RDMA_CM_")
        for value, (name, _) in nvme_rdma.CM_STATUS.items():
            if name.removeprefix("NVME_RDMA_CM_") == want:
                return value
        names = ", ".join(n.removeprefix("NVME_RDMA_CM_") for n, _ in
                          nvme_rdma.CM_STATUS.values())
        raise ValueError(f"nvme_reject status: unknown name {raw!r} (names: {names})")
    raise ValueError(f"nvme_reject status: expected a number or a name, got {raw!r}")


def _nvme_reject(v: Mapping[str, object]) -> bytes:
    _only(v, ("status", "recfmt"), "nvme_reject")
    if "status" not in v:
        raise ValueError("nvme_reject: status is required")
    return nvme_rdma.CmReject(sts=status_value(v["status"]),
                              recfmt=_int(v, "recfmt", 0, _U16, 0)).encode()


def _smbd(v: Mapping[str, object]) -> bytes:
    order = v.get("byte_order", "big")
    _only(v, ("ird", "ord", "byte_order"), "smbd")
    if order not in ("big", "little"):
        raise ValueError(f"smbd byte_order: expected \"big\" or \"little\", got {order!r}")
    return encode_legacy(_int(v, "ird", 0, 0xFFFFFFFF, 16, only=False),
                         _int(v, "ord", 0, 0xFFFFFFFF, 16, only=False), str(order))


def _iser(v: Mapping[str, object]) -> bytes:
    _only(v, ("zbva", "send_with_invalidate"), "iser")
    flags = (0 if _bool(v, "zbva", False) else iser.ISER_ZBVA_NOT_SUP) \
        | (0 if _bool(v, "send_with_invalidate", False) else iser.ISER_SEND_W_INV_NOT_SUP)
    return iser.CmHeader(flags).encode()


def _rpcrdma(v: Mapping[str, object]) -> bytes:
    _only(v, ("send_size", "recv_size", "remote_invalidate", "version"), "rpcrdma")
    sizes = []
    for key in ("send_size", "recv_size"):
        size = _int(v, key, 1024, 256 * 1024, 1024, only=False)
        if size % 1024:
            raise ValueError(f"rpcrdma {key}: {size} is not a multiple of 1024 (RFC 8797 "
                             "sizes are whole KiB)")
        sizes.append(size)
    flags = rpcrdma.CMP_F_SND_W_INV_OK if _bool(v, "remote_invalidate", False) else 0
    return rpcrdma.ConnectPrivate(_int(v, "version", 0, 255, 1, only=False), flags,
                                  sizes[0], sizes[1]).encode()


FORMATS: dict[str, Callable[[Mapping[str, object]], bytes]] = {
    "nvme": _nvme, "nvme_accept": _nvme_accept, "nvme_reject": _nvme_reject,
    "smbd": _smbd, "iser": _iser, "rpcrdma": _rpcrdma,
}
"""Each format's encoder, by the key a scenario gives."""

_FIELDS = {"nvme": ("qid", "hrqsize", "hsqsize", "cntlid", "recfmt"),
           "nvme_accept": ("crqsize", "recfmt")}


def encode_private_data(spec: Mapping[str, object]) -> bytes:
    """The bytes of ``{format: {field: value}}``; a one-line :class:`ValueError` for
    anything else (no format, two formats, an unknown field, a value out of range)."""
    if len(spec) != 1:
        raise ValueError(f"private data by format: give exactly one of {', '.join(FORMATS)}"
                         f", got {', '.join(spec) or 'none'}")
    ((name, fields),) = spec.items()
    encoder = FORMATS.get(name)
    if encoder is None:
        raise ValueError(f"private data format {name!r} unknown (formats: "
                         f"{', '.join(FORMATS)})")
    if not isinstance(fields, Mapping):
        raise ValueError(f"private data format {name}: expected a table of fields, got "
                         f"{fields!r}")
    if name in _FIELDS:
        _only(fields, _FIELDS[name], name)
    return encoder(fields)


def _only(v: Mapping[str, object], allowed: tuple[str, ...], name: str) -> None:
    extra = [k for k in v if k not in allowed]
    if extra:
        raise ValueError(f"{name}: unknown field {extra[0]!r} (fields: {', '.join(allowed)})")


def _int(v: Mapping[str, object], key: str, lo: int, hi: int, default: int, *,
         only: bool = True) -> int:
    raw = v.get(key, default)
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise ValueError(f"{key}: expected an integer, got {raw!r}")
    if not lo <= raw <= hi:
        raise ValueError(f"{key}: {raw} out of range {lo}..{hi}")
    return raw


def _bool(v: Mapping[str, object], key: str, default: bool) -> bool:
    raw = v.get(key, default)
    if not isinstance(raw, bool):
        raise ValueError(f"{key}: expected true or false, got {raw!r}")
    return raw


def private_data(**spec: Mapping[str, object]) -> bytes:
    """The Python API's spelling: ``private_data(nvme={"qid": 1, "hsqsize": 127})``."""
    return encode_private_data(spec)
