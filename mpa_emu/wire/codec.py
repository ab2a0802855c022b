"""Wire codec: :class:`~mpa_emu.wire.segment.Segment` values to Ethernet frames and back.

Every frame the emulator sends or receives passes through :func:`encode` or
:func:`decode`, so both are written for speed (one precompiled ``struct`` format per
frame shape, ``pack_into`` a pre-sized ``bytearray``, checksums from one big integer).
:func:`to_scapy` and :func:`from_scapy` translate to and from the user's language,
scapy packets; the core itself never sees scapy objects.

Frame shape (what :func:`encode` writes, and all :func:`decode` accepts):

* Ethernet II, optionally one 802.1Q tag (TCI = ``pcp << 13 | vlan``, DEI 0);
* IPv4 (version 4, IHL 5, no options, DF from ``seg.df``, protocol 6) or IPv6
  (traffic class = ``seg.tos``, flow label ``seg.flow_label``, hop limit = ``seg.ttl``,
  next header TCP, no extension headers);
* TCP with ``seg.options`` padded with EOL (0) bytes to a multiple of 4, and nothing
  added when they already are one: irdma's SYN options (MSS 4 + WS 3 + EOL 1 = 8
  bytes, ``irdma_send_syn``) give a data offset of 7.

``seg.flags`` holds the low 12 bits of the TCP offset/flags word: the eight classic
flags, the AE (ex-NS) bit 0x100 and the three reserved bits, so a decoded frame
re-encodes to the same bytes. IPv6 has no identification or DF bit: ``ip_id`` and
``df`` are not written for IPv6 and decode as ``0`` and ``True``.

Ethernet padding: frames shorter than 60 bytes (the 64-byte minimum without the FCS)
are zero-padded to 60, as a NIC pads them on the wire and as a capture at the
receiver or on a tap shows them. A capture taken at the sending host shows the frame
before the NIC pads it; ``encode(seg, pad=False)`` writes that form. A tagged frame
is padded to 60 bytes with its tag, as a software-tagged frame leaves the host (a NIC
that inserts the tag after padding sends 64). :func:`decode`
takes the segment's extent from the IPv4 total length or IPv6 payload length and
ignores whatever trails it (padding, or an FCS left in by the capture).

Checksums: :func:`encode` computes the IPv4 header checksum (RFC 791 section 3.1) and
the TCP checksum over the IPv4 or IPv6 pseudo-header (RFC 9293 section 3.1, RFC 8200
section 8.1). :func:`decode` verifies both and raises :class:`DecodeError` with reason
``BAD_IP_CHECKSUM`` or ``BAD_TCP_CHECKSUM``: a NIC drops such frames before the CM
sees them, so the caller must be able to tell.
"""

from __future__ import annotations

import struct
from enum import StrEnum
from typing import TYPE_CHECKING, Final, cast

from mpa_emu.errors import MpaEmuError
from mpa_emu.wire.segment import Segment

if TYPE_CHECKING:
    from scapy.packet import Packet

ETH_P_IP: Final = 0x0800
ETH_P_IPV6: Final = 0x86DD
ETH_P_8021Q: Final = 0x8100
IPPROTO_TCP: Final = 6
ETH_ZLEN: Final = 60  # minimum Ethernet frame without the FCS (IEEE 802.3 clause 4.4.2)
MAX_TCP_OPTIONS: Final = 40  # data offset is 4 bits: at most 60 header bytes

_IPV4_DF: Final = 0x4000
_IPV4_MF: Final = 0x2000
_IPV4_RESERVED: Final = 0x8000
_IPV4_FRAG_OFFSET: Final = 0x1FFF
_TCI_DEI = 0x1000
_TCP_FLAGS_MASK: Final = 0x0FFF

# IPv6 next-header values that are extension headers (RFC 8200 section 4, RFC 4302,
# RFC 4303, RFC 6275, RFC 7401, RFC 5533), named for error messages.
_IPV6_EXTENSIONS = {
    0: "Hop-by-Hop Options",
    43: "Routing",
    44: "Fragment",
    50: "ESP",
    51: "AH",
    60: "Destination Options",
    135: "Mobility",
    139: "HIP",
    140: "Shim6",
    59: "No Next Header",
}

