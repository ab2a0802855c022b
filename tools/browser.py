"""Headless Chromium driven over the DevTools protocol on a pipe (no websocket, no
third-party package): open a local page, evaluate script in it, collect console errors
and network requests, take PNG screenshots, and decode a PNG to count its colours.

Used by the browser tests (tests/browser/) and by tools/make_report_screenshots.py.

    with Chromium() as browser:
        page = browser.open(Path("report.html"))
        page.evaluate("document.title")
        png = page.screenshot()
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import struct
import subprocess
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--font-render-hinting=none", "--remote-debugging-pipe"]
TIMEOUT = 30.0


class BrowserError(RuntimeError):
    """Chromium is missing, died, or answered with an error."""


def chromium_path() -> str:
    """The Chromium binary, or a BrowserError saying how to install it."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    raise BrowserError("chromium is required (tools/test.sh installs it: "
                       "apt-get install chromium)")


@dataclass
class Page:
    """One tab, attached by session."""

    browser: Chromium
    session: str
    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.browser.call(method, params, session=self.session)

    def evaluate(self, expression: str) -> Any:
        """The value of a script expression (promises awaited); page exceptions raise."""
        out = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                             "awaitPromise": True})
        if "exceptionDetails" in out:
            raise BrowserError(f"script failed: {out['exceptionDetails']}")
        return out["result"].get("value")

    def set_viewport(self, width: int, height: int) -> None:
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def mouse(self, kind: str, x: float, y: float) -> None:
        """A real pointer event: ``mouseMoved``, ``mousePressed`` or ``mouseReleased``."""
        params: dict[str, Any] = {"type": kind, "x": x, "y": y}
        if kind != "mouseMoved":
            params.update(button="left", clickCount=1)
        self.call("Input.dispatchMouseEvent", params)

    def click(self, x: float, y: float) -> None:
        self.mouse("mouseMoved", x, y)
        self.mouse("mousePressed", x, y)
        self.mouse("mouseReleased", x, y)

    def screenshot(self, *, full_page: bool = False) -> bytes:
        """A PNG of the viewport, or of the whole page."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.evaluate("[document.documentElement.scrollWidth,"
                                 " document.documentElement.scrollHeight]")
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": size[0], "height": size[1],
                                "scale": 1})
        import base64

        return base64.b64decode(self.call("Page.captureScreenshot", params)["data"])


class Chromium:
    """A headless Chromium with a fresh profile, closed on exit."""

    def __init__(self, width: int = 1400, height: int = 900) -> None:
        self.width = width
        self.height = height
        self.profile = tempfile.mkdtemp(prefix="mpa-emu-chromium-")
        self.proc: subprocess.Popen[bytes] | None = None
        self.next_id = 0
        self.buffer = b""
        self.pages: dict[str, Page] = {}

    def __enter__(self) -> Chromium:
        binary = chromium_path()
        to_child, from_us = os.pipe()
        to_us, from_child = os.pipe()
        # The browser reads commands on fd 3 and writes answers on fd 4.
        high_in = fcntl.fcntl(to_child, fcntl.F_DUPFD, 10)
        high_out = fcntl.fcntl(from_child, fcntl.F_DUPFD, 10)

        def place_pipes() -> None:
            os.dup2(high_in, 3)
            os.dup2(high_out, 4)

        try:
            self.proc = subprocess.Popen(
                [binary, *FLAGS, f"--user-data-dir={self.profile}",
                 f"--window-size={self.width},{self.height}", "about:blank"],
                pass_fds=(3, 4), preexec_fn=place_pipes, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        finally:
            for fd in (to_child, from_child, high_in, high_out):
                os.close(fd)
        self.write_fd = from_us
        self.read_fd = to_us
        os.set_blocking(self.read_fd, False)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.proc is not None:
            with contextlib.suppress(BrowserError):
                self.call("Browser.close", timeout=5)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            os.close(self.write_fd)
            os.close(self.read_fd)
        shutil.rmtree(self.profile, ignore_errors=True)

    # ---- protocol ------------------------------------------------------------------

    def _receive(self, deadline: float) -> dict[str, Any]:
        import select

        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("chromium did not answer in time")
            ready, _, _ = select.select([self.read_fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.read_fd, 1 << 20)
            if not chunk:
                raise BrowserError("chromium exited")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)  # type: ignore[no-any-return]

    def _event(self, message: dict[str, Any]) -> None:
        page = self.pages.get(message.get("sessionId", ""))
        if page is None:
            return
        method = message.get("method")
        params = message.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            page.console_errors.append(" ".join(str(a.get("value", a.get("description", "")))
                                                for a in params.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            page.console_errors.append(
                str(details.get("exception", {}).get("description", details.get("text"))))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            page.console_errors.append(params["entry"].get("text", ""))
        elif method == "Network.requestWillBeSent":
            page.requests.append(params.get("request", {}).get("url", ""))

    def call(self, method: str, params: dict[str, Any] | None = None, *,
             session: str | None = None, timeout: float = TIMEOUT) -> dict[str, Any]:
        """Send one command and wait for its answer (events meanwhile are recorded)."""
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method,
                                   "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        try:
            os.write(self.write_fd, json.dumps(message).encode() + b"\0")
        except OSError as exc:
            raise BrowserError(f"chromium is gone: {exc}") from None
        deadline = time.monotonic() + timeout
        while True:
            answer = self._receive(deadline)
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error']}")
                return answer.get("result", {})  # type: ignore[no-any-return]
            self._event(answer)

    def wait_for(self, page: Page, event: str, timeout: float = TIMEOUT) -> dict[str, Any]:
        """Wait for one event of ``page``."""
        deadline = time.monotonic() + timeout
        while True:
            message = self._receive(deadline)
            self._event(message)
            if message.get("sessionId") == page.session and message.get("method") == event:
                return message.get("params", {})  # type: ignore[no-any-return]

    def open(self, path: Path) -> Page:
        """A new tab showing the local file ``path``, loaded, at the browser's size."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget",
                            {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        self.pages[session] = page
        for domain in ("Page", "Runtime", "Log", "Network"):
            page.call(f"{domain}.enable")
        page.set_viewport(self.width, self.height)
        page.call("Page.navigate", {"url": path.resolve().as_uri()})
        self.wait_for(page, "Page.loadEventFired")
        # Fonts and layout settle before anything is measured.
        page.evaluate("document.fonts.ready.then(() => new Promise("
                      "r => requestAnimationFrame(() => requestAnimationFrame(r))))")
        return page


# ---- PNG ---------------------------------------------------------------------------

def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def decode_png(data: bytes) -> tuple[int, int, list[tuple[int, ...]]]:
    """Width, height and pixels (RGB or RGBA tuples, row by row) of an 8-bit,
    non-interlaced truecolour PNG (what Chromium writes), per the PNG specification."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos = 8
    idat = b""
    width = height = channels = 0
    while pos < len(data):
        length, kind = struct.unpack("!I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _c, _f, interlace = struct.unpack("!IIBBBBB", body)
            if depth != 8 or colour not in (2, 6) or interlace:
                raise ValueError(f"PNG depth {depth} colour {colour} not supported")
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    raw = zlib.decompress(idat)
    stride = width * channels
    pixels: list[tuple[int, ...]] = []
    previous = bytearray(stride)
    at = 0
    for _row in range(height):
        kind = raw[at]
        line = bytearray(raw[at + 1:at + 1 + stride])
        at += 1 + stride
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                line[i] = (line[i] + _paeth(left, up, corner)) & 0xFF
        pixels.extend(tuple(line[i:i + channels]) for i in range(0, stride, channels))
        previous = line
    return width, height, pixels
