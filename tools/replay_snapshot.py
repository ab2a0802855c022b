#!/usr/bin/env python3
"""Write what ``mpa-emu replay`` says about every capture under pcaps/, to compare two
versions of the replay byte for byte.

For each capture (pcaps/, pcaps/real/, pcaps/golden/ and any given on the command line)
and each of its two most frequent addresses as ``--emulate``, in three modes (plain,
``--semantic``, ``--on-request reject``), it writes the exit code, standard output and
error of a plain run, the ``--json`` report, and (plain and semantic) the ``-o`` merged
pcapng. Run it before and after a change into two directories and compare them:

    python tools/replay_snapshot.py /tmp/before
    ... change ...
    python tools/replay_snapshot.py /tmp/after
    diff -r /tmp/before /tmp/after && echo identical
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if importlib.util.find_spec("mpa_emu") is None:  # not installed: the checkout's own
    sys.path.insert(0, str(ROOT))

from mpa_emu.capture.decode import Undecodable, decode_leniently  # noqa: E402
from mpa_emu.capture.pcap import read_capture  # noqa: E402
from mpa_emu.cli import main  # noqa: E402
from mpa_emu.wire.addr import ip_text  # noqa: E402

MODES = (("plain", []), ("semantic", ["--semantic"]), ("reject", ["--on-request", "reject"]))


def addresses(path: Path) -> list[str]:
    """The two addresses seen most often in the capture's TCP frames."""
    counts: dict[bytes, int] = {}
    for record in read_capture(str(path)):
        lenient = decode_leniently(record.frame)
        if isinstance(lenient, Undecodable):
            continue
        for ip in (lenient.seg.src_ip, lenient.seg.dst_ip):
            counts[ip] = counts.get(ip, 0) + 1
    return [ip_text(ip) for ip in sorted(counts, key=lambda a: (-counts[a], a))[:2]]


def run(argv: list[str]) -> str:
    """Exit code, stdout and stderr of one in-process ``mpa-emu`` command."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
    return f"exit {code}\n{out.getvalue()}--- stderr ---\n{err.getvalue()}"


def main_() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="directory for the outputs (created)")
    ap.add_argument("captures", nargs="*", type=Path, help="more captures")
    args = ap.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    extra_captures = [c.resolve() for c in args.captures]
    # Reports name the capture as given: relative names keep them independent of where
    # the checkout lives, so two checkouts can be compared.
    os.chdir(ROOT)
    captures = sorted(p for d in ("pcaps", "pcaps/real", "pcaps/golden")
                      for p in Path(d).glob("*.pcap*"))
    for cap in [*captures, *extra_captures]:
        for ip in addresses(cap):
            for mode, extra in MODES:
                name = f"{cap.name}__{ip.replace(':', '_')}__{mode}"
                base = ["replay", str(cap), "--emulate", ip, *extra]
                text = run(base)
                text += "--- with --json ---\n" + run(
                    [*base, "--json", str(out / f"{name}.json")])
                if mode != "reject":
                    text += "--- with -o ---\n" + run(
                        [*base, "-o", str(out / f"{name}.pcapng")])
                (out / f"{name}.txt").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main_())
