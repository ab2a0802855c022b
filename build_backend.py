"""The build backend: setuptools' own, which also asks for mypy (whose mypyc compiles the
per-frame modules, see setup.py) when a wheel is built for a regular install, unless
``MPA_EMU_COMPILE=0`` asks for the pure-Python package. mypyc type-checks what it compiles
as ``mypy --strict`` does, so the build has the package's own dependencies too (scapy's
classes are subclassed). An editable install needs only setuptools."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403  (the backend's other hooks unchanged)

MYPY = "mypy>=1.8"


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    """setuptools' requirements, and mypy unless the pure package is asked for."""
    wanted = list(_setuptools.get_requires_for_build_wheel(config_settings))
    if os.environ.get("MPA_EMU_COMPILE", "").strip() != "0":
        project = tomllib.loads((Path(__file__).with_name("pyproject.toml")).read_text("utf-8"))
        wanted += [MYPY, *project["project"]["dependencies"]]
    return wanted
