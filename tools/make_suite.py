#!/usr/bin/env python3
"""Write pcaps/suite.toml, the conformance suite of the project's own captures.

The cases come from the fixtures' sidecars (pcaps/*.json: every entry of ``replays``,
with its emulated host, options and expected exit code and first divergence) and from
the golden captures (pcaps/golden/, each replayed from the hosts tools/make_golden.py
lists, expected to match). Nothing here runs the emulator: the expectations are the
sidecars', which were written from the reference behaviour.

Usage: python tools/make_suite.py [--check]   (--check: exit 1 when the file is stale)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PCAPS = ROOT / "pcaps"
EXPECT = {0: "match", 1: "diverge", 2: "error"}


def _golden_hosts() -> dict[str, tuple[str, ...]]:
    spec = importlib.util.spec_from_file_location("make_golden", ROOT / "tools" / "make_golden.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    hosts: dict[str, tuple[str, ...]] = module.HOSTS
    return hosts


def _toml_string(text: str) -> str:
    return json.dumps(text)  # a JSON string is a valid TOML basic string


def cases(pcaps: Path = PCAPS) -> list[dict[str, object]]:
    """Every case of the suite, in a stable order (fixtures by name, then goldens)."""
    out: list[dict[str, object]] = []
    for sidecar in sorted(pcaps.glob("*.json")):
        data = json.loads(sidecar.read_text(encoding="utf-8"))
        for n, replay in enumerate(data["replays"], 1):
            expect = replay["expect"]
            case: dict[str, object] = {
                "name": f"{sidecar.stem} {replay['emulate']}"
                        + (f" {' '.join(replay['args'])}" if replay["args"] else "")
                        + (f" #{n}" if len(data["replays"]) > 1 else ""),
                "capture": data["capture"],
                "emulate": replay["emulate"],
                "args": list(replay["args"]),
                "expect": EXPECT[expect["exit"]],
            }
            if expect.get("first_divergence_frame") is not None:
                case["divergence_frame"] = expect["first_divergence_frame"]
            if replay.get("why"):
                case["why"] = replay["why"]
            out.append(case)
    for name, hosts in sorted(_golden_hosts().items()):
        for ip in hosts:
            out.append({"name": f"golden {name} {ip}", "capture": f"golden/{name}.pcapng",
                        "emulate": ip, "args": [], "expect": "match"})
    return out


def render(pcaps: Path = PCAPS) -> str:
    """The suite file's text."""
    lines = ["# The conformance suite of the project's fixtures and golden captures.",
             "# Written by tools/make_suite.py from the sidecars (*.json) and",
             "# tools/make_golden.py; run it with: mpa-emu replay --suite pcaps/suite.toml",
             ""]
    for case in cases(pcaps):
        lines.append("[[case]]")
        for key, value in case.items():
            if isinstance(value, list):
                text = "[" + ", ".join(_toml_string(v) for v in value) + "]"
            elif isinstance(value, int):
                text = str(value)
            else:
                text = _toml_string(str(value))
            lines.append(f"{key} = {text}")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when suite.toml is stale")
    args = parser.parse_args()
    target = PCAPS / "suite.toml"
    text = render()
    if args.check:
        if target.read_text(encoding="utf-8") != text:
            print(f"{target.name} is stale: run tools/make_suite.py", file=sys.stderr)
            return 1
        return 0
    target.write_text(text, encoding="utf-8")
    print(f"wrote {target.name}: {len(cases())} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
