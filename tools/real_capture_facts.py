"""Decode a classic pcap of Ethernet/IPv4/TCP/MPA with ``struct`` alone (no mpa_emu, no
scapy) into the facts the pcaps/real sidecars record: per TCP connection the SYN options,
the MPA request and reply (RFC 5044 section 7.1, RFC 6581 section 4), every FPDU
(RFC 5044 section 6) with its DDP/RDMAP header (RFC 5041 section 4, RFC 5040 section 4),
every FIN and RST, data sent after a FIN; per frame the TCP checksum verdict.

Frame numbers are 1-based, as Wireshark counts. Segments are taken in capture order
(the captures here have no loss or reordering); the IP total length bounds the TCP
payload, so Ethernet padding is never payload.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import crc32c

KEY_REQ, KEY_REP = b"MPA ID Req Frame", b"MPA ID Rep Frame"
OPCODES = {0: "RDMA Write", 1: "RDMA Read Request", 2: "RDMA Read Response", 3: "Send",
           4: "Send with Invalidate", 5: "Send with SE", 6: "Send with SE and Invalidate",
           7: "Terminate"}
TCP_OPTION_NAMES = {2: "MSS", 3: "WS", 4: "SACK_PERM", 8: "TS"}


def read_pcap(path: Path) -> list[bytes]:
    """Frames of a classic little-endian microsecond pcap with Ethernet link type."""
    raw = path.read_bytes()
    magic, _, _, _, _, _, linktype = struct.unpack_from("<IHHiIII", raw, 0)
    if magic != 0xA1B2C3D4 or linktype != 1:
        raise ValueError(f"{path}: not a little-endian Ethernet pcap")
    frames, offset = [], 24
    while offset < len(raw):
        _, _, caplen, _ = struct.unpack_from("<IIII", raw, offset)
        frames.append(raw[offset + 16:offset + 16 + caplen])
        offset += 16 + caplen
    return frames


def ones_sum(data: bytes) -> int:
    """RFC 1071 one's-complement sum, folded to 16 bits (not complemented)."""
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f">{len(data) // 2}H", data))
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def tcp_parts(frame: bytes) -> dict[str, Any]:
    """IPv4 + TCP header fields of one Ethernet frame."""
    ethertype = struct.unpack_from(">H", frame, 12)[0]
    if ethertype != 0x0800:
        raise ValueError(f"ethertype 0x{ethertype:04x} is not IPv4")
    ip = frame[14:]
    ihl = (ip[0] & 0x0F) * 4
    total_len = struct.unpack_from(">H", ip, 2)[0]
    src, dst = ip[12:16], ip[16:20]
    tcp = ip[ihl:total_len]
    sport, dport, seq, ack, off_flags, window, checksum = struct.unpack_from(
        ">HHIIHHH", tcp, 0)
    doff = (off_flags >> 12) * 4
    pseudo = src + dst + struct.pack(">BBH", 0, 6, len(tcp))
    partial = ones_sum(pseudo)
    if ones_sum(pseudo + tcp) == 0xFFFF:
        verdict = "good"
    elif checksum == partial:
        verdict = "offload_partial"
    else:
        verdict = "bad"
    return {"src": ".".join(map(str, src)), "dst": ".".join(map(str, dst)),
            "sport": sport, "dport": dport, "seq": seq, "ack": ack,
            "flags": off_flags & 0x1FF, "window": window, "checksum": checksum,
            "pseudo_sum": partial, "checksum_verdict": verdict,
            "options": tcp[20:doff], "payload": tcp[doff:]}


def syn_options(raw: bytes) -> list[str]:
    """Names of the TCP options in order (NOP and EOL included)."""
    names, i = [], 0
    while i < len(raw):
        kind = raw[i]
        if kind == 0:
            names.append("EOL")
            break
        if kind == 1:
            names.append("NOP")
            i += 1
            continue
        length = raw[i + 1]
        value = raw[i + 2:i + length]
        name = TCP_OPTION_NAMES.get(kind, f"kind{kind}")
        if kind == 2:
            name += f"={struct.unpack('>H', value)[0]}"
        elif kind == 3:
            name += f"={value[0]}"
        names.append(name)
        i += length
    return names


def mpa_frame(data: bytes, frame_no: int) -> dict[str, Any]:
    flags, rev, pd_length = struct.unpack_from(">BBH", data, 16)
    pdata = data[20:20 + pd_length]
    out: dict[str, Any] = {
        "frame": frame_no, "key": data[:16].decode(), "flags": flags,
        "M": bool(flags & 0x80), "C": bool(flags & 0x40), "R": bool(flags & 0x20),
        "S": bool(flags & 0x10), "rev": rev, "pd_length": pd_length,
        "private_data_hex": pdata.hex()}
    ulp = pdata
    if flags & 0x10 and rev == 2:
        # RFC 6581 section 4.1: |P2P|zero-length FPDU| IRD(14) |Write|Read| ORD(14)
        # (irdma's IETF_PEER_TO_PEER, IETF_FLPDU_ZERO_LEN, IETF_RDMA0_WRITE/READ)
        word1, word2 = struct.unpack_from(">HH", pdata, 0)
        out["rfc6581"] = {"ird": word1 & 0x3FFF, "ord": word2 & 0x3FFF,
                          "peer_to_peer": bool(word1 & 0x8000),
                          "zero_length_fpdu_rtr": bool(word1 & 0x4000),
                          "write_rtr": bool(word2 & 0x8000),
                          "read_rtr": bool(word2 & 0x4000)}
        ulp = pdata[4:]
    out["private_data_text"] = ulp.decode("ascii", "replace")
    return out


