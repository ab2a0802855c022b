"""How TCP payloads become MPA layers.

MPA has no port: Wireshark finds it with a heuristic (the 16-byte key at the start of a
segment) and per-conversation state (FPDUs only after an accepting reply). Scapy has no
per-conversation state in plain dissection, so there are three ways in:

* ``Ether(raw)``: the :class:`MPA` layer is bound to TCP ahead of the port bindings
  (like tshark's ``tcp.try_heuristic_first:TRUE``). A payload starting with a key
  dissects as :class:`MPARequest`/:class:`MPAReply`; any other payload gets exactly the
  class TCP would have given it without this module (usually Raw).
* ``MPAFPDU(payload)``: the caller knows the bytes are FPDUs.
* Stream reassembly: :meth:`MPA.tcp_reassemble` is scapy's ``TCPSession`` hook
  (``sniff(offline=..., session=TCPSession)``). It keeps Wireshark-like state per TCP
  conversation, so frames split over segments are joined and FPDUs that follow an
  accepting reply dissect as :class:`MPAFPDU`. :func:`dissect_stream` runs it over a list.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from scapy.config import conf
from scapy.layers.inet import TCP
from scapy.packet import Packet
from scapy.sessions import streamcls

from mpa_emu.frames.connect import MPAReply, MPARequest
from mpa_emu.frames.fpdu import MPAFPDU, ULPDU_LENGTH_SIZE, fpdu_wire_length
from mpa_emu.wire import seq as seq_space
from mpa_emu.wire.mpa import (
    FLAG_CRC,
    FLAG_REJECT,
    FRAME_SIZE,
    KEY_REP,
    KEY_REQ,
    KEY_SIZE,
    MAX_PRIV_DATA_LEN,
)

STATE_KEY = "mpa_emu.wire.mpa"


KEY_STEM = KEY_REQ[:8]  # "MPA ID R", shared by both keys


def connect_frame_class(payload: bytes) -> type[Packet] | None:
    """The request or reply class when ``payload`` starts with its 16-byte key.

    A 16-byte key that starts like one ("MPA ID R") but is neither also gets a class, so
    the frame shows with ``problem`` naming the bad key (irdma_parse_mpa: "Unexpected MPA
    Key", -EINVAL) instead of vanishing into Raw: the reply class when the next bytes
    read "ep", else the request class. Wireshark shows such a frame as plain TCP.
    """
    head = bytes(payload[:KEY_SIZE])
    if head == KEY_REQ:
        return MPARequest
    if head == KEY_REP:
        return MPAReply
    if len(head) == KEY_SIZE and head.startswith(KEY_STEM):
        return MPAReply if head[8:10] == b"ep" else MPARequest
    return None


def _key_prefix(payload: bytes) -> bool:
    return len(payload) < KEY_SIZE and (KEY_REQ.startswith(payload) or
                                        KEY_REP.startswith(payload))


def fallback_class(underlayer: Packet | None, payload: bytes) -> Any:
    """The class ``underlayer`` would pick for ``payload`` if :class:`MPA` were not bound."""
    if underlayer is None:
        return conf.raw_layer
    for layer_type in underlayer.aliastypes:
        for fields, cls in layer_type.payload_guess:
            if cls is MPA:
                continue
            try:
                if all(underlayer.getfieldval(k) == v for k, v in fields.items()):
                    return cls
            except AttributeError:
                continue
    return underlayer.default_payload_class(payload)


@dataclass
class ConversationState:
    """What a TCP conversation has shown so far (Wireshark's ``mpa_state``)."""

    request_seen: bool = False
    full_operation: bool = False  # after an MPA reply with R=0 every segment is FPDUs
    crc: bool = False  # C in the request or the reply


class MPA(Packet):
    """Heuristic MPA entry point bound to TCP. ``MPA(payload)`` returns the request or
    reply layer for a payload starting with a key, otherwise the layer TCP would choose."""

    name = "MPA"
    fields_desc: ClassVar[list[Any]] = []

    @classmethod
    def dispatch_hook(cls, _pkt: bytes | None = None, *args: Any, **kargs: Any) -> Any:
        if _pkt is None:
            return MPARequest
        frame = connect_frame_class(_pkt)
        if frame is not None:
            return frame
        return fallback_class(kargs.get("_underlayer"), _pkt)

    @classmethod
    def tcp_reassemble(cls, data: bytes, metadata: dict[str, Any],
                       session: dict[str, Any]) -> Packet | None:
        """Scapy ``TCPSession`` hook: return one whole MPA frame or FPDU from the start of
        ``data`` (the rest as Padding, which the session feeds back), or ``None`` to wait
        for more bytes. Streams that are not MPA go to the class TCP would have used."""
        if not data:
            return None
        state = session.setdefault(STATE_KEY, ConversationState())
        ended = bool(metadata.get("tcp_end"))
        frame = connect_frame_class(data)
        if frame is not None:
            if len(data) < FRAME_SIZE:
                return _wait_or_take(frame, data, FRAME_SIZE, metadata, ended)
            flags, _rev, pd_length = struct.unpack_from("!BBH", data, KEY_SIZE)
            # Above 512 the length cannot be trusted (RFC 5044 section 7.1): take what is here.
            total = len(data) if pd_length > MAX_PRIV_DATA_LEN else FRAME_SIZE + pd_length
            packet = _wait_or_take(frame, data, total, metadata, ended)
            if packet is not None and bytes(data[:KEY_SIZE]) in (KEY_REQ, KEY_REP):
                _update_state(state, frame, flags)  # a bad key changes nothing
            return packet
        if not state.full_operation and _key_prefix(data) and not ended:
            metadata["tcp_min_len"] = KEY_SIZE
            return None
        if state.full_operation:
            if len(data) < ULPDU_LENGTH_SIZE:
                need = ULPDU_LENGTH_SIZE
            else:
                need = fpdu_wire_length(struct.unpack_from("!H", data)[0])
            fpdu = _wait_or_take(MPAFPDU, data, need, metadata, ended)
            if fpdu is not None and not state.crc:
                # RFC 5044 section 7.1: with C clear in both frames the CRC is ignored.
                layer = fpdu.getlayer(MPAFPDU)
                if layer is not None:
                    layer.crc_not_negotiated()
            return fpdu
        original = metadata.get("original")
        tcp = original[TCP] if original is not None and TCP in original else None
        delegate = streamcls(fallback_class(tcp, data))
        result: Packet | None = delegate(data, metadata, session)
        return result


def _wait_or_take(cls: type[Packet], data: bytes, total: int, metadata: dict[str, Any],
                  ended: bool) -> Packet | None:
    if len(data) < total:
        if not ended:
            metadata["tcp_min_len"] = total
            return None
        return cls(data)  # the stream ended: dissect what there is (marked truncated)
    packet = cls(data[:total])
    if len(data) > total:
        packet = packet / conf.padding_layer(data[total:])
    return packet


def _update_state(state: ConversationState, frame: type[Packet], flags: int) -> None:
    state.crc = state.crc or bool(flags & FLAG_CRC)
    if frame is MPARequest:
        state.request_seen = True
    elif not flags & FLAG_REJECT:
        state.full_operation = True


@dataclass
class _Direction:
    """Bytes of one direction of a TCP connection not yet made into frames."""

    buffer: bytes = b""
    start_seq: int = 0  # sequence number of buffer[0]
    next_seq: int | None = None  # the next new byte expected


def _take_padding(packet: Packet) -> bytes:
    pad = packet.getlayer(conf.padding_layer)
    if pad is None:
        return b""
    rest = bytes(pad.load)
    if pad.underlayer is not None:
        pad.underlayer.remove_payload()
    return rest


def _tcp_payload(tcp: Packet) -> bytes:
    """The segment's data: the TCP payload without the Ethernet padding scapy hangs at
    the end of the layer chain (the IP length ends the segment, RFC 791 section 3.1,
    RFC 8200 section 3), so a 60-byte RST carries no data."""
    data = bytes(tcp.payload)
    pad = tcp.getlayer(conf.padding_layer)
    if pad is not None:
        data = data[:len(data) - len(bytes(pad))]
    return data


def _stack(frames: list[Packet]) -> Packet:
    head = frames[0]
    for frame in frames[1:]:
        head = head / frame
    return head


def dissect_stream(packets: Iterable[Packet]) -> list[Packet]:
    """Dissect a capture in order with TCP reassembly and per-conversation MPA state.

    It applies :meth:`MPA.tcp_reassemble` (the hook scapy's ``TCPSession`` uses) to each
    direction's byte stream. The result follows the ``TCPSession`` convention:

    * a segment that completes one or more frames comes out once, carrying those whole
      frames (coalesced FPDUs stacked as ``MPAFPDU/MPAFPDU``), with its TCP sequence
      number set to the first byte of the first frame (IP length and checksums are
      recomputed when that differs from the segment as captured);
    * a segment holding only part of a frame is not returned; its bytes come out with
      the segment that completes the frame;
    * segments without payload (SYN, ACK, FIN, RST) and frames that are not TCP come out
      as they are; a frame still incomplete when its direction ends (FIN or RST) comes out
      with that segment, marked truncated;
    * retransmitted bytes are skipped; after a gap in sequence space the partial bytes
      before it are dropped from reassembly and the stream restarts at the new segment;
    * a SYN starts a new connection: the MPA state of the old one on the same ports is
      forgotten.
    """
    directions: dict[tuple[bytes, int, bytes, int], _Direction] = {}
    sessions: dict[tuple[bytes, int, bytes, int], dict[str, Any]] = {}
    out: list[Packet] = []
    for pkt in packets:
        fresh = pkt.__class__(bytes(pkt))
        fresh.time = pkt.time
        if TCP not in fresh or fresh[TCP].underlayer is None:
            out.append(fresh)
            continue
        tcp = fresh[TCP]
        net = tcp.underlayer
        src, dst = net.src, net.dst
        key = (str(src).encode(), int(tcp.sport), str(dst).encode(), int(tcp.dport))
        conv = min(key, (key[2], key[3], key[0], key[1]))
        flow = directions.setdefault(key, _Direction())
        session = sessions.setdefault(conv, {})
        payload = _tcp_payload(tcp)
        seq = int(tcp.seq)
        if tcp.flags.S:
            # A new connection on these ports (irdma's v1 retry reuses them after a RST):
            # forget the old one's MPA state and bytes.
            session.clear()
            flow.buffer, flow.next_seq = b"", seq_space.add(seq, 1)
            seq = seq_space.add(seq, 1)
        if payload and flow.next_seq is not None:
            behind = seq_space.diff(flow.next_seq, seq)
            if behind >= len(payload):
                payload = b""  # all retransmitted
            elif behind > 0:
                payload, seq = payload[behind:], flow.next_seq
            elif behind < 0:
                flow.buffer = b""  # a gap: what came before can never complete
        if payload:
            if not flow.buffer:
                flow.start_seq = seq
            flow.buffer += payload
            flow.next_seq = seq_space.add(seq, len(payload))
        ended = bool(tcp.flags.F or tcp.flags.R)
        frames: list[Packet] = []
        first_seq = flow.start_seq
        while flow.buffer:
            metadata: dict[str, Any] = {"original": fresh, "tcp_end": ended}
            got = MPA.tcp_reassemble(flow.buffer, metadata, session)
            if got is None:
                break
            rest = _take_padding(got)
            flow.start_seq = seq_space.add(flow.start_seq, len(flow.buffer) - len(rest))
            flow.buffer = rest
            frames.append(got)
        if frames:
            if int(tcp.seq) != first_seq or _tcp_payload(tcp) != b"".join(map(bytes, frames)):
                tcp.seq = first_seq
                tcp.chksum = None
                if hasattr(net, "chksum"):
                    net.chksum = None
                if hasattr(net, "len"):
                    net.len = None
                if hasattr(net, "plen"):
                    net.plen = None
            tcp.remove_payload()
            tcp.add_payload(_stack(frames))
            out.append(fresh)
        elif not _tcp_payload(tcp) or not payload:
            out.append(fresh)
    return out


def install_bindings() -> None:
    """Bind :class:`MPA` as TCP's first payload guess (idempotent)."""
    if any(cls is MPA for _, cls in TCP.payload_guess):
        return
    TCP.payload_guess = [({}, MPA), *TCP.payload_guess]


def uninstall_bindings() -> None:
    """Remove the :class:`MPA` binding from TCP, e.g. for code that wants every TCP
    payload as Raw; :func:`install_bindings` puts it back."""
    TCP.payload_guess = [entry for entry in TCP.payload_guess if entry[1] is not MPA]
