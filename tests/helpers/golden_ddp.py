"""DDP/RDMAP FPDUs written out by hand from RFC 5040, RFC 5041 and RFC 5044 section 4."""

from __future__ import annotations

H = bytes.fromhex
# Hypothesis deadlines are timings; speed is measured by tools/bench_ddp.py instead.

# RDMA Read Request used as RTR: DDP control 0x41 (T=0, L=1, DV=1), RDMAP control 0x41
# (RV=1, opcode 1), RsvdULP 0, QN 1, MSN 1, MO 0, sink STag 0xabcd, sink TO 0, size 0,
# source STag 0x1234, source TO 0 (irdma_sc_send_rtt, ctrl.c).
READ_RTR_ULPDU = H("41" "41" "00000000" "00000001" "00000001" "00000000"
                   "0000abcd" "0000000000000000" "00000000" "00001234" "0000000000000000")
# tshark: "ULPDU length: 46 bytes", "CRC check: 0x90aa1e5d (Good CRC32)".
READ_RTR_FPDU = H("002e") + READ_RTR_ULPDU + H("90aa1e5d")

# Zero-length RDMA Write as RTR: DDP control 0xc1 (T=1, L=1, DV=1), RDMAP 0x40 (opcode 0),
# STag 0, TO 0. tshark: "ULPDU length: 14 bytes", "CRC check: 0xa30572ab (Good CRC32)".
WRITE_RTR_ULPDU = H("c1" "40" "00000000" "0000000000000000")
WRITE_RTR_FPDU = H("000e") + WRITE_RTR_ULPDU + H("a30572ab")

# Send, QN 0, MSN 1, MO 0, 41 bytes of data: ULPDU 59 bytes, so 3 bytes of PAD.
# tshark: "Padding: 000000", "CRC check: 0x7377f809 (Good CRC32)".
SEND_PAYLOAD = b"iWARP Send from the responder: 41 bytes.."
SEND_ULPDU = H("41" "43" "00000000" "00000000" "00000001" "00000000") + SEND_PAYLOAD
SEND_FPDU = H("003b") + SEND_ULPDU + H("000000") + H("7377f809")

# Terminate, QN 2, MSN 1: Layer DDP (1), EType untagged buffer error (2), error code
# invalid QN (1), M and D set, DDP Segment Length 0x3b, the Send's 18-byte DDP header.
# tshark: "ULPDU length: 42 bytes", "CRC check: 0x8790c8a6 (Good CRC32)".
TERM_ULPDU = (H("41" "47" "00000000" "00000002" "00000001" "00000000")
              + H("12" "01" "c000") + H("003b") + SEND_ULPDU[:18])
TERM_FPDU = H("002a") + TERM_ULPDU + H("8790c8a6")
