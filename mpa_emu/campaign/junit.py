"""JUnit XML, the report format CI systems read: one ``<testsuite>`` per campaign, one
``<testcase>`` per case, ``<failure>`` for a wrong verdict and ``<error>`` for a case that
could not run."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class JUnitCase:
    """One case as JUnit sees it."""

    name: str
    classname: str
    seconds: float = 0.0
    failure: str | None = None
    error: str | None = None
    output: str = ""


def junit_xml(suite: str, cases: Sequence[JUnitCase]) -> bytes:
    """The XML document (UTF-8, with declaration) for one suite of cases."""
    root = ET.Element("testsuites")
    node = ET.SubElement(root, "testsuite", {
        "name": suite,
        "tests": str(len(cases)),
        "failures": str(sum(c.failure is not None for c in cases)),
        "errors": str(sum(c.error is not None for c in cases)),
        "skipped": "0",
        "time": f"{sum(c.seconds for c in cases):.3f}",
    })
    for case in cases:
        tc = ET.SubElement(node, "testcase", {"classname": case.classname,
                                              "name": case.name,
                                              "time": f"{case.seconds:.3f}"})
        for tag, text in (("failure", case.failure), ("error", case.error)):
            if text is not None:
                el = ET.SubElement(tc, tag, {"message": text.splitlines()[0] if text else tag})
                el.text = text
        if case.output:
            ET.SubElement(tc, "system-out").text = case.output
    ET.indent(root)
    out = io.BytesIO()
    ET.ElementTree(root).write(out, encoding="utf-8", xml_declaration=True)
    return out.getvalue() + b"\n"


def write_junit(path: str | Path, suite: str, cases: Sequence[JUnitCase]) -> None:
    """Write :func:`junit_xml` to ``path`` (OSError on an unwritable path)."""
    Path(path).write_bytes(junit_xml(suite, cases))
