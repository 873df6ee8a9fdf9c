"""Generate the bundled sample corpus: short notes with planted exact and near duplicates.

All text is produced here from templates written for this project (CC0), so the sample is
licence-clean. Run `python sample_corpora/make_samples.py` to regenerate; output is
deterministic. Writes sample_corpora/notes.jsonl and the package copy the app opens.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

SUBJECTS = [
    "The library",
    "Our team",
    "The new release",
    "This guide",
    "The parser",
    "The scheduler",
    "A volunteer",
    "The community garden",
    "The city council",
    "The bakery",
    "The museum",
    "The research group",
    "The river survey",
    "The night market",
    "The school choir",
]
VERBS = [
    "announced",
    "published",
    "improved",
    "documented",
    "tested",
    "reviewed",
    "replaced",
    "measured",
    "repaired",
    "celebrated",
    "postponed",
    "simplified",
    "translated",
]
OBJECTS = [
    "a faster import path",
    "the spring schedule",
    "its recycling rules",
    "a guide for beginners",
    "the opening hours",
    "a fix for long file names",
    "the annual report",
    "a map of the old town",
    "the recipe for rye bread",
    "a plan to plant two hundred trees",
    "the water quality results",
    "a safer bicycle route",
    "the volunteer rota",
    "support for right-to-left text",
]
TAILS = [
    "after a long discussion.",
    "with help from local students.",
    "ahead of the holidays.",
    "following several complaints.",
    "in a short public meeting.",
    "without much fuss.",
    "for the third year running.",
    "and thanked everyone involved.",
    "on a rainy Tuesday.",
    "after measuring twice.",
    "so that newcomers can join easily.",
]
EXTRA = [
    "Questions can be sent by post.",
    "Details follow next week.",
    "Everyone is welcome.",
    "The notes are available at the front desk.",
    "Tea will be served.",
    "Bring a friend.",
    "Minutes of the meeting are attached.",
    "Parking is limited.",
    "Children must be accompanied.",
]


def sentence(rng: random.Random) -> str:
    return f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(TAILS)}"


def document(rng: random.Random) -> str:
    parts = [sentence(rng) for _ in range(rng.randint(2, 4))]
    parts += rng.sample(EXTRA, rng.randint(1, 3))
    return " ".join(parts)


def edit_words(rng: random.Random, text: str, fraction: float) -> str:
    words = text.split(" ")
    for _ in range(max(1, int(len(words) * fraction))):
        op = rng.random()
        i = rng.randrange(len(words))
        if op < 0.4:
            words[i] = rng.choice(["new", "small", "local", "big", "early", "late", "kind", "quiet"])
        elif op < 0.7 and len(words) > 3:
            del words[i]
        else:
            words.insert(i, rng.choice(["very", "also", "again", "finally", "really"]))
    return " ".join(words)


def build(seed: int = 2026) -> list[dict]:
    rng = random.Random(seed)
    docs: list[dict] = []
    originals = [document(rng) for _ in range(180)]
    for text in originals:
        docs.append({"id": f"note-{len(docs) + 1:04d}", "text": text, "kind": "original"})
        roll = rng.random()
        if roll < 0.12:  # exact duplicate, sometimes with case/whitespace changes
            variant = text if rng.random() < 0.5 else "  " + text.upper().replace(" ", "  ") + "\n"
            docs.append({"id": f"note-{len(docs) + 1:04d}", "text": variant, "kind": "exact copy"})
        elif roll < 0.55:  # near duplicates at varied edit levels
            for _ in range(rng.randint(1, 3)):
                fraction = rng.choice([0.03, 0.06, 0.1, 0.15, 0.2, 0.3])
                docs.append(
                    {
                        "id": f"note-{len(docs) + 1:04d}",
                        "text": edit_words(rng, text, fraction),
                        "kind": f"edited {int(fraction * 100)}%",
                    }
                )
        elif roll < 0.62:  # boilerplate added
            docs.append(
                {
                    "id": f"note-{len(docs) + 1:04d}",
                    "text": "UPDATE: " + text + " " + rng.choice(EXTRA),
                    "kind": "boilerplate",
                }
            )
    # A few hostile texts: markup and escapes must be shown literally by the app.
    docs.append(
        {
            "id": "note-markup",
            "text": "[bold red]Not bold[/] and [link=file:///etc/passwd]not a link[/link]. " + originals[0],
            "kind": "markup",
        }
    )
    docs.append(
        {"id": "note-escape", "text": "\x1b[31mnot red\x1b[0m \x1b]0;title\x07 " + originals[1], "kind": "escape"}
    )
    order = list(range(len(docs)))
    rng.shuffle(order)
    return [docs[i] for i in order]


def main() -> None:
    here = Path(__file__).resolve().parent
    docs = build()
    payload = "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs)
    for target in (here / "notes.jsonl", here.parent / "dedup_tui" / "samples" / "notes.jsonl"):
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(payload, encoding="utf-8")
    print(f"wrote {len(docs)} documents")


if __name__ == "__main__":
    main()
