"""Each stack's facts are typed fields of its registry record, kept in its own folder, and
the judge, the explanations and ``mpa-emu peer`` read them from the registry (that no
module outside mpa_emu/stacks/ compares a stack's name is tests/package/
test_stack_peers.py's)."""

from __future__ import annotations

import dataclasses
import errno
from pathlib import Path

import pytest

import mpa_emu
from mpa_emu.judge import cm_events
from mpa_emu.judge.stacks import FACTS, KERNEL_STACKS, STACK_NAMES
from mpa_emu.live.peer_stacks import peer_stack
from mpa_emu.stacks import STACKS
from mpa_emu.stacks.base import (
    Fingerprint,
    KernelMap,
    PeerFraming,
    ReplyStatuses,
    Stack,
    StackFacts,
)

PACKAGE = Path(mpa_emu.__file__).parent


def test_a_stack_without_its_facts_cannot_be_registered() -> None:
    irdma = STACKS["irdma"]
    with pytest.raises(TypeError, match="facts"):
        Stack(name="new", title="t", params=(), make_core=irdma.make_core,  # type: ignore[call-arg]
              doc="docs/stacks/new.md", states=(), kernel_map=irdma.kernel_map,
              statuses=irdma.statuses, peer_framing=irdma.peer_framing,
              fingerprint=irdma.fingerprint)


def test_every_field_of_the_record_is_required() -> None:
    for f in dataclasses.fields(Stack):
        assert f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING, \
            f"Stack.{f.name} has a default: a stack could leave it out"


@pytest.mark.parametrize("name", list(STACKS))
def test_each_stack_owes_every_fact(name: str) -> None:
    st = STACKS[name]
    assert isinstance(st.kernel_map, KernelMap)
    assert isinstance(st.facts, StackFacts) and st.facts.name == name
    assert isinstance(st.statuses, ReplyStatuses)
    assert isinstance(st.fingerprint, Fingerprint)
    assert isinstance(st.peer_framing(st.defaults()), PeerFraming)


def test_the_judge_reads_every_registered_stack() -> None:
    assert tuple(STACKS) == KERNEL_STACKS
    assert STACK_NAMES[:len(STACKS)] == tuple(STACKS)
    assert {name: st.facts for name, st in STACKS.items()} == FACTS
    for table, field in ((cm_events.REJECT_STATUS, "reject"),
                         (cm_events.RESET_STATUS, "reset"),
                         (cm_events.TIMEOUT_STATUS, "timeout")):
        assert table == {n: getattr(st.statuses, field) for n, st in STACKS.items()}


# The statuses each kernel function sets (the initiator's CONNECT_REPLY).
@pytest.mark.parametrize(("name", "reject", "reset", "timeout"), [
    # irdma_cm_event_handler MPA_REJECT; irdma_event_connect_error; the retransmission
    # expiry of irdma_cm_timer_tick resets (no MPA timer)
    ("irdma", -errno.ECONNREFUSED, -errno.ECONNRESET, -errno.ECONNRESET),
    # siw_proc_mpareply "got mpa reject" -ECONNRESET; SIW_CM_WORK_PEER_CLOSE and
    # SIW_CM_WORK_MPATIMEOUT in AWAIT_MPAREP
    ("siw", -errno.ECONNRESET, -errno.ECONNRESET, -errno.ETIMEDOUT),
    # process_mpa_reply MPA_REJECT -ECONNREFUSED; peer_abort in MPA_REQ_SENT;
    # process_timeout in MPA_REQ_SENT
    ("cxgb4", -errno.ECONNREFUSED, -errno.ECONNRESET, -errno.ETIMEDOUT),
])
def test_reply_statuses_are_the_kernel_s(name: str, reject: int, reset: int,
                                         timeout: int) -> None:
    st = STACKS[name].statuses
    assert (st.reject, st.reset, st.timeout) == (reject, reset, timeout)


@pytest.mark.parametrize(("name", "params", "framing"), [
    # irdma_build_mpa_v2: C and P2P always, both RTRs; IETF_MAX_PRIV_DATA_LEN 512; under
    # v1 irdma_cm_event_connected still sends send_rdma0_op's Read RTR and irdma_accept
    # waits for its RTS AE
    ("irdma", {}, PeerFraming(2, True, True, "both", 512, "read", True, None)),
    ("irdma", {"mpa_rev": 1}, PeerFraming(1, True, True, "both", 512, "read", True, None)),
    # siw_connect with siw_main.c's constants: mpa_version 2, peer_to_peer and
    # mpa_crc_required off; MPA_MAX_PRIVDATA 256; no RTR under v1 (v2 block only)
    ("siw", {}, PeerFraming(2, False, False, "both", 256, "none", False, None)),
    ("siw", {"peer_to_peer": True, "rtr_type": 1},
     PeerFraming(2, True, False, "write", 256, "none", False, None)),
    # send_mpa_req with cm.c's module defaults: mpa_rev 2, crc_enabled 1, peer2peer 1,
    # p2p_type FW_RI_INIT_P2PTYPE_READ_REQ (1); a u8 length leaves 255; under v1 the
    # p2p_type RTR with peer2peer (process_mpa_reply), not waited for
    ("cxgb4", {}, PeerFraming(2, True, True, "read", 255, "read", False, None)),
    ("cxgb4", {"p2p_type": 0}, PeerFraming(2, True, True, "write", 255, "write", False, None)),
    ("cxgb4", {"peer2peer": False}, PeerFraming(2, False, True, "read", 255, "none", False, None)),
])
def test_peer_framing_is_the_stack_s(name: str, params: dict[str, object],
                                     framing: PeerFraming) -> None:
    assert peer_stack(name, params) == framing


def test_peer_framing_of_an_unknown_stack_is_one_line() -> None:
    with pytest.raises(ValueError, match="unknown stack 'nosuch'"):
        peer_stack("nosuch")
