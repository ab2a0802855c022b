"""``[[expect.listener]]`` (the TCP_SYN qhash entry of a listener, docs/scenarios.md)
is irdma's: irdma_manage_qhash installs the entry that steers SYNs to the CM. siw
listens on a kernel socket (siw_listen_address) and cxgb4 on a hardware server entry
(c4iw_create_listen): their listener views have no such field, so the expectation is
refused when the scenario is loaded, one line and exit 2, instead of a traceback when
it is checked; on irdma it still runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from mpa_emu.cli import main
from mpa_emu.scenario import ScenarioError, loads
from mpa_emu.stacks import STACKS

TEXT = """\
[[host]]
name = "a"
address = "192.0.2.1"

[[host]]
name = "b"
address = "192.0.2.2"
stack = "{stack}"

[[listen]]
host = "b"
port = 31000
name = "l"

[[connect]]
from = "a"
to = "b"
port = 31000

[[expect.listener]]
host = "b"
listener = "l"
syn_qhash = true
"""


@pytest.mark.parametrize("stack", sorted(s for s in STACKS
                                         if "syn_qhash_installed"
                                         not in STACKS[s].listener_facts))
def test_refused_when_loaded(stack: str, tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "listener.toml"
    path.write_text(TEXT.format(stack=stack), encoding="utf-8")
    with pytest.raises(ScenarioError, match="not for this stack"):
        loads(path.read_text(), str(path))
    out = tmp_path / "o.pcapng"
    assert main(["run", str(path), "-o", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"mpa-emu run: error: {path}:")
    assert f"runs {stack}" in err and "TCP_SYN qhash" in err
    assert not out.exists()


def test_irdma_still_checks_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # irdma_create_listen on a specific address installs the TCP_SYN qhash entry
    # (irdma_manage_qhash, IRDMA_QHASH_MANAGE_TYPE_ADD) and keeps it while listening.
    path = tmp_path / "listener.toml"
    path.write_text(TEXT.format(stack="irdma"), encoding="utf-8")
    assert main(["run", str(path), "-o", str(tmp_path / "o.pcapng"), "--no-progress"]) == 0
