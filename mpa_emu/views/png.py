"""An SVG diagram rendered as PNG by a renderer found on the machine: ``rsvg-convert``
(Debian's librsvg2-bin) or, failing that, headless Chromium. Without either, a PNG is
refused with a one-line error: SVG bytes are never written under a ``.png`` name."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from mpa_emu.errors import MpaEmuError

TIMEOUT = 300
"""Seconds a renderer may take."""
CHROMIUM_MAX = 16_384
"""The largest side, in pixels, headless Chromium draws in one screenshot."""


class PngError(MpaEmuError, ValueError):
    """No PNG could be made (no renderer, or the renderer failed)."""


def renderer() -> list[str] | None:
    """The command that will render (``rsvg-convert`` first), or None."""
    for name in ("rsvg-convert",):
        path = shutil.which(name)
        if path:
            return [path]
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return [path]
    return None


def check_renderer() -> None:
    """Raise :class:`PngError` when no renderer is installed (before any work)."""
    if renderer() is None:
        raise PngError("cannot write PNG: no SVG renderer found (install rsvg-convert, "
                       "Debian package librsvg2-bin, or chromium), or write .svg")


def svg_to_png(svg: Path, png: Path) -> None:
    """Render the SVG file ``svg`` into ``png`` at its own size."""
    command = renderer()
    if command is None:
        check_renderer()
        return
    if Path(command[0]).name == "rsvg-convert":
        _run([*command, "--format", "png", "--output", str(png), str(svg)], png)
        return
    width, height = _size(svg)
    if max(width, height) > CHROMIUM_MAX:
        raise PngError(f"cannot write PNG: the diagram is {width}x{height} px, more than "
                       f"Chromium draws ({CHROMIUM_MAX}); install rsvg-convert "
                       "(librsvg2-bin) or write .svg")
    profile = tempfile.mkdtemp(prefix="mpa-emu-png-")
    try:
        _run([*command, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
              f"--user-data-dir={profile}", "--default-background-color=ffffffff",
              f"--window-size={width},{height}", f"--screenshot={png}",
              svg.resolve().as_uri()], png)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def _size(svg: Path) -> tuple[int, int]:
    with open(svg, encoding="utf-8") as f:
        head = f.read(4096)
    found = re.search(r'<svg[^>]*\bwidth="(\d+)"[^>]*\bheight="(\d+)"', head)
    if found is None:
        raise PngError(f"cannot write PNG: {svg.name} has no width and height")
    return int(found.group(1)), int(found.group(2))


def _run(argv: list[str], png: Path) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT,
                              check=False)
    except subprocess.TimeoutExpired:
        raise PngError(f"cannot write PNG: {Path(argv[0]).name} took over {TIMEOUT} s") \
            from None
    except OSError as exc:
        raise PngError(f"cannot write PNG: {Path(argv[0]).name}: {exc.strerror or exc}") \
            from None
    ok = done.returncode == 0 and png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if not ok:
        lines = (done.stderr or "").strip().splitlines()
        why = lines[-1] if lines else f"exit {done.returncode}"
        png.unlink(missing_ok=True)
        raise PngError(f"cannot write PNG: {Path(argv[0]).name} failed: {why}")
