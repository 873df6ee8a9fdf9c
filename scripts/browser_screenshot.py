#!/usr/bin/env python
"""Serve the sample's project with `dedup-tui serve` and photograph the page in headless
Chromium (the same tooling as tests/ui/test_browser.py).

    python scripts/browser_screenshot.py [--out screenshots] [--size 1280x800]

Writes browser.png (the first browser, reviewing, after a decision) and
browser-read-only.png (a second browser on the same project: the read-only view). Needs
/usr/bin/chromium and /usr/bin/chromedriver (Debian: apt-get install chromium chromium-driver)
and selenium.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SAMPLE = ROOT / "sample_corpora" / "notes.jsonl"

from tests.browser_session import Browser, Served, missing  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "screenshots")
    parser.add_argument("--size", default="1280x800", help="browser window, in pixels")
    args = parser.parse_args()
    why = missing()
    if why:
        sys.exit(f"error: {why}")
    width, height = (int(x) for x in args.size.split("x"))
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "notes.db"
        env = {**os.environ, "DEDUP_TUI_APP_WARMUP": "0", "PYTHONPATH": str(ROOT)}
        subprocess.run(
            [sys.executable, "-P", "-m", "dedup_tui", "scan", str(db), str(SAMPLE)],
            check=True,
            env=env,
            stdout=subprocess.DEVNULL,
        )
        served = Served(db, env=env)
        browsers: list[Browser] = []
        try:
            first = Browser(Path(tmp) / "chrome-1", width, height)
            browsers.append(first)
            first.open(served.url)
            first.wait_for(lambda s: "clusters:" in s and "Keep" in s)
            first.keys("\t", "k")  # a decision, so the list shows one
            first.wait_for("Saved: keep")
            first.wait_for(lambda s: "Saved: keep" not in s, timeout=30)  # its notice gone (after 3 s)
            first.screenshot(args.out / "browser.png")
            print("wrote", args.out / "browser.png")
            second = Browser(Path(tmp) / "chrome-2", width, height)
            browsers.append(second)
            second.open(served.url)
            second.wait_for(lambda s: "READ-ONLY" in s and "clusters:" in s)
            second.keys("x")
            second.wait_for("decisions cannot be made here")
            second.screenshot(args.out / "browser-read-only.png")
            print("wrote", args.out / "browser-read-only.png")
        finally:
            left = [p for b in browsers for p in b.quit()]
            left += served.stop()
        if left:
            sys.exit(f"error: processes left running: {left}")


if __name__ == "__main__":
    main()
