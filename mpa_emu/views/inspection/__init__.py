"""The story of every TCP connection in a capture, told the way an iWARP engineer reads it.

:func:`inspect_capture` reads any pcap or pcapng (ours or not; Ethernet with or without
802.1Q, Linux cooked, raw IP), groups frames into TCP connections and reports for each:
the handshake (who, ISNs, MSS/WS/SACK/TS), the MPA request and reply (version, flags,
IRD/ORD, RTR offered and chosen, private data in hex and text, reject reason), the RTR
(MPA v2 with the RFC 6581 block only) and every FPDU after the reply with its DDP/RDMAP
fields and, where CRC was negotiated, its CRC verdict, RDMAP-level findings (Read
Requests never answered, MSN gaps, Terminates), every FIN and RST, data after a FIN, a
fingerprint of each side, and everything malformed, including what irdma would refuse
(``irdma_parse_mpa`` has no reassembly). TCP checksums are read as a capture tool reads
them (:mod:`mpa_emu.capture.checksums`): by default a TX checksum offload artefact is a note.
Bad bytes never raise: they become findings.

The work is split over :mod:`~mpa_emu.capture.decode` (reading and decoding frames,
shared with diagram and replay),
:mod:`~mpa_emu.views.inspection.mpa_exchange` (handshake, streams, MPA frames),
:mod:`~mpa_emu.views.inspection.fpdus` (FPDUs and RDMAP),
:mod:`~mpa_emu.views.inspection.messages` (FPDUs grouped into messages, the FPDU a
Terminate answers),
:mod:`~mpa_emu.views.inspection.fingerprint`,
:mod:`~mpa_emu.views.inspection.connections` (the story per connection) and
:mod:`~mpa_emu.views.inspection.text` (output).
"""

from __future__ import annotations

from mpa_emu.capture.decode import (
    LINK_ETHERNET,
    LINK_IPV4,
    LINK_IPV6,
    LINK_RAW,
    LINK_SLL,
    LINK_SLL2,
    InspectError,
    RawFrame,
    TcpFrame,
    decode_frame,
    options_text,
    parse_tcp_options,
    read_frames,
)
from mpa_emu.views.inspection.connections import (
    IDLE_FRAMES,
    LINGER_FRAMES,
    inspect_capture,
    inspect_frames,
    stream_capture,
    stream_connections,
)
from mpa_emu.views.inspection.report import (
    CaptureReport,
    ConnectionReport,
    Direction,
    Finding,
    FpduInfo,
    MpaInfo,
)
from mpa_emu.views.inspection.text import (
    connection_block,
    connection_json,
    format_connection,
    format_report,
    fpdu_line,
    report_head,
    report_json,
    report_json_around,
)

__all__ = [
    "IDLE_FRAMES",
    "LINGER_FRAMES",
    "LINK_ETHERNET",
    "LINK_IPV4",
    "LINK_IPV6",
    "LINK_RAW",
    "LINK_SLL",
    "LINK_SLL2",
    "CaptureReport",
    "ConnectionReport",
    "Direction",
    "Finding",
    "FpduInfo",
    "InspectError",
    "MpaInfo",
    "RawFrame",
    "TcpFrame",
    "connection_block",
    "connection_json",
    "decode_frame",
    "format_connection",
    "format_report",
    "fpdu_line",
    "inspect_capture",
    "inspect_frames",
    "options_text",
    "parse_tcp_options",
    "read_frames",
    "report_head",
    "report_json",
    "report_json_around",
    "stream_capture",
    "stream_connections",
]
