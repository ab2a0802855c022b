"""``mpa-emu fuzz --mixed``: every ordered pair of registered stacks, parameters in and
just outside their ranges, through a hostile middlebox; the invariants catch what they
are for (small in CI)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mpa_emu.campaign.mixed import (
    Broken,
    MixedCase,
    MixedChunk,
    _sequence_problem,
    case_of,
    pairs,
    run_case,
    run_mixed_chunk,
)
from mpa_emu.stacks import STACKS
from mpa_emu.ulp.rdma_cm import RdmaCmEventType as Ev


def test_every_ordered_pair_of_registered_stacks_comes_in_turn() -> None:
    n = len(STACKS)
    assert len(pairs()) == n * n
    got = {(c.initiator, c.responder) for c in (case_of(5, i) for i in range(n * n))}
    assert got == {(a, b) for a in STACKS for b in STACKS}


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_a_parameter_just_outside_its_range_is_refused_in_one_line(stack: str) -> None:
    p = next(q for q in STACKS[stack].params if q.kind is int)
    case = MixedCase(0, stack, stack, ({p.name: p.maximum + 1}, {}), "accept", ())
    assert run_case(case) == (-1, 0)


def test_a_clean_case_ends_idle_with_its_outcome() -> None:
    steps, events = run_case(MixedCase(0, "irdma", "irdma", ({}, {}), "accept", ()))
    assert steps == 0 and events > 0


@pytest.mark.parametrize(("events", "problem"), [
    ([Ev.ESTABLISHED, Ev.DISCONNECTED], ""),
    ([Ev.CONNECT_REQUEST, Ev.ESTABLISHED, Ev.DISCONNECTED], ""),
    ([Ev.REJECTED], ""),
    ([Ev.DISCONNECTED], "DISCONNECTED before any connect outcome or request"),
    ([Ev.ESTABLISHED, Ev.DISCONNECTED, Ev.DISCONNECTED], "after DISCONNECTED"),
    ([Ev.REJECTED, Ev.ESTABLISHED], "after the failed connect"),
])
def test_the_rdma_cm_sequence_rule(events: list[Ev], problem: str) -> None:
    got = _sequence_problem(events)
    assert (problem in got) if problem else got == ""


def test_a_chunk_is_the_same_every_time() -> None:
    one, two = run_mixed_chunk(MixedChunk(3, 0, 40)), run_mixed_chunk(MixedChunk(3, 0, 40))
    assert one.ran == two.ran == 40
    assert (one.counts, one.steps, one.events) == (two.counts, two.steps, two.events)
    assert [f.message for f in one.failures] == [f.message for f in two.failures]


def test_broken_names_its_invariant() -> None:
    assert Broken("acks", "x").invariant == "acks"


def test_the_command_runs_and_refuses_mixing_modes() -> None:
    got = subprocess.run([sys.executable, "-m", "mpa_emu", "fuzz", "--mixed", "--cases",
                          "60", "--seed", "2"], capture_output=True, text=True, timeout=300)
    assert got.returncode in (0, 1), got.stderr
    assert "60 cases" in got.stdout and "Traceback" not in got.stderr
    bad = subprocess.run([sys.executable, "-m", "mpa_emu", "fuzz", "--mixed", "--two-cores"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


# Cases of `mpa-emu fuzz --mixed --cases 50000 --seed 34`, shrunk (steps and parameters
# removed while the failure stayed) before the fixes that they now guard.
SEED_34 = 34


@pytest.mark.parametrize("case", [
    # cxgb4 endpoint left in MORIBUND: its FIN acknowledged, the peer's never coming,
    # and no FIN_WAIT2 timer behind it (the adapter's CPL_ERR_FINWAIT2_TIMEDOUT abort)
    MixedCase(21, "irdma", "cxgb4", ({}, {}), "accept",
              ((2526343171, "disconnect", 596335386), (2197495901, "close", 525219265))),
    # cxgb4 cm_id destroyed while connecting: destroy_cm_id waits for the CONNECT_REPLY
    MixedCase(1315, "cxgb4", "irdma", ({"peer2peer": False}, {}), "accept",
              ((559909068, "close", 148201805),)),
    # a second accept (or a reject) while irdma_accept waits for the RTS AE runs after
    # it in the kernel: it must not take iw_cm's id out of CONN_RECV
    MixedCase(310, "irdma", "irdma", ({}, {}), "manual",
              ((2401204485, "accept", 22252664), (154360461, "forge", 114764470),
               (2681205392, "accept", 704664982))),
    MixedCase(937, "cxgb4", "irdma", ({"p2p_type": 14}, {}), "accept",
              ((648732140, "reject", 293660332),)),
], ids=["cxgb4-moribund", "cxgb4-destroy-connecting", "irdma-accept-twice",
        "irdma-reject-while-accepting"])
def test_seed_34_cases_now_pass(case: MixedCase) -> None:
    steps, events = run_case(case, SEED_34)
    assert steps == len(case.steps) and events > 0


@pytest.mark.parametrize("case", [
    # siw upcalls CLOSE before ESTABLISHED on a responder still waiting for the RTR
    MixedCase(344, "cxgb4", "siw", ({"p2p_type": 11}, {}), "accept", ()),
    # a second accept on a siw responder waiting for the RTR: iw_cm_accept's error path
    # leaves CONN_RECV, the later ESTABLISHED meets cm_conn_est_handler's BUG_ON
    MixedCase(3911, "irdma", "siw", ({}, {}), "accept", ((1088777937, "accept", 945083732),)),
], ids=["siw-close-before-established", "siw-accept-while-waiting-rtr"])
def test_seed_34_kernel_bugs_are_counted_apart(case: MixedCase) -> None:
    with pytest.raises(Broken) as exc:
        run_case(case, SEED_34)
    assert exc.value.invariant == "kernel-bug"
    assert "kernel's own bug: siw_" in exc.value.message


@pytest.mark.parametrize("case", [
    # qedr_iw_passive_complete: ESTABLISHED with the failed handshake's status (the
    # initiator's FIN while the RTR is awaited), then CLOSE: cm_conn_est_handler takes
    # the first in CONN_RECV, cm_close_handler the second; neither BUG()s
    MixedCase(573, "siw", "qedr", ({"peer_to_peer": True, "mpa_crc_strict": True}, {}),
              "accept", ()),
    # the same after the peer's RST while the request was held (a late accept); the ep
    # is freed by qedr_iw_close_event
    MixedCase(1213, "irdma", "qedr", ({}, {}), "manual", ((391077289462, "accept", 1063631552),)),
    MixedCase(1143, "qedr", "qedr", ({"fw_mpa_timeout_secs": 1}, {}), "manual",
              ((2118960201, "accept", 773064772),)),
    # an abortive iw_cm_disconnect before the CONNECT_REPLY waits for it
    # (IWCM_F_CONNECT_WAIT): it left a qedr initiator ESTABLISHED with its QP in ERROR
    # and the iw_cm id CLOSING, never freed
    MixedCase(93, "qedr", "qedr", ({}, {}), "accept",
              ((300135828154, "abort", 941818532), (84596282, "abort", 334087439))),
    MixedCase(293, "qedr", "qedr", ({}, {}), "accept",
              ((191084468497, "disconnect", 918745972), (793010273, "abort", 955494647))),
    # iw_destroy_cm_id before the CONNECT_REPLY waits for it too: the reply goes up,
    # then the QP is aborted; it left the initiator in RTS with no cm_id, never freed
    MixedCase(1793, "qedr", "qedr", ({}, {}), "manual",
              ((2458704572, "accept", 310715500), (2222833930, "close", 515629793))),
], ids=["qedr-established-with-error", "qedr-accept-after-reset",
        "qedr-accept-after-reset-frees", "qedr-disconnect-waits-connect-reply",
        "qedr-abort-waits-connect-reply", "qedr-destroy-waits-connect-reply"])
def test_seed_34_qedr_cases_now_pass(case: MixedCase) -> None:
    steps, events = run_case(case, SEED_34)
    assert steps == len(case.steps) and events > 0


@pytest.mark.parametrize(("case", "fn"), [
    # a second accept while the first one's handshake goes on: qedr_iw_accept's
    # QEDR_IWARP_CM_WAIT_FOR_CONNECT test fails and its error path frees the ep qed keeps
    (MixedCase(9428, "cxgb4", "qedr", ({}, {}), "accept", ((176785513, "accept", 200011644),)),
     "qedr_iw_accept"),
    # a reject after the accept: qedr_iw_reject clears ep->qp, the RTR then completes
    # the handshake and qed_iwarp_mpa_complete dereferences it
    (MixedCase(5593, "qedr", "qedr", ({}, {}), "manual",
               ((1427588047, "reject", 873495440), (806309033, "accept", 403955386))),
     "qed_iwarp_mpa_complete"),
], ids=["qedr-accept-twice", "qedr-reject-after-accept"])
def test_seed_34_qedr_kernel_bugs_are_counted_apart(case: MixedCase, fn: str) -> None:
    with pytest.raises(Broken) as exc:
        run_case(case, SEED_34)
    assert exc.value.invariant == "kernel-bug"
    assert f"kernel's own bug: {fn}:" in exc.value.message


def test_the_mpa_v1_retry_loop_paced_by_a_long_timer_is_the_kernels_own() -> None:
    # `fuzz --mixed --seed 3`, case 2169 shrunk: under mpa_rev=0 peer_abort retries
    # with MPA v1 after every reset (cm.c), here one every 399 s (the responder's
    # ep_timeout_secs, its ULP never answering): still going after three days
    case = MixedCase(2169, "cxgb4", "cxgb4", ({"mpa_rev": 0, "ep_timeout_secs": 86400},
                                              {"ep_timeout_secs": 399}), "manual", ())
    with pytest.raises(Broken) as exc:
        run_case(case, 3)
    assert exc.value.invariant == "kernel-loop"
    assert "Retrying with mpav1" in exc.value.message
