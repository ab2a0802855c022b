"""The causes ``mpa-emu explain`` names, each with the kernel functions behind it and the
fix (docs/explain.md prints the same catalogue)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Cause:
    """One entry of the catalogue."""

    key: str
    title: str
    functions: str
    fix: str


_CAUSES = (
    Cause("ok", "established", "siw_accept / irdma_accept / c4iw_accept_cr; cma_iw_handler",
          "nothing to fix"),
    Cause("not-iwarp", "a TCP connection without MPA", "-",
          "nothing to fix: this connection does not speak iWARP"),
    Cause("rejected", "rejected by the responder's application (R set in the reply)",
          "rdma_reject -> iw_cm_reject -> siw_reject / irdma_reject / c4iw_reject_cr; "
          "the initiator: siw_proc_mpareply, irdma_cm_event_handler (MPA_REJECT), "
          "process_mpa_reply",
          "read the reject's private data: the responder's application says why; fix what it "
          "names (a wrong service, no resources, an unsupported protocol version)"),
    Cause("no-p2p", "no P2P (RFC 6581 A bit) where a stack requires it",
          "irdma_negotiate_mpa_v2_ird_ord (irdma needs A in the request and in the reply); "
          "process_mpa_reply (cxgb4 with peer2peer needs the RTR it asked for)",
          "have the other side send P2P: siw's peer_to_peer is a constant in siw_main.c (a "
          "siw built with peer_to_peer = true sends it), iw_cxgb4 peer2peer=1 (the default); "
          "or connect stacks that agree (siw to siw, siw to cxgb4 with peer2peer=0)"),
    Cause("rtr-mismatch", "the reply chose no RTR type the initiator offered",
          "siw_proc_mpareply (Terminate LLP/MPA 0x07 No matching RTR option), "
          "process_mpa_reply (\"RTR mismatch, sending TERM\"), "
          "irdma_negotiate_mpa_v2_ird_ord (-EOPNOTSUPP)",
          "offer an RTR type the responder takes: iw_cxgb4 p2p_type (module parameter: 1 "
          "RDMA Read, the default, 0 RDMA Write), siw's rtr_type (a constant in siw_cm.c: "
          "Write and Read); irdma offers Write and Read and chooses Read"),
    Cause("ird-ord", "IRD/ORD insufficient (the responder's ORD above the initiator's IRD)",
          "irdma_negotiate_mpa_v2_ird_ord (-EINVAL), siw_proc_mpareply (Terminate LLP/MPA "
          "0x06 Insufficient IRD resources), process_mpa_reply (\"Insufficient IRD, "
          "sending TERM\")",
          "in rdma_conn_param give the responder an initiator_depth (ORD) no larger than "
          "the initiator's responder_resources (IRD), within the device's max_qp_rd_atom "
          "and max_qp_init_rd_atom"),
    Cause("pd-over-limit", "private data over a stack's limit",
          "irdma_parse_mpa (PD_Length > 512, or a segment over 544 bytes: -EOVERFLOW), "
          "siw_recv_mpa_rr (MPA_MAX_PRIVDATA 256: -EPROTO), process_mpa_request / "
          "process_mpa_reply (MPA_MAX_PRIVATE_DATA 256)",
          "send less private data (rdma_conn_param.private_data_len): irdma takes 512 bytes "
          "of PD_Length, siw and cxgb4 256, the RFC 6581 block counting 4 of them"),
    Cause("revision", "MPA revision mismatch (and irdma's fallback to rev 1)",
          "irdma_parse_mpa (-EINVAL), irdma_handle_rst_pkt (the v2 -> v1 retry), "
          "siw_proc_mpareq / siw_proc_mpareply (rev > 2: -EPROTO; an enhanced request "
          "needs a rev 2 reply with the enhanced flag: -ECONNRESET), process_mpa_request / "
          "process_mpa_reply (rev above mpa_rev)",
          "run both sides at one revision: iw_cxgb4 mpa_rev=1|2 (module parameter), siw's "
          "mpa_version (a constant in siw_main.c), irdma retries at rev 1 by itself"),
    Cause("wrong-key", "an MPA frame that is not the one due (wrong or missing key)",
          "irdma_parse_mpa (\"Unexpected MPA Key\": -EINVAL, RST), siw_proc_mpareq "
          "(-EPROTO), siw_proc_mpareply (Terminate LLP/MPA 0x04 Invalid MPA Request or "
          "Reply frame), process_mpa_request / process_mpa_reply (abort)",
          "the peer does not speak MPA where it should, or answers on the wrong side "
          "(both initiators, or a proxy in between): check what listens on the port"),
    Cause("crc-mismatch", "FPDU CRC errors (or one side insisting on CRC)",
          "siw_proc_mpareq / siw_proc_mpareply (mpa_crc_required, mpa_crc_strict), the "
          "receiver's CRC check (Terminate LLP/MPA 0x02 MPA CRC error)",
          "find what changes the bytes (a middlebox, a NIC offload) or the CRC byte order "
          "(little-endian CRC32c, RFC 5044 section 4); siw's mpa_crc_required and "
          "mpa_crc_strict are constants in siw_main.c, iw_cxgb4 crc_enabled is a module "
          "parameter"),
    Cause("markers", "MPA markers asked for where a stack does not do them",
          "siw_proc_mpareq (reject), siw_proc_mpareply (-ECONNREFUSED)",
          "turn markers off on the peer (iw_cxgb4 markers_enabled=0, the default; irdma "
          "sets M only for out-of-order mode)"),
    Cause("split-frame", "an MPA request or reply split over TCP segments",
          "irdma_parse_mpa (no reassembly: -EOVERFLOW, RST); siw_recv_mpa_rr and "
          "process_mpa_request reassemble",
          "make the peer send the frame in one segment: an MSS of at least 20 + PD_Length, "
          "TCP_NODELAY (siw sets it unless siw_tcp_nagle), no middlebox resegmenting"),
    Cause("mpa-timeout", "the MPA exchange timed out",
          "siw_cm_work_handler (SIW_CM_WORK_MPATIMEOUT: MPAREQ_TIMEOUT 10 s, MPAREP_TIMEOUT "
          "5 s), ep_timeout / process_timeout (iw_cxgb4 ep_timeout_secs, 60 s), "
          "irdma_cm_timer_tick (the request's retransmission schedule)",
          "make the peer answer in time (its listener, its application's accept); "
          "iw_cxgb4 ep_timeout_secs=N lengthens cxgb4's timer"),
    Cause("reset", "reset or closed during the MPA exchange",
          "the side that sent the RST or FIN: irdma_send_reset, siw's socket release, "
          "c4iw_ep_disconnect",
          "read the kernel log of the side that closed: its stack says why"),
    Cause("terminate", "a Terminate message ended the connection",
          "siw_init_terminate / siw_send_terminate, irdma's AE handling "
          "(irdma_bld_termhdr_ddp_rdma), c4iw_modify_qp (send_term)",
          "the Terminate's layer, type and code name the error; the header it quotes "
          "names the FPDU that caused it"),
    Cause("rx-overflow", "receive buffer overflow (a Send with no or too small a receive)",
          "the receiver's DDP untagged buffer check (Terminate DDP/untagged 0x02 no buffer "
          "available, 0x05 message too long)",
          "post receives before the peer sends (ibv_post_recv before rdma_accept / "
          "rdma_connect completes) and make them as large as the largest Send"),
    Cause("zero-length-rtr-refused", "the zero-length RTR was refused by the responder",
          "siw_rtr_data_ready (the first FPDU), irdma's RTS AE, cxgb4's FPDU_MODE rx",
          "offer and send an RTR type the responder takes (siw: a zero-length Write or "
          "Read, not a Send)"),
    Cause("data-after-fin", "data after a FIN",
          "tcp (RFC 9293 section 3.6); siw_cm_llp_state_change, irdma_handle_fin_pkt",
          "an application sent after its peer closed (legal half-close) or after its own "
          "shutdown (a bug of the sender)"),
    Cause("port-decoded-as-other",
          "Wireshark decodes the port as another protocol (MPA not shown)",
          "Wireshark's port table runs before the iwarp_mpa_tcp heuristic",
          "tshark -o tcp.try_heuristic_first:TRUE (Wireshark: Preferences > Protocols > "
          "TCP > Try heuristic sub-dissectors first)"),
    Cause("tcp-refused", "the TCP connection was refused (RST to the SYN)",
          "the responder's TCP: nothing listens on the port",
          "rdma_listen on the port at the responder; check a firewall"),
    Cause("tcp-timeout", "the SYN got no answer",
          "the initiator's TCP (SYN retransmissions)",
          "check the route, ARP/ND and firewalls between the two hosts"),
    Cause("incomplete", "the capture ends before the exchange does", "-",
          "capture longer, or from the start of the connection"),
    Cause("extra-bytes", "bytes after the MPA request or reply, before the answer to it",
          "siw_recv_mpa_rr (\"peer sent extra data\": -EPROTO, the socket released), "
          "process_mpa_request / process_mpa_reply (\"plen does not account for pkt "
          "size\": abort); irdma_parse_mpa ignores them up to its 544-byte buffer",
          "make the peer wait for the MPA reply (or, as initiator, send its RTR or first "
          "FPDU only after CONNECT_REPLY): siw and cxgb4 read exactly the frame and take "
          "anything behind it as a protocol violation; look for a middlebox coalescing "
          "segments"),
    Cause("ddp-version", "an FPDU with a DDP version other than 1",
          "siw_get_hdr (\"received ddp version unsupported\": Terminate DDP, tagged 0x04 or "
          "untagged 0x06 Invalid DDP version, RFC 5041 section 7.2); irdma's and cxgb4's "
          "adapters check DV in hardware",
          "the sender writes a DDP control byte RFC 5041 section 4.2 does not define: fix "
          "the sender (a userspace iWARP implementation, a test tool), or whatever rewrites "
          "the bytes in between"),
    Cause("rdmap-version", "an FPDU with an RDMAP version other than 1",
          "siw_get_hdr (\"received rdmap version unsupported\": Terminate RDMAP, remote "
          "operation 0x05 Invalid RDMAP version, RFC 5040 section 7.4)",
          "the sender writes an RDMAP control byte RFC 5040 section 4.2 does not define: "
          "fix the sender"),
    Cause("invalid-opcode", "an FPDU with an RDMAP opcode RFC 5040 does not define",
          "siw_get_hdr (\"received unknown packet type\": Terminate RDMAP, remote operation "
          "0x06 Unexpected OpCode, RFC 5040 section 7.4)",
          "the sender uses an opcode its peer does not know (RFC 5040 section 4.3 defines "
          "0 to 7; RFC 7306's atomics need both sides to support them)"),
    Cause("msn-error", "untagged messages out of MSN or MO order",
          "the receiver's untagged buffer check (RFC 5041 section 5.3: Terminate DDP, "
          "untagged 0x03 MSN range not valid, 0x04 Invalid MO); siw_proc_send / "
          "siw_rresp_check_ntoh",
          "segments were lost or reordered between the capture point and the receiver, or "
          "the sender numbers its messages wrongly (MSN starts at 1 and rises by one per "
          "message on each queue, MO by the bytes already sent, RFC 5041 section 5.1)"),
    Cause("reset-established", "reset after the connection was established",
          "the side that sent the RST: an application that destroyed its QP or cm_id "
          "without rdma_disconnect, an address removal (cma_netdev_callback, "
          "RDMA_CM_EVENT_ADDR_CHANGE / DEVICE_REMOVAL), a stack that aborts "
          "(irdma_send_reset, c4iw_ep_disconnect with abrupt set, siw_qp_llp_close)",
          "read the kernel log and the application of the side that reset: a graceful "
          "close is rdma_disconnect, which sends a FIN (a Terminate first only on error)"),
    Cause("bad-tcp", "malformed TCP or IP (a bad checksum, a bad option, a wrong ACK)",
          "the receiver's TCP drops the segment (tcp_v4_rcv / tcp_checksum_complete; "
          "irdma_check_syn, irdma_process_options)",
          "capture on a host that is neither end (a mirror port), or read the checksums as "
          "offload artefacts (--checksums offload); otherwise find what corrupts the frames"),
    Cause("cut-capture", "the capture was cut by its snap length where it matters",
          "-",
          "capture whole frames (tcpdump -s 0, the default since tcpdump 4.0; editcap "
          "without -s) to judge what the cut hides"),
    Cause("smbd-send-over-max-receive",
          "an SMB Direct message larger than the peer's negotiated MaxReceiveSize",
          "[MS-SMBD] 2.2.1/2.2.2 MaxReceiveSize, 3.1.5.1; smbd_post_send_iter "
          "(fs/smb/client/smbdirect.c), smb_direct_post_send_data "
          "(fs/smb/server/transport_rdma.c); the receiver's DDP untagged buffer check",
          "split messages above the peer's MaxReceiveSize into SMB Direct fragments "
          "(RemainingDataLength) or move the payload by RDMA Read/Write"),
    Cause("smbd-no-credit", "an SMB Direct message sent with no send credit left",
          "[MS-SMBD] 3.1.5.1 (one credit per message, granted by the peer's "
          "CreditsGranted); wait_for_send_credits (smbdirect.c, transport_rdma.c)",
          "block sending at zero credits until the peer grants more"),
    Cause("smbd-negotiate-refused",
          "the SMB Direct server refused the Negotiate Request",
          "[MS-SMBD] 2.2.2 Status; smb_direct_check_recvmsg, smb_direct_prepare "
          "(fs/smb/server/transport_rdma.c); smbd_negotiate (fs/smb/client/smbdirect.c)",
          "offer version 1.0 and ask for credits, MaxReceiveSize above 128 and "
          "MaxFragmentedSize above 131,072"),
    Cause("nvme-connect-rejected",
          "the NVMe-oF target rejected the connect (status in the reject's private data)",
          "nvmet_rdma_parse_cm_connect_req, nvmet_rdma_cm_reject "
          "(drivers/nvme/target/rdma.c); nvme_rdma_conn_rejected "
          "(drivers/nvme/host/rdma.c)",
          "read the status: connect with queue sizes, queue ID and record format the "
          "target takes (nvme connect --queue-size, --nr-io-queues)"),
    Cause("rpcrdma-inline-overflow",
          "an RPC-over-RDMA message sent inline above the peer's inline receive size",
          "RFC 8166 section 3.3, RFC 8797; rpcrdma_marshal_req (net/sunrpc/xprtrdma), "
          "svc_rdma_recvfrom",
          "send large calls with a Read list and large replies with a reply chunk or "
          "the write list"),
    Cause("iser-unsupported",
          "an iSER peer uses what the other's CM header says it does not support",
          "iser_route_handler (ISER_ZBVA_NOT_SUP, ISER_SEND_W_INV_NOT_SUP), "
          "isert_set_nego_params, isert_rdma_accept",
          "use Send with Invalidate and zero-based addresses only when both CM headers "
          "allow them"),
)

CAUSES: dict[str, Cause] = {c.key: c for c in _CAUSES}
"""Every cause by key, in catalogue order."""
