"""A one-line fingerprint of each side of a connection, with the evidence.

Three shapes are told apart, each from what is on the wire:

- irdma's own TCP: the SYN or SYN-ACK carries exactly ``MSS, WS, EOL``
  (``irdma_send_syn``) and the window field is 65535 (``rcv_wnd`` 0x3FFFC >> 2, set in
  ``irdma_make_cm_node``); its MPA frames have flags 0x40 or 0x50 (C always set,
  ``irdma_build_mpa_v1/v2``), and v2 frames carry P2P; a request offers both the Write
  and Read RTR, a reply chooses Read when offered.
- a Linux TCP stack (siw, a userspace iWARP library over sockets): the SYN carries SACK
  permitted and timestamps besides MSS and WS (``tcp_syn_options``).
- siw's MPA defaults: rev 2 with the RFC 6581 block but without P2P (``peer_to_peer``
  off), or, as responder, the Write RTR chosen where Read was offered too.
"""

from __future__ import annotations

from mpa_emu.views.inspection.report import ConnectionReport, Direction, MpaInfo
from mpa_emu.wire.mpa import FLAG_CRC, FLAG_ENHANCED

_KIND_NAMES = {0: "EOL", 1: "NOP", 2: "MSS", 3: "WS", 4: "SACK", 8: "TS"}
IRDMA_WINDOW = 65535
IRDMA_SYN_OPTIONS = (2, 3, 0)


def tcp_shape(d: Direction) -> str:
    """What the SYN of one side says about its TCP stack, with the evidence."""
    if d.syn_frame is None:
        return "no SYN in the capture"
    kinds = d.option_kinds
    shown = ", ".join(_KIND_NAMES.get(k, f"kind {k}") for k in kinds) or "none"
    evidence = f"SYN options {shown}; window {d.syn_window}"
    if kinds == IRDMA_SYN_OPTIONS and d.syn_window == IRDMA_WINDOW:
        return f"irdma-shaped TCP ({evidence})"
    if 4 in kinds and 8 in kinds:
        return f"Linux-like TCP stack ({evidence})"
    return f"TCP ({evidence})"


def mpa_shape(m: MpaInfo | None, other: MpaInfo | None) -> str:
    """What an MPA frame says about its sender's MPA layer, with the evidence."""
    if m is None:
        return ""
    head = f"MPA rev {m.rev}, flags 0x{m.flags:02x}"
    if m.has_block:
        head += ", P2P" if m.p2p else ", no P2P"
        if m.request:
            head += f", offers {'+'.join(m.rtr_names()) or 'no'} RTR"
        else:
            head += f", chose {'+'.join(m.rtr_names()) or 'no'} RTR"
    crc = bool(m.flags & FLAG_CRC)
    if crc and m.rev == 1 and m.flags & ~0x20 == FLAG_CRC:
        return f"{head}: like irdma at rev 1"
    if crc and m.has_block and m.p2p and m.flags & ~0x20 == FLAG_CRC | FLAG_ENHANCED:
        if m.request and m.rtr_names() == ["write", "read"]:
            return f"{head}: irdma's defaults"
        if not m.request and other is not None and "read" in other.rtr_names() \
                and m.rtr_names() == ["read"]:
            return f"{head}: irdma's defaults"
    if m.has_block and not m.p2p:
        return f"{head}: siw's defaults (peer_to_peer off)"
    if not m.request and other is not None and set(other.rtr_names()) >= {"read", "write"} \
            and m.rtr_names() == ["write"]:
        return f"{head}: siw-like (chose Write where Read was offered too)"
    if not crc:
        return f"{head}: not irdma (irdma always sets C)"
    return head


def fingerprints(rep: ConnectionReport, client: Direction, server: Direction) -> None:
    """One line per side into ``rep.fingerprints``, ending with the stack the side is
    judged as (``rep.stacks``, :mod:`mpa_emu.judge`)."""
    judged = {s.side: s for s in rep.stacks}
    for side, d, mine, theirs in (("client", client, rep.request, rep.reply),
                                  ("server", server, rep.reply, rep.request)):
        parts = [tcp_shape(d), mpa_shape(mine, theirs)]
        line = f"{side}: " + "; ".join(p for p in parts if p)
        stack = judged.get(side)
        if stack is not None:
            how = "given by --profile" if stack.source == "profile" else "judged"
            line += f" => {stack.stack} ({how})"
        rep.fingerprints.append(line)
