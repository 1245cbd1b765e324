"""Headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: the
browser reads commands from fd 3 and writes replies to fd 4, each a JSON message ending in NUL),
for the plan page's real-browser checks and its benchmark: open a file, record every request the
page makes (the Network domain), read the DOM it rendered, its load timing, and screenshots in
light and dark mode. Debian's `chromium` package; scripts/setup-slow-checks.sh says how to get it.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

#: The flags every run uses: no GPU, no sandbox (containers), no traffic of Chromium's own.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-pipe")
SETUP = "scripts/setup-slow-checks.sh installs it (Debian: apt-get install -y chromium)"


def chromium() -> str | None:
    """$CHROMIUM, else the Chromium binary on PATH (`chromium`, as Debian names it), else None."""
    named = os.environ.get("CHROMIUM")
    if named and os.access(named, os.X_OK):
        return named
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    """One Chromium with one page, driven over its pipe. Use as a context manager."""

    def __init__(self, width: int = 1200, height: int = 900):
        exe = chromium()
        if exe is None:
            raise FileNotFoundError(f"no chromium on PATH; {SETUP}")
        self.profile = tempfile.mkdtemp(prefix="swapgen-chromium-")
        commands_read, self._commands = os.pipe()
        self._replies, replies_write = os.pipe()

        def on_fds_3_and_4():
            os.dup2(commands_read, 3)
            os.dup2(replies_write, 4)

        self.process = subprocess.Popen(
            [exe, *FLAGS, f"--user-data-dir={self.profile}", f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(3, 4), preexec_fn=on_fds_3_and_4)  # the one way to put a pipe at fd 3
        os.close(commands_read)
        os.close(replies_write)
        self._buffer = b""
        self._next = 0
        self.events: list[dict] = []
        self.session = ""
        target = next(t for t in self.call("Target.getTargets")["targetInfos"] if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", targetId=target["targetId"], flatten=True)["sessionId"]
        self.call("Network.enable")
        self.call("Page.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        with contextlib.suppress(OSError, TimeoutError, RuntimeError):
            self.call("Browser.close", timeout=5)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for fd in (self._commands, self._replies):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self.profile, ignore_errors=True)

    # -- the protocol -----------------------------------------------------------------------

    def _message(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._replies, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed its pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, timeout: float = 30, **params) -> dict:
        """Send a command (to the page's session once attached) and wait for its reply; the events
        that arrive meanwhile are kept in `events`."""
        self._next += 1
        message = {"id": self._next, "method": method, "params": params}
        if self.session and not method.startswith(("Target.", "Browser.")):
            message["sessionId"] = self.session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._message(deadline)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, event: str, timeout: float = 30) -> dict:
        """The first `event` seen (already, or from now on)."""
        deadline = time.monotonic() + timeout
        for seen in self.events:
            if seen.get("method") == event:
                return seen
        while True:
            message = self._message(deadline)
            self.events.append(message)
            if message.get("method") == event:
                return message

    # -- what the checks ask ------------------------------------------------------------------

    def open(self, path: Path) -> None:
        """Load the file and wait until its load event."""
        self.events.clear()
        self.call("Page.navigate", url=path.resolve().as_uri())
        self.wait_for("Page.loadEventFired")

    def requests(self) -> list[str]:
        """The URL of every request the page made since it was opened (the document's own included)."""
        return [e["params"]["request"]["url"] for e in self.events if e.get("method") == "Network.requestWillBeSent"]

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    def dom(self) -> str:
        """The DOM as Chromium rendered it, serialised."""
        return self.evaluate("document.documentElement.outerHTML")

    def screenshot(self, path: Path, *, dark: bool = False, top: int = 0, height: int | None = None) -> None:
        """A PNG of the page in light or dark mode (`prefers-color-scheme`): all of it, or `height`
        pixels from `top`."""
        scheme = "dark" if dark else "light"
        self.call("Emulation.setEmulatedMedia", features=[{"name": "prefers-color-scheme", "value": scheme}])
        width, whole = self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
        clip = {"x": 0, "y": top, "width": width, "height": height or whole - top, "scale": 1}
        shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True, clip=clip)
        path.write_bytes(base64.b64decode(shot["data"]))
