"""Key press to settled screen, as a reviewer feels it: the real `dedup-tui PROJECT` in a real
terminal (tmux), a key sent, the screen polled (with its colours: a moved cursor changes only
attributes) until it stops changing.

For each key: the time from sending it to the screen's last change before it stayed unchanged
for --settle ms (median and max over --repeat presses, in ms). The same harness first times two
peers, so the table says what the terminal and the polling cost by themselves:

* echo      -- a raw-mode loop that prints each key it reads (the harness's floor)
* less      -- `less` moving down a line (`j`) in a long text file: a terminal program people use

The project is copied first (decisions are made and undone on the copy).

--code LABEL=DIR (repeatable) runs the app from the source tree DIR (PYTHONPATH), one window
per tree, and presses each key in every window in turn: a before/after comparison measured in
the same minutes, so a busy shared machine weighs on both alike.

    python benchmarks/bench_keys.py --db notes.db                     # any scanned project
    python benchmarks/bench_keys.py --db big.db --size 80x24 --repeat 15
    python benchmarks/bench_keys.py --db big.db --code before=/tmp/old --code after=.
    python benchmarks/bench_keys.py --db big.db --keys k,x,r        # only these keys' rows
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SESSION = f"dedup-bench-keys-{os.getpid()}"  # (another run on the machine has its own)

# (label, key, times, keys that undo it afterwards (or ""), what it is)
APP_KEYS = [
    ("cursor down", "Down", 1, "", "cluster list: next cluster (members and preview follow)"),
    ("cursor up", "Up", 1, "", "cluster list: previous cluster"),
    ("page", ">", 1, "<", "cluster list: next page"),
    ("sort", "s", 1, "", "cluster list: next sort order"),
    ("filter", "f", 1, "", "cluster list: next filter"),
    ("threshold +.01", "+", 1, "-", "threshold up by 0.01"),
    ("threshold +.05", "C-Right", 1, "C-Left", "threshold up by 0.05"),
    ("policy", "p", 1, "p", "components / greedy"),
    ("remove", "x", 1, "u", "decide: remove the member under the cursor, then undo"),
    ("redo (a removal)", "r", 1, "u", "redo the removal just undone, then undo it again (u costs the same)"),
    ("keep", "k", 1, "u", "decide: keep the member under the cursor, then undo"),
    ("pair view", "Enter", 1, "Escape", "open the pair view of the member under the cursor"),
]


def tmux(*args: str, check: bool = True) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=check).stdout


def screen(session: str = SESSION) -> str:
    return tmux("capture-pane", "-p", "-e", "-t", session)


def settle(settle_s: float, timeout: float, session: str = SESSION) -> float:
    """Wait until the screen has not changed for settle_s; the time of its last change."""
    last, changed = screen(session), time.perf_counter()
    deadline = changed + timeout
    while time.perf_counter() < deadline:
        now = screen(session)
        if now != last:
            last, changed = now, time.perf_counter()
        elif time.perf_counter() - changed >= settle_s:
            break
    return changed


def press(key: str, settle_s: float, timeout: float, session: str = SESSION) -> float | None:
    """ms from sending `key` to the screen's last change; None when nothing changed."""
    before = screen(session)
    sent = time.perf_counter()
    tmux("send-keys", "-t", session, key)
    first = None
    while time.perf_counter() - sent < timeout:
        now = screen(session)
        if now != before:
            first = time.perf_counter()
            break
    if first is None:
        return None
    return (settle(settle_s, timeout, session) - sent) * 1000


def start(command: str, size: tuple[int, int], ready: str, timeout: float, session: str = SESSION) -> None:
    tmux("kill-session", "-t", session, check=False)
    tmux("new-session", "-d", "-s", session, "-x", str(size[0]), "-y", str(size[1]), command)
    deadline = time.perf_counter() + timeout
    while ready not in tmux("capture-pane", "-p", "-t", session):
        if time.perf_counter() > deadline:
            raise SystemExit(
                f"the program did not show {ready!r} within {timeout:.0f} s:\n"
                + tmux("capture-pane", "-p", "-t", session)
            )
        time.sleep(0.05)


def summary(times: list[float]) -> tuple[int, float, float]:
    return (len(times), statistics.median(times), max(times)) if times else (0, float("nan"), float("nan"))


def measure(
    label: str,
    key: str,
    undo: str,
    repeat: int,
    settle_s: float,
    timeout: float,
    rows: list,
    sessions: list[str] = (SESSION,),
) -> None:
    """`key` pressed `repeat` times in each session in turn (then its undo keys)."""
    times: dict[str, list[float]] = {s: [] for s in sessions}
    for _ in range(repeat):
        for session in sessions:
            t = press(key, settle_s, timeout, session)
            if t is not None:
                times[session].append(t)
            if undo:
                press(undo, settle_s, timeout, session)
    rows.append((label, key, [summary(times[s]) for s in sessions]))


