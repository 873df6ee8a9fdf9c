"""Driving `dedup-tui serve` from a real browser: Debian's headless Chromium through Selenium.

Used by tests/ui/test_browser.py and scripts/browser_screenshot.py.

textual-serve's page draws the terminal with xterm.js on a canvas (its WebGL or canvas
renderer), so the screen is not in the DOM. The page's script keeps its xterm `Terminal` in a
closure; a script run before the page's own (Chrome DevTools `addScriptToEvaluateOnNewDocument`)
catches it as the page assigns it (`this.terminal = new Terminal(...)` in the object that also
holds the websocket address), and `screen()` reads the rows xterm.js holds, which are what the
canvas shows.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")


def missing() -> str | None:
    """Why the browser tests cannot run here (None: they can)."""
    absent = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if absent:
        return (
            f"no {' or '.join(absent)}: install Debian's chromium and chromium-driver "
            f"(apt-get install chromium chromium-driver; .ci/run does)"
        )
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    return None


def processes() -> list[tuple[int, int, str]]:
    """(pid, process group, command line) of every process, from ps."""
    out = subprocess.run(["ps", "-eo", "pid=,pgid=,args="], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        pid, pgid, *args = line.split(None, 2)
        rows.append((int(pid), int(pgid), args[0] if args else ""))
    return rows


class Served:
    """`dedup-tui serve PROJECT --port 0` in its own process group; stop() (again: a no-op) ends
    it and checks that no process of the group (the server, an app of a browser) is left."""

    def __init__(self, db: Path, *args: str, timeout: float = 60.0, env: dict | None = None):
        self.process = subprocess.Popen(
            [sys.executable, "-P", "-m", "dedup_tui", "serve", str(db), "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            env=env,
        )
        self.output: list[str] = []
        self.url = self._read_url(timeout)

    def _read_url(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            while time.monotonic() < deadline:
                if not selector.select(timeout=deadline - time.monotonic()):
                    break
                line = self.process.stdout.readline()
                if not line:
                    break
                self.output.append(line)
                if line.startswith("dedup-tui: serving "):
                    return line.split(" at ", 1)[1].split()[0]
        self.stop()
        raise RuntimeError("dedup-tui serve did not start:\n" + "".join(self.output))

    def group(self) -> list[tuple[int, int, str]]:
        return [p for p in processes() if p[1] == self.process.pid]

    def stop(self, timeout: float = 30.0) -> list[str]:
        """Ctrl+C to the server (it closes every browser's app), then wait; returns the command
        lines of the processes of its group still running (killed then), [] when none."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        deadline = time.monotonic() + timeout
        left = self.group()
        while left and time.monotonic() < deadline:  # the apps exit after the server has
            time.sleep(0.1)
            left = self.group()
        if left or self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait(timeout=timeout)
        if self.process.stdout is not None and not self.process.stdout.closed:
            self.output.append(self.process.stdout.read())
            self.process.stdout.close()
        return [args for _pid, _pgid, args in left]

    def __enter__(self) -> Served:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


# Caught before the page's script runs: the xterm Terminal textual-serve's page creates.
CATCH_TERMINAL = """
Object.defineProperty(Object.prototype, "terminal", {
  configurable: true,
  set(value) {
    Object.defineProperty(this, "terminal", {value, writable: true, configurable: true, enumerable: true});
    if ("websocket_url" in this) { window.__dedupTerminal = value; }
  },
});
"""

READ_SCREEN = """
const t = window.__dedupTerminal;
if (!t) { return null; }
const buffer = t.buffer.active, rows = [];
for (let y = 0; y < t.rows; y++) {
  const line = buffer.getLine(buffer.viewportY + y);
  rows.push(line ? line.translateToString(true) : "");
}
return rows.join("\\n");
"""


class Browser:
    """Headless Chromium with a profile of its own (so quit() can check it is gone)."""

    def __init__(self, profile: Path, width: int = 1280, height: int = 800):
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        self.profile = profile
        options = webdriver.ChromeOptions()
        options.binary_location = str(CHROMIUM)
        for arg in (
            "--headless=new",
            "--no-sandbox",
            "--disable-dev-shm-usage",
            "--disable-gpu",
            f"--window-size={width},{height}",
            f"--user-data-dir={profile}",
            "--no-first-run",
        ):
            options.add_argument(arg)
        self.driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
        self.driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": CATCH_TERMINAL})

    def open(self, url: str) -> None:
        self.driver.get(url)

    def screen(self) -> str:
        """The terminal's rows as text ("" before the page made its terminal)."""
        return self.driver.execute_script(READ_SCREEN) or ""

    def wait_for(self, wanted: str | Callable[[str], bool], timeout: float = 60.0) -> str:
        """Poll the screen until it shows `wanted` (a text, or a test of the screen); returns it."""
        from selenium.common.exceptions import TimeoutException
        from selenium.webdriver.support.ui import WebDriverWait

        test = (lambda s: wanted in s) if isinstance(wanted, str) else wanted
        shown: list[str] = [""]

        def ready(_driver) -> bool:
            shown[0] = self.screen()
            return test(shown[0])

        try:
            WebDriverWait(self.driver, timeout, poll_frequency=0.05).until(ready)
        except TimeoutException:
            raise AssertionError(f"the page never showed {wanted!r}; it shows:\n{shown[0]}") from None
        return shown[0]

    def session_ended(self, timeout: float = 30.0) -> bool:
        """Wait for the page to say its session ended (textual-serve's page marks its body -closed)."""
        from selenium.common.exceptions import TimeoutException
        from selenium.webdriver.support.ui import WebDriverWait

        try:
            WebDriverWait(self.driver, timeout, poll_frequency=0.05).until(
                lambda d: d.execute_script("return document.body.classList.contains('-closed')")
            )
        except TimeoutException:
            return False
        return True

    def keys(self, *keys: str) -> None:
        """Type into the terminal, as a user would (xterm.js's input element has the focus)."""
        from selenium.webdriver.common.by import By

        box = self.driver.find_element(By.CSS_SELECTOR, ".xterm-helper-textarea")
        for key in keys:
            box.send_keys(key)

    def screenshot(self, path: Path) -> None:
        self.driver.save_screenshot(str(path))

    def quit(self, timeout: float = 30.0) -> list[str]:
        """Close the browser; returns the command lines of its processes still running."""
        self.driver.quit()
        deadline = time.monotonic() + timeout
        left = self._left()
        while left and time.monotonic() < deadline:
            time.sleep(0.1)
            left = self._left()
        return left

    def _left(self) -> list[str]:
        return [args for _pid, _pgid, args in processes() if f"--user-data-dir={self.profile}" in args]

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.quit()
