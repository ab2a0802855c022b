"""Bytes <-> typed values, with no scapy and no kernel policy.

:mod:`~mpa_emu.wire.segment` (the ``Segment`` value and ``Transmit``),
:mod:`~mpa_emu.wire.codec` (Ethernet/802.1Q/IPv4/IPv6/TCP encode and decode with
checksums), :mod:`~mpa_emu.wire.mpa` (MPA request/reply/reject frames, RFC 5044 section 7,
RFC 6581), :mod:`~mpa_emu.wire.ddp` (DDP/RDMAP headers, RFC 5041 and RFC 5040, FPDUs with
CRC32c) and :mod:`~mpa_emu.wire.addr` (addresses). The scapy layers in :mod:`mpa_emu.frames` read
and write the same bytes and are tested equal to these.
"""