ECHO = (
    "import sys, termios, tty\nfd = sys.stdin.fileno(); tty.setraw(fd)\nprint('ready', end='\\r\\n', flush=True)\n"
    "n = 0\nwhile True:\n    c = sys.stdin.read(1)\n    if c == 'q': break\n    n += 1\n"
    "    print(f'key {n}: {c!r}', end='\\r\\n', flush=True)\n"
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", required=True, help="a scanned project (copied before the run)")
    ap.add_argument("--size", default="120x40")
    ap.add_argument("--repeat", type=int, default=9)
    # (150 ms missed a key whose screen changed twice 200 ms apart: it read as settled after the first)
    ap.add_argument("--settle", type=float, default=300, help="ms without a change that count as settled")
    ap.add_argument("--timeout", type=float, default=10, help="s to wait for a key's screen")
    ap.add_argument(
        "--code",
        action="append",
        default=[],
        metavar="LABEL=DIR",
        help="run the app from this source tree (repeat to compare trees, keys pressed in turn)",
    )
    ap.add_argument("--keys", default="", help="only these keys' rows, by key, comma-separated (e.g. 'k,x,r')")
    args = ap.parse_args()
    chosen = [k for k in args.keys.split(",") if k]
    unknown = [k for k in chosen if k not in {key for _, key, *_ in APP_KEYS}]
    if unknown:
        raise SystemExit(f"--keys: unknown {', '.join(unknown)} (keys: {', '.join(key for _, key, *_ in APP_KEYS)})")
    if not shutil.which("tmux"):
        raise SystemExit("needs tmux")
    size = tuple(int(x) for x in args.size.split("x"))
    codes: list[tuple[str, Path | None]] = []
    for spec in args.code:
        label, sep, folder = spec.partition("=")
        if not sep or not (Path(folder) / "dedup_tui").is_dir():
            raise SystemExit(f"--code {spec}: expected LABEL=DIR, DIR holding dedup_tui/")
        codes.append((label, Path(folder).resolve()))
    codes = codes or [("app", None)]
    settle_s, rows = args.settle / 1000, []
    exe = Path(sys.executable).parent / "dedup-tui"
    if not Path(args.db).is_file():
        raise SystemExit(f"{args.db}: no such project file")
    sessions = [f"{SESSION}-{label}" for label, _ in codes]
    opened: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-keys-") as tmp:
        text = Path(tmp) / "lines.txt"
        text.write_text("".join(f"line {i} of a long text file\n" for i in range(100_000)))
        try:
            start(f"{shlex.quote(sys.executable)} -c {shlex.quote(ECHO)}", size, "ready", 10)
            measure("echo (harness floor)", "a", "", args.repeat, settle_s, args.timeout, rows)
            start(f"less {shlex.quote(str(text))}", size, "line 0", 10)
            measure("less: line down", "j", "", args.repeat, settle_s, args.timeout, rows)
            tmux("kill-session", "-t", SESSION, check=False)
            for (label, folder), session in zip(codes, sessions):
                db = Path(tmp) / label / Path(args.db).name  # a copy per window (one window per project)
                db.parent.mkdir()
                with sqlite3.connect(args.db) as src, sqlite3.connect(db) as dst:
                    src.backup(dst)  # (with whatever its -wal file holds)
                command = f"{shlex.quote(str(exe))} {shlex.quote(str(db))}"
                if folder is not None:
                    command = f"env PYTHONPATH={shlex.quote(str(folder))} {command}"
                t0 = time.perf_counter()
                start(command, size, " clusters", 600, session)  # the summary's count: the list is shown
                settle(settle_s, 60, session)
                opened.append(time.perf_counter() - t0)
            for label, key, _, undo, _ in APP_KEYS:
                if chosen and key not in chosen:
                    continue
                measure(label, key, undo, args.repeat, settle_s, args.timeout, rows, sessions)
        finally:
            for session in [SESSION, *sessions]:
                tmux("kill-session", "-t", session, check=False)
    print(
        f"### Key press to settled screen: {args.db} at {args.size} ({args.repeat} presses each, settled = "
        f"{args.settle:.0f} ms unchanged)\n"
    )
    trees = "" if codes[0][1] is None else " · ".join(f"{label}: {folder}" for label, folder in codes)
    if trees:
        print(f"Source trees (keys pressed in each window in turn): {trees}\n")
    print(
        "App open to a settled first screen: "
        + ", ".join(f"{t:.1f} s" + (f" ({label})" if len(codes) > 1 else "") for (label, _), t in zip(codes, opened))
        + "\n"
    )
    names = [label for label, _ in codes]
    if len(codes) == 1:
        print("| program: key | key | presses | median ms | max ms |")
        print("|---|---|---:|---:|---:|")
    else:
        print("| program: key | key | presses | " + " | ".join(f"{n} median ms | {n} max ms" for n in names) + " |")
        print("|---|---|---:|" + "---:|---:|" * len(names))
    for label, key, stats in rows:
        n = stats[0][0]
        cells = " | ".join(f"{med:.0f} | {worst:.0f}" for _n, med, worst in stats)
        if len(stats) < len(names):  # the peers (echo, less): once, in the first columns
            cells += " | — | —" * (len(names) - len(stats))
        print(f"| {label} | `{key}` | {n} | {cells} |")
    print(
        "\nTimes include the harness (tmux, polling the screen with its colours): the echo row is its floor. "
        "A key whose screen never changed within the timeout counts 0 presses."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
