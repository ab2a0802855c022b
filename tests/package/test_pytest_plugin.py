"""The pytest plugin: users' own scenario tests in a few lines, run in a separate pytest
process (so the plugin is loaded exactly as a user's run loads it)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

USER_TESTS = '''
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.net import Reject

REJECT = """
seed = 3
[[host]]
name = "alice"
address = "192.0.2.1"
[[host]]
name = "bob"
address = "192.0.2.2"
[[listen]]
host = "bob"
port = 31000
policy = "reject"
private_data = "busy"
[[connect]]
name = "c1"
from = "alice"
to = "bob"
port = 31000
[[expect.upcall]]
host = "alice"
event = "CONNECT_REPLY"
status = "-ECONNREFUSED"
"""


def test_network_fixture(mpa_network, mpa_seed):
    assert mpa_network.seed == mpa_seed == 5
    alice = mpa_network.add_host("alice", "192.0.2.1")
    bob = mpa_network.add_host("bob", "192.0.2.2")
    bob.listen(31000, policy=Reject(b"busy"))
    alice.connect("192.0.2.2", 31000)
    mpa_network.run()
    (reply,) = alice.events(IwEvent.CONNECT_REPLY)
    assert reply.status == -111


def test_scenario_text_passes(run_scenario):
    run = run_scenario(REJECT)
    assert run.ok and len(run.net.frames) > 5


def test_scenario_file_passes(run_scenario):
    run_scenario(SCENARIO_FILE)


def test_scenario_expectation_fails(run_scenario):
    run_scenario(REJECT.replace('"-ECONNREFUSED"', "0"))
'''


def run_user_tests(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """Run USER_TESTS from another folder than the test file's: the scenario file is
    named relative to the test file."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "mine.toml").write_bytes(
        (ROOT / "mpa_emu" / "examples" / "v2_accept.toml").read_bytes())
    test_file = tmp_path / "test_user.py"
    test_file.write_text('SCENARIO_FILE = "data/mine.toml"\n' + USER_TESTS)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "mpa_emu.pytest_plugin", "-q",
         "-p", "no:cacheprovider", "--rootdir", str(tmp_path), "--mpa-emu-seed", "5",
         *extra, str(test_file)],
        capture_output=True, text=True, cwd=elsewhere, env=env)


def test_fixtures_work_and_failures_name_the_scenario_line(tmp_path: Path) -> None:
    captures = tmp_path / "caps"
    proc = run_user_tests(tmp_path, "--mpa-emu-captures", str(captures))
    out = proc.stdout
    assert "1 failed, 3 passed" in out, out + proc.stderr
    assert "test_scenario_expectation_fails" in out
    # The failing expectation is the [[expect.upcall]] of REJECT, named by its line in
    # the test file (not line 19 of the string).
    lines = (tmp_path / "test_user.py").read_text().splitlines()
    line = lines.index("[[expect.upcall]]") + 1
    assert line > 19
    assert f"test_user.py:{line}: FAIL upcall CONNECT_REPLY" in out
    assert "-ECONNREFUSED" in out  # what happened instead
    dumped = sorted(p.name for p in captures.iterdir())
    assert dumped == ["test_user.py_test_scenario_expectation_fails.pcapng"]
    assert (captures / dumped[0]).read_bytes()[:4] == b"\x0a\x0d\x0d\x0a"


def test_under_xdist_each_worker_has_the_seed_and_its_own_capture_directory(
        tmp_path: Path) -> None:
    captures = tmp_path / "caps"
    # --dist each: every test on both workers, so both write the failing test's capture
    proc = run_user_tests(tmp_path, "-p", "xdist", "-n", "2", "--dist", "each",
                          "--mpa-emu-captures", str(captures))
    assert "2 failed, 6 passed" in proc.stdout, proc.stdout + proc.stderr
    assert sorted(p.name for p in captures.iterdir()) == ["gw0", "gw1"]
    name = "test_user.py_test_scenario_expectation_fails.pcapng"
    first, second = ((captures / w / name).read_bytes() for w in ("gw0", "gw1"))
    # the seed reached both workers (test_network_fixture asserts 5): the same frames
    assert first == second and first[:4] == b"\x0a\x0d\x0d\x0a"


def test_plugin_import_is_light() -> None:
    # importing the package brings its public API (the network and the CM core), but
    # neither scapy nor the scenario machinery
    code = ("import sys, mpa_emu.pytest_plugin; "
            "print(any(m.startswith(('mpa_emu.scenario', 'mpa_emu.frames', 'scapy')) "
            "for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"


def test_entry_point_is_declared_for_the_plugin_module() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["entry-points"]["pytest11"] == {
        "mpa_emu": "mpa_emu.pytest_plugin"}
    installed = {ep.name: ep.value for ep in metadata.entry_points(group="pytest11")}
    if "mpa_emu" in installed:  # present once the package is (re)installed
        assert installed["mpa_emu"] == "mpa_emu.pytest_plugin"
