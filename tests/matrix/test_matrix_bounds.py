"""The matrix says when it cannot tell: every cell runs until its stacks' own timers
decide, a cell a safety bound stops says so (text, JSON, HTML, exit code 3), and an
output that cannot be written is one line and exit 2 before any cell runs.

Expected times come from the kernels' timer arithmetic, computed here from the
constants in the sources, not from what the emulator prints."""

from __future__ import annotations

import errno
import json
import subprocess
import sys
from pathlib import Path

import pytest

from mpa_emu.capture.decode import TcpFrame, decode_frame, read_frames
from mpa_emu.matrix import parse_side, run_cell
from mpa_emu.matrix.cell import MAX_EVENTS, CellResult, CellSpec
from mpa_emu.matrix.output import cell_text, html_page, table
from mpa_emu.wire.segment import RST, SYN

HZ = 1000
"""CONFIG_HZ of the kernels the irdma model follows (x86-64 distributions)."""
IRDMA_DEFAULT_RETRANS = 32  # cm.h since 8385a875c9ee ("Increase iWARP CM default rexmit count")
IRDMA_RETRY_TIMEOUT = HZ
IRDMA_MAX_TIMEOUT = 12 * HZ


def _c_int(value: int) -> int:
    """``value`` wrapped to a 32-bit C int, as the compiled shift leaves it."""
    value &= 0xFFFF_FFFF
    return value - (1 << 32) if value & 0x8000_0000 else value


def irdma_give_up_after() -> float:
    """Seconds from a retransmitted packet's first transmission to
    irdma_retrans_expired, by irdma_cm_timer_tick: the first resend at +HZ, then after
    the n-th resend a gap of ``min(IRDMA_RETRY_TIMEOUT << n, IRDMA_MAX_TIMEOUT)`` where
    the shift is a C int shift (count taken mod 32 on x86-64; a negative int becomes a
    huge unsigned long and takes the cap; zero is the next jiffy), and expiry at the tick
    that finds retranscount 0."""
    jiffies = IRDMA_RETRY_TIMEOUT  # irdma_schedule_cm_timer: timetosend = now + HZ
    retranscount = IRDMA_DEFAULT_RETRANS
    while retranscount:
        retranscount -= 1
        shifted = _c_int(IRDMA_RETRY_TIMEOUT << ((IRDMA_DEFAULT_RETRANS - retranscount) % 32))
        gap = IRDMA_MAX_TIMEOUT if shifted < 0 else min(shifted, IRDMA_MAX_TIMEOUT)
        jiffies += max(gap, 1)  # a zero timeout fires at the next tick
    return jiffies / HZ


def test_the_irdma_schedule_is_the_documented_one() -> None:
    # 1, 3, 7, 15, 27, then 12 s gaps to 315, three one-jiffy gaps, expiry ~316.003 s.
    assert irdma_give_up_after() == pytest.approx(316.003, abs=1e-9)


def _frames(path: str) -> list[TcpFrame]:
    return [f for raw in read_frames(path) if isinstance(f := decode_frame(raw), TcpFrame)]


def _cell(ini: str, resp: str, scenario: str, capture: Path | None = None) -> CellResult:
    return run_cell(CellSpec(parse_side(ini), parse_side(resp), scenario, 0,
                             None if capture is None else str(capture)))


@pytest.mark.parametrize("responder", ["irdma", "siw"])
def test_irdma_after_a_reset_during_mpa_gives_up_by_its_own_timer(
        tmp_path: Path, responder: str) -> None:
    cell = _cell("irdma", responder, "peer-reset-mpa", tmp_path / "c.pcapng")
    # irdma_handle_rst_pkt in MPAREQ_SENT: the MPA v2 -> v1 fallback, a new SYN on the
    # same 4-tuple, retransmitted; the responder's node is past SYN_RCVD and ignores it,
    # so irdma_retrans_expired ends it in SYN_SENT: RST + IRDMA_CM_EVENT_ABORTED, which
    # irdma_event_connect_error reports as CONNECT_REPLY -ECONNRESET and cma_iw_handler
    # maps to RDMA_CM_EVENT_REJECTED.
    assert cell.status == "ran", cell.reason
    assert cell.initiator_event == "RDMA_CM_EVENT_REJECTED"
    assert cell.initiator_status == -errno.ECONNRESET
    assert cell_text(cell) == "rej ECONNRESET"
    assert cell.capture is not None
    frames = _frames(cell.capture)
    reset = next(i for i, f in enumerate(frames) if f.flags & RST)
    syn = next(f for f in frames[reset:] if f.flags & SYN and f.sport == frames[0].sport)
    assert cell.initiator_event_s == pytest.approx(syn.time + irdma_give_up_after(),
                                                   abs=0.002)


def test_cxgb4_mpa_rev_0_retrying_without_end_is_stopped_and_said(tmp_path: Path) -> None:
    cell = _cell("cxgb4(mpa_rev=0)", "cxgb4(mpa_rev=0)", "peer-reset-mpa")
    # cxgb4 peer_abort in MPA_REQ_SENT: connect_reply_upcall only when mpa_rev == 1 or
    # (mpa_rev == 2 && tried_with_mpa_v1); with mpa_rev 0 every reset sets
    # retry_with_mpa_v1 and c4iw_reconnect starts over, and a mpa_rev 0 responder resets
    # every v1 request (process_mpa_request: revision > mpa_rev). The kernel never stops.
    assert cell.status == "event-bound"
    assert f"{MAX_EVENTS:,} events" in cell.reason
    assert "Retrying with mpav1" in cell.reason
    assert cell_text(cell) == "- !bound"
    assert cell.initiator_event is None
    assert "!bound" in table([cell])
    assert cell.reason in html_page([cell]).replace("&quot;", '"')


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mpa_emu", "matrix", *args],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)


def test_a_bounded_cell_is_exit_3_and_named_in_every_output(tmp_path: Path) -> None:
    got = _cli(tmp_path, "--side", "cxgb4(mpa_rev=0)", "--scenario", "peer-reset-mpa",
               "--json", "m.json", "--html", "m.html", "--captures", "caps")
    assert got.returncode == 3, got.stderr
    assert "- !bound" in got.stdout
    assert "!bound: peer-reset-mpa cxgb4(mpa_rev=0) -> cxgb4(mpa_rev=0): stopped at the " \
           "event bound" in got.stdout
    doc = json.loads((tmp_path / "m.json").read_text())
    assert doc["cells"][0]["status"] == "event-bound"
    assert "Retrying with mpav1" in doc["cells"][0]["reason"]
    assert "event-bound: stopped at the event bound" in (tmp_path / "m.html").read_text()


@pytest.mark.parametrize("option", ["--captures", "--json", "--html"])
def test_an_output_that_cannot_be_written_is_one_line_before_any_cell(
        tmp_path: Path, option: str) -> None:
    (tmp_path / "file").write_text("not a folder")
    where = "file/sub" if option == "--captures" else "file/out"
    got = _cli(tmp_path, "--stacks", "irdma,siw", option, where,
               *(["--captures", "caps"] if option != "--captures" else []))
    assert got.returncode == 2
    assert got.stdout == ""
    lines = got.stderr.strip().splitlines()
    assert len(lines) == 1, got.stderr
    assert lines[0].startswith(f"mpa-emu matrix: error: {option} {where}")
    assert "Not a directory" in lines[0]
    assert not (tmp_path / "caps").exists() or not any((tmp_path / "caps").iterdir())