# One format per frame shape, each covering L2 + L3 + the fixed TCP header.
_TCP = "HHIIHHHH"  # sport dport seq ack offset|flags window checksum urg_ptr
_V4 = "BBHHHBBH4s4s"  # ver|ihl tos total id flags|frag ttl proto checksum src dst
_V6 = "IHBB16s16s"  # ver|tc|flow payload_len next_header hop_limit src dst
_ETH_V4: Final = struct.Struct("!6s6sH" + _V4 + _TCP)
_ETH_V6: Final = struct.Struct("!6s6sH" + _V6 + _TCP)
_VLAN_V4: Final = struct.Struct("!6s6sHHH" + _V4 + _TCP)
_VLAN_V6: Final = struct.Struct("!6s6sHHH" + _V6 + _TCP)
_ETH_TYPE = struct.Struct("!H")
_VLAN_TAG = struct.Struct("!HH")
_IPV4_HEADER = struct.Struct("!" + _V4)
_IPV6_HEADER = struct.Struct("!" + _V6)
_TCP_HEADER = struct.Struct("!" + _TCP)


class DecodeFailure(StrEnum):
    """Why :func:`decode` refused a frame (``DecodeError.reason``), for traces."""

    TRUNCATED = "truncated"
    NOT_IP = "not_ip"
    BAD_IP_HEADER = "bad_ip_header"
    BAD_IP_CHECKSUM = "bad_ip_checksum"
    IP_FRAGMENT = "ip_fragment"
    UNSUPPORTED = "unsupported"
    NOT_TCP = "not_tcp"
    BAD_TCP_HEADER = "bad_tcp_header"
    BAD_TCP_CHECKSUM = "bad_tcp_checksum"


