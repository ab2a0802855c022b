"""MPA frames written out by hand from RFC 5044 section 7.1 and RFC 6581 section 5."""

from __future__ import annotations

H = bytes.fromhex
# Hypothesis deadlines are timings; speed is measured by tools/bench_ddp.py instead.
KEY_REQ_HEX = "4d504120494420526571204672616d65"  # "MPA ID Req Frame"
KEY_REP_HEX = "4d504120494420526570204672616d65"  # "MPA ID Rep Frame"

# irdma v2 request (irdma_build_mpa_v2): C|S = 0x50, rev 2, PD_Length 24 = RFC 6581 block
# P2P+IRD 16 (0x8010), WRITE0+READ0+ORD 16 (0xc010), then "hello from initiator".
V2_REQUEST = H(KEY_REQ_HEX + "50" "02" "0018"
               "8010c01068656c6c6f2066726f6d20696e69746961746f72")
# The accepting v2 reply of the same capture: READ0 chosen (0x4010), PD "welcome".
V2_REPLY = H(KEY_REP_HEX + "50" "02" "000b" "80104010") + b"welcome"
# irdma's reject (irdma_send_mpa_reject): C|R|S = 0x70, rev 2, PD_Length 16, block + "it's not you".
V2_REJECT = H(KEY_REP_HEX + "70" "02" "0010" "8010401069742773206e6f7420796f75")
# irdma v1 frames: flags C = 0x40, rev 1, no private data (irdma-cm section 4.2).
V1_REQUEST = H(KEY_REQ_HEX + "40" "01" "0000")
V1_REPLY = H(KEY_REP_HEX + "40" "01" "0000")
# SoftUiWarp's v1 request in uiwarp.pcap: no flags, rev 1, PD 0.
V1_REQUEST_NO_CRC = H(KEY_REQ_HEX + "00" "01" "0000")


