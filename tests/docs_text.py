"""The README and the documentation pages (docs/*.md) as text, for the tests that run their
examples: a section is found by its heading wherever it now lives, so moving a section from the
README to a page (or between pages) moves its test with it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def pages() -> list[Path]:
    """The README, then every page of the documentation site."""
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


def _headings(lines: list[str]) -> list[tuple[int, int, str]]:
    """(line index, level, title) of each heading outside fenced code (a `# comment` in a bash
    block is not a heading)."""
    found, fenced = [], False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"(#{1,6}) (.+?)\s*$", line)):
            found.append((i, len(m.group(1)), m.group(2)))
    return found


def section(title: str, page: Path | None = None) -> str:
    """The section under the heading `title` (any level), up to the next heading of its level or
    above: in `page`, or in whichever of the README and docs/*.md holds it (exactly one must)."""
    hits = []
    for path in [page] if page else pages():
        lines = path.read_text(encoding="utf-8").splitlines()
        headings = _headings(lines)
        for n, (start, level, heading) in enumerate(headings):
            if heading == title:
                end = next((i for i, lv, _ in headings[n + 1 :] if lv <= level), len(lines))
                hits.append((path, "\n".join(lines[start:end]) + "\n"))
    where = [str(path.relative_to(ROOT)) for path, _ in hits]
    assert len(hits) == 1, f"the heading {title!r} is in {where or 'no page'}; the test needs it in exactly one"
    return hits[0][1]


def code_blocks(text: str, language: str) -> list[str]:
    """The fenced blocks of `language` (```python, ```bash) in `text`, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.S | re.M)