class DecodeError(MpaEmuError, ValueError):
    """A frame that is not a well-formed Ethernet [+802.1Q] + IPv4/IPv6 + TCP segment.

    ``reason`` classifies the failure; the message says exactly what was wrong.
    """

    def __init__(self, reason: DecodeFailure, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class EncodeError(MpaEmuError, ValueError):
    """A :class:`Segment` that cannot be put on the wire (bad field sizes or ranges)."""


# ---- checksum --------------------------------------------------------------------

def ones_complement_sum(data: bytes | bytearray | memoryview) -> int:
    """The 16-bit one's-complement sum of ``data`` (odd length padded with a zero byte),
    reduced modulo 0xFFFF: 0 stands for both +0 and -0 (RFC 1071 section 2).

    Since 2**16 is 1 modulo 0xFFFF, the big-endian integer of the data has the same
    residue as the sum of its 16-bit words; one ``int.from_bytes`` replaces the loop.
    """
    value = int.from_bytes(data, "big")
    if len(data) & 1:
        value <<= 8
    return value % 0xFFFF


def internet_checksum(data: bytes | bytearray | memoryview, initial: int = 0) -> int:
    """The Internet checksum (RFC 1071) of ``data``, with ``initial`` (a non-negative
    extra sum of 16-bit words, such as a pseudo-header's) added in."""
    total = int.from_bytes(data, "big")
    if len(data) & 1:
        total <<= 8
    total += initial
    if total == 0:
        return 0xFFFF  # an all-zero sum is +0, whose complement is 0xFFFF
    # A positive multiple of 0xFFFF folds to -0 (0xFFFF), whose complement is 0.
    return -total % 0xFFFF


# ---- encode ----------------------------------------------------------------------

def encode(seg: Segment, *, pad: bool = True) -> bytes:
    """Serialise ``seg`` as an Ethernet frame with correct IPv4 and TCP checksums.

    Short frames are zero-padded to 60 bytes unless ``pad`` is false (see the module
    docstring). Raises :class:`EncodeError` when a field does not fit its wire field.
    """
    options = seg.options
    if len(options) & 3:
        options += b"\x00" * (4 - (len(options) & 3))  # EOL padding
    olen = len(options)
    if olen > MAX_TCP_OPTIONS:
        raise EncodeError(f"TCP options are {olen} bytes (padded); at most 40 fit")
    if len(seg.src_mac) != 6 or len(seg.dst_mac) != 6:
        raise EncodeError("MAC addresses must be 6 bytes")
    flags = seg.flags
    if flags & ~_TCP_FLAGS_MASK:
        raise EncodeError(f"TCP flags 0x{flags:x} do not fit in 12 bits")
    payload = seg.payload
    tcp_len = 20 + olen + len(payload)
    offset_flags = (5 + (olen >> 2)) << 12 | flags
    src_ip = seg.src_ip
    dst_ip = seg.dst_ip
    # Checksums are computed from the field values rather than from packed bytes: every
    # field starts on a 16-bit boundary and 2**16 is 1 modulo 0xFFFF, so a 32-bit field
    # adds its value, and options and payload add the integers of their bytes (the
    # payload starts on a 32-bit boundary; an odd length is padded with a zero byte).
    # Only residues modulo 0xFFFF matter, so each address adds its residue
    # (:func:`_address_sum`) and every sum stays a small int.
    addr_sum = _address_sum(src_ip) + _address_sum(dst_ip)
    sport, dport, seq, ack = seg.sport, seg.dport, seg.seq, seg.ack
    window, urg_ptr, ttl, tos = seg.window, seg.urg_ptr, seg.ttl, seg.tos
    data_sum = 0
    if payload:
        data_sum = int.from_bytes(payload, "big") % 0xFFFF
        if len(payload) & 1:
            data_sum = (data_sum << 8) % 0xFFFF
    tcp_sum = (sport + dport + seq + ack + offset_flags + window + urg_ptr + addr_sum
               + IPPROTO_TCP + tcp_len + data_sum)
    if options:
        tcp_sum += int.from_bytes(options, "big") % 0xFFFF
    vlan = seg.vlan
    try:
        if len(src_ip) == 4 and len(dst_ip) == 4:
            ip_total = 20 + tcp_len
            if ip_total > 0xFFFF:
                raise EncodeError(f"IPv4 total length {ip_total} exceeds 65535")
            frag = _IPV4_DF if seg.df else 0
            ip_id = seg.ip_id
            # RFC 791 section 3.1 header checksum over the 20 header bytes.
            ip_csum = -(0x4500 + tos + ip_total + ip_id + frag + (ttl << 8) + IPPROTO_TCP
                        + addr_sum) % 0xFFFF
            tcp_csum = -tcp_sum % 0xFFFF
            if vlan is None:
                head = _ETH_V4.pack(
                    seg.dst_mac, seg.src_mac, ETH_P_IP,
                    0x45, tos, ip_total, ip_id, frag, ttl, IPPROTO_TCP, ip_csum,
                    src_ip, dst_ip,
                    sport, dport, seq, ack, offset_flags, window, tcp_csum, urg_ptr)
            else:
                head = _VLAN_V4.pack(
                    seg.dst_mac, seg.src_mac, ETH_P_8021Q, _tci(seg.pcp, vlan), ETH_P_IP,
                    0x45, tos, ip_total, ip_id, frag, ttl, IPPROTO_TCP, ip_csum,
                    src_ip, dst_ip,
                    sport, dport, seq, ack, offset_flags, window, tcp_csum, urg_ptr)
        elif len(src_ip) == 16 and len(dst_ip) == 16:
            if tcp_len > 0xFFFF:
                raise EncodeError(f"IPv6 payload length {tcp_len} exceeds 65535")
            if seg.flow_label & ~0xFFFFF:
                raise EncodeError(f"IPv6 flow label {seg.flow_label} does not fit 20 bits")
            if tos & ~0xFF:
                raise EncodeError(f"traffic class {tos} does not fit 8 bits")
            vtf = 0x60000000 | tos << 20 | seg.flow_label
            tcp_csum = -tcp_sum % 0xFFFF
            if vlan is None:
                head = _ETH_V6.pack(
                    seg.dst_mac, seg.src_mac, ETH_P_IPV6,
                    vtf, tcp_len, IPPROTO_TCP, ttl, src_ip, dst_ip,
                    sport, dport, seq, ack, offset_flags, window, tcp_csum, urg_ptr)
            else:
                head = _VLAN_V6.pack(
                    seg.dst_mac, seg.src_mac, ETH_P_8021Q, _tci(seg.pcp, vlan), ETH_P_IPV6,
                    vtf, tcp_len, IPPROTO_TCP, ttl, src_ip, dst_ip,
                    sport, dport, seq, ack, offset_flags, window, tcp_csum, urg_ptr)
        else:
            raise EncodeError(
                f"IP addresses must both be 4 or both be 16 bytes, got "
                f"{len(src_ip)} and {len(dst_ip)}")
    except struct.error as exc:
        raise EncodeError(f"segment field out of range: {exc}") from None
    frame = head + options + payload
    if pad and len(frame) < ETH_ZLEN:
        frame += bytes(ETH_ZLEN - len(frame))
    return frame


_ADDRESS_SUMS: Final[dict[bytes, int]] = {}
_ADDRESS_SUMS_MAX: Final = 4096


def _address_sum(ip: bytes) -> int:
    """The 16-bit word sum of a packed address modulo 0xFFFF, remembered per address (a
    network has few; the table starts over past :data:`_ADDRESS_SUMS_MAX`)."""
    found = _ADDRESS_SUMS.get(ip)
    if found is None:
        if len(_ADDRESS_SUMS) >= _ADDRESS_SUMS_MAX:
            _ADDRESS_SUMS.clear()
        found = _ADDRESS_SUMS[ip] = int.from_bytes(ip, "big") % 0xFFFF
    return found


def _tci(pcp: int, vlan: int) -> int:
    if not 0 <= vlan <= 0xFFF:
        raise EncodeError(f"VLAN id {vlan} out of range 0..4095")
    if not 0 <= pcp <= 7:
        raise EncodeError(f"802.1Q priority {pcp} out of range 0..7")
    return pcp << 13 | vlan


def round_trips(seg: Segment) -> bool:
    """True when ``decode(encode(seg)) == seg`` is certain without running either.

    The conditions are exactly where the two differ from the identity: the payload and
    options are plain ``bytes``, the options need no padding, every field fits its wire
    field, no priority is set without a VLAN tag, and the fields of the other IP version
    hold what :func:`decode` fills in (IPv4: flow label 0; IPv6: IP id 0 and DF set).
    A host that knows this may hand the segment to its peer without the wire bytes.
    """
    options = seg.options
    payload = seg.payload
    if type(payload) is not bytes or type(options) is not bytes or len(options) & 3:
        return False
    if len(options) > MAX_TCP_OPTIONS or len(seg.src_mac) != 6 or len(seg.dst_mac) != 6:
        return False
    if seg.flags & ~_TCP_FLAGS_MASK or not (0 <= seg.sport <= 0xFFFF and 0 <= seg.dport <= 0xFFFF
                                            and 0 <= seg.seq <= 0xFFFFFFFF
                                            and 0 <= seg.ack <= 0xFFFFFFFF
                                            and 0 <= seg.window <= 0xFFFF
                                            and 0 <= seg.urg_ptr <= 0xFFFF
                                            and 0 <= seg.ttl <= 0xFF and 0 <= seg.tos <= 0xFF):
        return False
    vlan = seg.vlan
    if vlan is None:
        if seg.pcp != 0:
            return False
    elif not (0 <= vlan <= 0xFFF and 0 <= seg.pcp <= 7):
        return False
    ip_len = len(seg.src_ip)
    if ip_len != len(seg.dst_ip) or type(seg.df) is not bool:
        return False
    if ip_len == 4:
        return (seg.flow_label == 0 and 0 <= seg.ip_id <= 0xFFFF
                and 40 + len(options) + len(payload) <= 0xFFFF)
    return (ip_len == 16 and seg.ip_id == 0 and seg.df
            and 20 + len(options) + len(payload) <= 0xFFFF)


# ---- decode ----------------------------------------------------------------------

# The fast path's names, bound once (Final: the compiled build reads them as constants).
_UNPACK_V4: Final = struct.Struct("!6s6sHBBHHHBBHIIHHIIHHHH").unpack_from
"""``_ETH_V4`` with the addresses as integers (their checksum words)."""
_V4Fields = tuple[bytes, bytes, int, int, int, int, int, int, int, int, int, int, int, int,
                  int, int, int, int, int, int, int]
_FROM_BYTES: Final = int.from_bytes
_NOT_WHOLE: Final = _IPV4_RESERVED | _IPV4_MF | _IPV4_FRAG_OFFSET
"""The IPv4 reserved flag, MF and the fragment offset: a frame with any of them set is
not a whole datagram :class:`Segment` can hold."""


def decode(frame: bytes | bytearray | memoryview) -> Segment:
    """Parse an Ethernet frame into a :class:`Segment`.

    Raises :class:`DecodeError` for anything that is not Ethernet II [+ one 802.1Q tag]
    + IPv4 or IPv6 + TCP, for truncated headers, and for a bad IPv4 header or TCP
    checksum. Fields a :class:`Segment` cannot hold are refused rather than dropped
    (reason ``UNSUPPORTED``): IPv4 options, the IPv4 reserved flag, IPv6 extension
    headers, the 802.1Q DEI bit. Bytes after the IP datagram (Ethernet padding, a
    captured FCS) are ignored.
    """
    data = frame if type(frame) is bytes else bytes(frame)
    n = len(data)
    if n >= 54:
        # The usual frame (untagged IPv4 without options, TCP) in one unpack, its
        # checksums from the field values; any doubt, and the checks below say what is
        # wrong. (Typed: the compiled build does the arithmetic on machine integers.)
        fields: _V4Fields = _UNPACK_V4(data)
        (dst_mac, src_mac, ethertype, ver_ihl, tos, total, ip_id, frag, ttl, proto, csum,
         src, dst, sport, dport, seq, ack, offset_flags, window, tcp_csum, urg_ptr) = fields
        end = 14 + total
        hdr_end = 34 + (offset_flags >> 12) * 4
        # RFC 1071: a header's words, its checksum included, sum to -0 (0 modulo 0xFFFF);
        # since 2**16 is 1 modulo 0xFFFF, a 32-bit field counts as its value.
        if (ethertype == ETH_P_IP and ver_ihl == 0x45 and proto == IPPROTO_TCP
                and not frag & _NOT_WHOLE and 54 <= hdr_end <= end <= n
                and not (0x4500 + tos + total + ip_id + frag + (ttl << 8) + IPPROTO_TCP
                         + csum + src + dst) % 0xFFFF):
            options = data[54:hdr_end]
            payload = data[hdr_end:end]
            # RFC 9293 section 3.1: the pseudo-header, the fixed header, the options and
            # the payload (an odd length padded with a zero byte).
            tcp_sum = (src + dst + IPPROTO_TCP + total - 20 + sport + dport + seq + ack
                       + offset_flags + window + tcp_csum + urg_ptr)
            if options:
                tcp_sum += _FROM_BYTES(options, "big") % 0xFFFF
            if payload:
                data_sum = _FROM_BYTES(payload, "big")
                if len(payload) & 1:
                    data_sum <<= 8
                tcp_sum += data_sum % 0xFFFF
            if not tcp_sum % 0xFFFF:
                return Segment(src_mac, dst_mac, data[26:30], data[30:34], sport, dport, seq,
                               ack, offset_flags & 0x0FFF, window, options, payload, None, 0,
                               ttl, tos, ip_id, bool(frag & _IPV4_DF), urg_ptr, 0)
    frame = data
    if n < 14:
        raise DecodeError(DecodeFailure.TRUNCATED, f"frame of {n} bytes has no Ethernet header")
    (ethertype,) = _ETH_TYPE.unpack_from(frame, 12)
    vlan: int | None = None
    pcp = 0
    off = 14
    if ethertype == ETH_P_8021Q:
        if n < 18:
            raise DecodeError(DecodeFailure.TRUNCATED,
                              f"frame of {n} bytes ends inside the 802.1Q tag")
        tci, ethertype = _VLAN_TAG.unpack_from(frame, 14)
        if tci & _TCI_DEI:
            raise DecodeError(DecodeFailure.UNSUPPORTED, "802.1Q tag with the DEI bit set")
        vlan = tci & 0xFFF
        pcp = tci >> 13
        off = 18
    if ethertype == ETH_P_IP:
        if n - off < 20:
            raise DecodeError(DecodeFailure.TRUNCATED,
                              f"IPv4 header needs 20 bytes, {n - off} present")
        (ver_ihl, tos, total, ip_id, frag, ttl, proto, _csum, src_ip,
         dst_ip) = _IPV4_HEADER.unpack_from(frame, off)
        if ver_ihl >> 4 != 4:
            raise DecodeError(DecodeFailure.BAD_IP_HEADER,
                              f"ethertype IPv4 but IP version {ver_ihl >> 4}")
        ihl = ver_ihl & 0xF
        if ihl < 5:
            raise DecodeError(DecodeFailure.BAD_IP_HEADER, f"IPv4 IHL {ihl} is below 5")
        if ihl > 5:
            raise DecodeError(DecodeFailure.UNSUPPORTED,
                              f"IPv4 options ({(ihl - 5) * 4} bytes) are not supported")
        if total < 20:
            raise DecodeError(DecodeFailure.BAD_IP_HEADER,
                              f"IPv4 total length {total} is shorter than its header")
        if off + total > n:
            raise DecodeError(DecodeFailure.TRUNCATED,
                              f"IPv4 total length {total} but only {n - off} bytes present")
        addr_sum = int.from_bytes(frame[off + 12:off + 20], "big")
        # RFC 1071: the header's words, checksum included, sum to -0 (0 modulo 0xFFFF).
        if ((ver_ihl << 8) + tos + total + ip_id + frag + (ttl << 8) + proto + _csum
                + addr_sum) % 0xFFFF:
            raise DecodeError(DecodeFailure.BAD_IP_CHECKSUM,
                              f"bad IPv4 header checksum 0x{_csum:04x}")
        if frag & (_IPV4_MF | _IPV4_FRAG_OFFSET):
            raise DecodeError(DecodeFailure.IP_FRAGMENT,
                              f"IPv4 fragment (MF {int(bool(frag & _IPV4_MF))}, "
                        f"offset {(frag & _IPV4_FRAG_OFFSET) * 8})")
        if frag & _IPV4_RESERVED:
            raise DecodeError(DecodeFailure.UNSUPPORTED, "IPv4 reserved flag bit set")
        if proto != IPPROTO_TCP:
            raise DecodeError(DecodeFailure.NOT_TCP, f"IPv4 protocol {proto} is not TCP")
        tcp_off = off + 20
        tcp_len = total - 20
        df = bool(frag & _IPV4_DF)
        flow_label = 0
    elif ethertype == ETH_P_IPV6:
        if n - off < 40:
            raise DecodeError(DecodeFailure.TRUNCATED,
                              f"IPv6 header needs 40 bytes, {n - off} present")
        vtf, tcp_len, next_header, ttl, src_ip, dst_ip = _IPV6_HEADER.unpack_from(frame, off)
        if vtf >> 28 != 6:
            raise DecodeError(DecodeFailure.BAD_IP_HEADER,
                              f"ethertype IPv6 but IP version {vtf >> 28}")
        if next_header != IPPROTO_TCP:
            ext = _IPV6_EXTENSIONS.get(next_header)
            if ext is not None:
                raise DecodeError(DecodeFailure.UNSUPPORTED,
                                  f"IPv6 extension header {next_header} ({ext}) is not supported")
            raise DecodeError(DecodeFailure.NOT_TCP, f"IPv6 next header {next_header} is not TCP")
        tcp_off = off + 40
        if tcp_off + tcp_len > n:
            raise DecodeError(DecodeFailure.TRUNCATED,
                              f"IPv6 payload length {tcp_len} but only {n - tcp_off} bytes present")
        addr_sum = int.from_bytes(frame[off + 8:off + 40], "big")
        tos = (vtf >> 20) & 0xFF
        flow_label = vtf & 0xFFFFF
        ip_id = 0
        df = True
    else:
        raise DecodeError(DecodeFailure.NOT_IP, f"ethertype 0x{ethertype:04x} is not IPv4 or IPv6")
    if tcp_len < 20:
        raise DecodeError(DecodeFailure.TRUNCATED,
                          f"TCP header needs 20 bytes, the IP payload has {tcp_len}")
    (sport, dport, seq, ack, offset_flags, window, _tcsum,
     urg_ptr) = _TCP_HEADER.unpack_from(frame, tcp_off)
    hdr_len = (offset_flags >> 12) * 4
    if hdr_len < 20:
        raise DecodeError(DecodeFailure.BAD_TCP_HEADER,
                          f"TCP data offset {hdr_len >> 2} is below 5")
    if hdr_len > tcp_len:
        raise DecodeError(DecodeFailure.TRUNCATED,
                          f"TCP data offset {hdr_len >> 2} ({hdr_len} bytes) exceeds the "
                    f"{tcp_len}-byte segment")
    options = frame[tcp_off + 20:tcp_off + hdr_len]
    payload = frame[tcp_off + hdr_len:tcp_off + tcp_len]
    data_sum = int.from_bytes(payload, "big")
    if len(payload) & 1:
        data_sum <<= 8
    # The TCP checksum over the pseudo-header (RFC 9293 section 3.1, RFC 8200 section
    # 8.1) from field values, as in encode().
    if (sport + dport + seq + ack + offset_flags + window + _tcsum + urg_ptr + addr_sum
            + IPPROTO_TCP + tcp_len + int.from_bytes(options, "big") + data_sum) % 0xFFFF:
        raise DecodeError(DecodeFailure.BAD_TCP_CHECKSUM, f"bad TCP checksum 0x{_tcsum:04x}")
    return Segment(
        frame[6:12], frame[0:6], src_ip, dst_ip, sport, dport, seq, ack,
        offset_flags & _TCP_FLAGS_MASK, window, options, payload, vlan, pcp, ttl, tos,
        ip_id, df, urg_ptr, flow_label)


# ---- scapy -----------------------------------------------------------------------

def to_scapy(seg: Segment, *, pad: bool = True) -> Packet:
    """The frame of ``seg`` as a scapy packet (``Ether`` dissected from :func:`encode`'s
    bytes, so every length and checksum is the one on the wire and any bound upper
    layers, MPA included, dissect the payload)."""
    import scapy.layers.inet  # binds IP and TCP under Ether
    import scapy.layers.inet6  # noqa: F401
    from scapy.layers.l2 import Ether

    return cast("Packet", Ether(encode(seg, pad=pad)))


def from_scapy(pkt: Packet, *, src_mac: bytes | None = None,
               dst_mac: bytes | None = None) -> Segment:
    """A :class:`Segment` from a scapy packet the user built or captured.

    ``pkt`` is built with scapy's own rules (lengths and checksums left unset are
    computed) and then decoded, so a deliberately wrong checksum raises
    :class:`DecodeError` just as the NIC would drop the frame. A packet that starts at
    ``IP``/``IPv6`` gets an Ethernet header from ``src_mac``/``dst_mac``.
    """
    from scapy.layers.inet import IP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import Ether

    if isinstance(pkt, IP | IPv6):
        if src_mac is None or dst_mac is None:
            raise DecodeError(DecodeFailure.NOT_IP,
                              "packet starts at the IP layer: pass src_mac and dst_mac")
        pkt = Ether(src=_mac_str(src_mac), dst=_mac_str(dst_mac)) / pkt
    elif not isinstance(pkt, Ether):
        raise DecodeError(DecodeFailure.NOT_IP,
                          f"expected an Ether, IP or IPv6 packet, got {type(pkt).__name__}")
    try:
        raw = bytes(pkt)
    except Exception as exc:  # scapy raises anything from a field it cannot build
        raise DecodeError(DecodeFailure.UNSUPPORTED,
                          f"scapy could not build the packet: {exc}") from None
    return decode(raw)


def _mac_str(mac: bytes) -> str:
    return ":".join(f"{b:02x}" for b in mac)
