"""Key press to settled screen, as a reviewer feels it: the real `dedup-tui PROJECT` in a real
terminal (tmux), a key sent, the screen polled (with its colours: a moved cursor changes only
attributes) until it stops changing.

For each key: the time from sending it to the screen's last change before it stayed unchanged
for --settle ms (median and max over --repeat presses, in ms). The same harness first times two
peers, so the table says what the terminal and the polling cost by themselves:

* echo      -- a raw-mode loop that prints each key it reads (the harness's floor)
* less      -- `less` moving down a line (`j`) in a long text file: a terminal program people use

The project is copied first (decisions are made and undone on the copy).

    python benchmarks/bench_keys.py --db notes.db                     # any scanned project
    python benchmarks/bench_keys.py --db big.db --size 80x24 --repeat 15
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SESSION = "dedup-bench-keys"

# (label, key, times, keys that undo it afterwards (or ""), what it is)
APP_KEYS = [
    ("cursor down", "Down", 1, "", "cluster list: next cluster (members and preview follow)"),
    ("cursor up", "Up", 1, "", "cluster list: previous cluster"),
    ("page", ">", 1, "<", "cluster list: next page"),
    ("sort", "s", 1, "", "cluster list: next sort order"),
    ("filter", "f", 1, "", "cluster list: next filter"),
    ("threshold +.01", "]", 1, "[", "threshold up by 0.01"),
    ("threshold +.05", "}", 1, "{", "threshold up by 0.05"),
    ("policy", "p", 1, "p", "components / greedy"),
    ("remove", "x", 1, "u", "decide: remove the member under the cursor, then undo"),
    ("pair view", "Enter", 1, "Escape", "open the pair view of the member under the cursor"),
]


def tmux(*args: str, check: bool = True) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=check).stdout


def screen() -> str:
    return tmux("capture-pane", "-p", "-e", "-t", SESSION)


def settle(settle_s: float, timeout: float) -> float:
    """Wait until the screen has not changed for settle_s; the time of its last change."""
    last, changed = screen(), time.perf_counter()
    deadline = changed + timeout
    while time.perf_counter() < deadline:
        now = screen()
        if now != last:
            last, changed = now, time.perf_counter()
        elif time.perf_counter() - changed >= settle_s:
            break
    return changed


def press(key: str, settle_s: float, timeout: float) -> float | None:
    """ms from sending `key` to the screen's last change; None when nothing changed."""
    before = screen()
    sent = time.perf_counter()
    tmux("send-keys", "-t", SESSION, key)
    first = None
    while time.perf_counter() - sent < timeout:
        now = screen()
        if now != before:
            first = time.perf_counter()
            break
    if first is None:
        return None
    return (settle(settle_s, timeout) - sent) * 1000


def start(command: str, size: tuple[int, int], ready: str, timeout: float) -> None:
    tmux("kill-session", "-t", SESSION, check=False)
    tmux("new-session", "-d", "-s", SESSION, "-x", str(size[0]), "-y", str(size[1]), command)
    deadline = time.perf_counter() + timeout
    while ready not in tmux("capture-pane", "-p", "-t", SESSION):
        if time.perf_counter() > deadline:
            raise SystemExit(f"the program did not show {ready!r} within {timeout:.0f} s:\n"
                             + tmux("capture-pane", "-p", "-t", SESSION))
        time.sleep(0.05)


def measure(label: str, key: str, undo: str, repeat: int, settle_s: float, timeout: float, rows: list) -> None:
    times = []
    for _ in range(repeat):
        t = press(key, settle_s, timeout)
        if t is not None:
            times.append(t)
        if undo:
            press(undo, settle_s, timeout)
    if times:
        rows.append((label, key, len(times), statistics.median(times), max(times)))
    else:
        rows.append((label, key, 0, float("nan"), float("nan")))


ECHO = ("import sys, termios, tty\nfd = sys.stdin.fileno(); tty.setraw(fd)\nprint('ready', end='\\r\\n', flush=True)\n"
        "n = 0\nwhile True:\n    c = sys.stdin.read(1)\n    if c == 'q': break\n    n += 1\n"
        "    print(f'key {n}: {c!r}', end='\\r\\n', flush=True)\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", required=True, help="a scanned project (copied before the run)")
    ap.add_argument("--size", default="120x40")
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--settle", type=float, default=150, help="ms without a change that count as settled")
    ap.add_argument("--timeout", type=float, default=10, help="s to wait for a key's screen")
    args = ap.parse_args()
    if not shutil.which("tmux"):
        raise SystemExit("needs tmux")
    size = tuple(int(x) for x in args.size.split("x"))
    settle_s, rows = args.settle / 1000, []
    exe = Path(sys.executable).parent / "dedup-tui"
    with tempfile.TemporaryDirectory(prefix="bench-keys-") as tmp:
        db = Path(tmp) / Path(args.db).name
        if not Path(args.db).is_file():
            raise SystemExit(f"{args.db}: no such project file")
        with sqlite3.connect(args.db) as src, sqlite3.connect(db) as dst:
            src.backup(dst)  # (with whatever its -wal file holds)
        text = Path(tmp) / "lines.txt"
        text.write_text("".join(f"line {i} of a long text file\n" for i in range(100_000)))
        try:
            start(f"{shlex.quote(sys.executable)} -c {shlex.quote(ECHO)}", size, "ready", 10)
            measure("echo (harness floor)", "a", "", args.repeat, settle_s, args.timeout, rows)
            start(f"less {shlex.quote(str(text))}", size, "line 0", 10)
            measure("less: line down", "j", "", args.repeat, settle_s, args.timeout, rows)
            t0 = time.perf_counter()
            start(f"{shlex.quote(str(exe))} {shlex.quote(str(db))}", size, "Clusters", 600)
            settle(settle_s, 60)
            opened = time.perf_counter() - t0
            for label, key, _, undo, _ in APP_KEYS:
                measure(label, key, undo, args.repeat, settle_s, args.timeout, rows)
        finally:
            tmux("kill-session", "-t", SESSION, check=False)
    print(f"### Key press to settled screen: {args.db} at {args.size} ({args.repeat} presses each, settled = "
          f"{args.settle:.0f} ms unchanged)\n")
    print(f"App open to a settled first screen: {opened:.1f} s\n")
    print("| program: key | key | presses | median ms | max ms |")
    print("|---|---|---:|---:|---:|")
    for label, key, n, med, worst in rows:
        print(f"| {label} | `{key}` | {n} | {med:.0f} | {worst:.0f} |")
    print("\nTimes include the harness (tmux, polling the screen with its colours): the echo row is its floor. "
          "A key whose screen never changed within the timeout counts 0 presses.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
