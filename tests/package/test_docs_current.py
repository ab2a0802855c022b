"""The docs keep up with what exists: every example scenario and every stack in
docs/scenarios.md, every stack page among the README's guides, pytest's installation in
docs/pytest.md, and docs/compiling.md's figures the README performance table's."""

from __future__ import annotations

import re
from pathlib import Path

from mpa_emu.stacks import STACKS

ROOT = Path(__file__).resolve().parents[2]


def _text(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


def test_scenarios_doc_lists_every_example_and_stack() -> None:
    doc = _text("docs/scenarios.md")
    for path in sorted((ROOT / "scenarios").glob("*.toml")):
        assert f"`{path.name}`" in doc, path.name
    row = next(line for line in doc.splitlines() if line.startswith("| `stack` |"))
    for name in STACKS:
        assert f'`"{name}"`' in row, name


def test_readme_guides_list_every_stack_page() -> None:
    readme = _text("README.md")
    guides = readme[readme.index("## Guides"):]
    guides = guides[:guides.index("\n## ", 1)]
    for page in sorted((ROOT / "docs" / "stacks").glob("*.md")):
        assert f"`docs/stacks/{page.name}`" in guides, page.name


def test_pytest_doc_says_pytest_is_installed_separately() -> None:
    doc = _text("docs/pytest.md")
    assert "pytest itself is not a dependency" in doc and "pip install pytest" in doc
    assert "pytest" not in _text("pyproject.toml").split("[project.optional")[0] \
        .split("dependencies = [", 1)[1].split("]", 1)[0]


def _row(text: str, start: str) -> list[str]:
    line = next(x for x in text.splitlines() if x.startswith(start))
    return [c.strip() for c in line.strip("|").split("|")]


def test_compiling_doc_figures_are_the_readme_tables() -> None:
    readme, doc = _text("README.md"), _text("docs/compiling.md")
    figure = re.compile(r"[\d.]+x? \[[\d.]+-[\d.]+\]")
    for readme_row, doc_row in (("| P1 full cycle, against the struct floor",
                                 "| P1 against the struct floor"),
                                ("| P1 plain scapy", "| P1 plain scapy"),
                                ("| P2 `mpa-emu replay`", "| P2 `replay`")):
        theirs, ours = _row(readme, readme_row), _row(doc, doc_row)
        for column in (2, 3):  # pure Python, compiled
            (expected, *_) = figure.findall(theirs[column].replace("**", ""))
            assert expected in ours[column - 1], (doc_row, expected, ours)
