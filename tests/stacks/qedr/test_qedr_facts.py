"""qedr's registry record holds its own facts, each from its function: the CONNECT_REPLY
statuses of qed_iwarp_mpa_complete, the framing of qed_iwarp_connect with
qed_iwarp_setup's constants, the kernel map of qedr_iw_cm.c with every provider call and
event handler modelled."""

from __future__ import annotations

import errno

import pytest

from mpa_emu.live.peer_stacks import peer_stack
from mpa_emu.stacks import STACKS, parse_params
from mpa_emu.stacks.base import MODELLED, PeerFraming

MUST_MODEL = {"qedr_iw_connect", "qedr_iw_accept", "qedr_iw_reject", "qedr_iw_create_listen",
              "qedr_iw_destroy_listen", "qedr_iw_event_handler", "qedr_iw_mpa_request",
              "qedr_iw_mpa_reply", "qedr_iw_passive_complete", "qedr_iw_active_complete",
              "qedr_iw_issue_event", "qedr_iw_close_event", "qedr_iw_disconnect_event",
              "qedr_iw_disconnect_worker"}


def test_statuses_are_qed_iwarp_mpa_complete_s() -> None:
    st = STACKS["qedr"].statuses
    # IWARP_CONN_ERROR_MPA_ERROR_REJECT, _MPA_RST, _MPA_TIMEOUT
    assert (st.reject, st.reset, st.timeout) == (-errno.ECONNREFUSED, -errno.ECONNRESET,
                                                 -errno.EBUSY)


def test_defaults_are_qed_iwarp_setup_s() -> None:
    d = STACKS["qedr"].defaults()
    # MPA_NEGOTIATION_TYPE_ENHANCED, QED_IWARP_PARAM_CRC_NEEDED, QED_IWARP_PARAM_P2P,
    # SEND | WRITE | READ, QED_IWARP_TS_EN, no QED_IWARP_DA_EN, QED_IWARP_RCV_WND_SIZE_DEF
    assert (d["mpa_rev"], d["crc_needed"], d["peer2peer"], d["rtr_type"], d["timestamps"],
            d["delayed_ack"], d["rcv_wnd_size"]) == (2, True, True, 7, True, False, 262144)
    assert STACKS["qedr"].states == ("INIT", "MPA_REQ_RCVD", "MPA_OFFLOADED", "ESTABLISHED",
                                     "CLOSED")


@pytest.mark.parametrize(("params", "framing"), [
    ({}, PeerFraming(2, True, True, "both", 255, "none", False, None)),
    ({"rtr_type": 4}, PeerFraming(2, True, True, "read", 255, "none", False, None)),
    ({"peer2peer": False}, PeerFraming(2, False, True, "none", 255, "none", False, None)),
    ({"mpa_rev": 1, "crc_needed": False},
     PeerFraming(1, True, False, "both", 255, "none", False, None)),
])
def test_peer_framing(params: dict[str, object], framing: PeerFraming) -> None:
    assert peer_stack("qedr", params) == framing


def test_parameters_are_checked_by_range() -> None:
    with pytest.raises(ValueError, match=r"^qedr: rtr_type must be 0\.\.7, got 8$"):
        parse_params("qedr", {"rtr_type": 8})
    with pytest.raises(ValueError, match=r"^qedr: unknown parameter 'p2p_type'"):
        parse_params("qedr", {"p2p_type": 1})


def test_kernel_map_models_every_provider_call_and_handler() -> None:
    kmap = STACKS["qedr"].kernel_map
    assert len(kmap.functions) == 27 and kmap.kernel_version == "5.8"
    modelled = {e.function for e in kmap.entries if e.status == MODELLED}
    assert modelled >= MUST_MODEL