def fpdu_facts(unit: bytes, frame_no: int, crc_in_use: bool) -> dict[str, Any]:
    ulen = struct.unpack_from(">H", unit, 0)[0]
    end = 2 + ulen + (-(ulen + 2) % 4)
    crc = struct.unpack_from("<I", unit, end)[0]
    correct = crc32c.crc32c(unit[:end])
    ddp = unit[2:2 + ulen]
    tagged = bool(ddp[0] & 0x80)
    facts: dict[str, Any] = {
        "frame": frame_no, "ulpdu_length": ulen, "pad": end - 2 - ulen,
        "crc_hex": f"{crc:08x}",
        "crc": "zero" if crc == 0 else ("correct" if crc == correct else "wrong"),
        "crc_in_use": crc_in_use, "tagged": tagged, "last": bool(ddp[0] & 0x40),
        "opcode": ddp[1] & 0x0F, "opcode_name": OPCODES[ddp[1] & 0x0F]}
    if not tagged:
        qn, msn, mo = struct.unpack_from(">III", ddp, 6)
        facts.update(qn=qn, msn=msn, mo=mo, payload_length=ulen - 18)
    else:
        stag, to = struct.unpack_from(">IQ", ddp, 2)
        facts.update(stag=stag, to=to, payload_length=ulen - 14)
    return facts


def capture_facts(path: Path) -> dict[str, Any]:
    """Everything the sidecar states about ``path``, decoded from its bytes."""
    frames = read_pcap(path)
    conns: dict[tuple[Any, ...], dict[str, Any]] = {}
    order: list[tuple[Any, ...]] = []
    verdicts: dict[str, list[int]] = {"good": [], "offload_partial": [], "bad": []}
    for number, frame in enumerate(frames, 1):
        seg = tcp_parts(frame)
        verdicts[seg["checksum_verdict"]].append(number)
        a, b = (seg["src"], seg["sport"]), (seg["dst"], seg["dport"])
        key = tuple(sorted([a, b]))
        if key not in conns:
            conns[key] = {"client": f"{a[0]}:{a[1]}", "server": f"{b[0]}:{b[1]}",
                          "syn_options": {}, "streams": {"client": b"", "server": b""},
                          "ends": {"client": [], "server": []},
                          "fins": [], "rsts": [], "data_after_fin": [], "segments": []}
            order.append(key)
        conn = conns[key]
        side = "client" if f"{a[0]}:{a[1]}" == conn["client"] else "server"
        flags = seg["flags"]
        if flags & 0x02:
            conn["syn_options"][side] = syn_options(seg["options"])
        if flags & 0x04:
            conn["rsts"].append({"frame": number, "from": side})
        if seg["payload"]:
            other = "server" if side == "client" else "client"
            if any(f["from"] == other for f in conn["fins"]):
                conn["data_after_fin"].append({"frame": number, "from": side,
                                               "bytes": len(seg["payload"])})
            conn["streams"][side] += seg["payload"]
            conn["ends"][side].append((len(conn["streams"][side]), number))
        if flags & 0x01:
            conn["fins"].append({"frame": number, "from": side})
    return {"frames": len(frames), "checksums": verdicts,
            "connections": [_mpa_connection(conns[k]) for k in order]}


def _frame_at(ends: list[tuple[int, int]], offset: int) -> int:
    """Frame whose segment holds stream byte ``offset - 1`` (the unit's last byte)."""
    for end, number in ends:
        if end >= offset:
            return number
    raise ValueError(f"stream offset {offset} beyond the captured data")


def _mpa_connection(conn: dict[str, Any]) -> dict[str, Any]:
    streams, ends = conn.pop("streams"), conn.pop("ends")
    conn.pop("segments")
    out = dict(conn)
    cstream, sstream = streams["client"], streams["server"]
    if not (cstream.startswith(KEY_REQ) and sstream.startswith(KEY_REP)):
        out["mpa"] = None
        out["bytes"] = {"client": len(cstream), "server": len(sstream)}
        return out
    req_len = 20 + struct.unpack_from(">H", cstream, 18)[0]
    rep_len = 20 + struct.unpack_from(">H", sstream, 18)[0]
    request = mpa_frame(cstream, _frame_at(ends["client"], 1))
    reply = mpa_frame(sstream, _frame_at(ends["server"], 1))
    crc_in_use = request["C"] or reply["C"]  # RFC 5044 section 7.1
    out["mpa"] = {"request": request, "reply": reply, "crc_in_use": crc_in_use}
    fpdus = []
    for side, stream, start in (("client", cstream, req_len), ("server", sstream, rep_len)):
        offset = start
        while offset + 2 <= len(stream):
            ulen = struct.unpack_from(">H", stream, offset)[0]
            size = 2 + ulen + (-(ulen + 2) % 4) + 4
            if offset + size > len(stream):
                break
            unit = stream[offset:offset + size]
            facts = fpdu_facts(unit, _frame_at(ends[side], offset + size), crc_in_use)
            facts["first_frame"] = _frame_at(ends[side], offset + 1)
            facts["from"] = side
            fpdus.append(facts)
            offset += size
    out["fpdus"] = sorted(fpdus, key=lambda f: (f["frame"], f["first_frame"]))
    return out
