"""Deterministic benchmark corpora with planted near-duplicates and a ground-truth group.

Kinds:

* ``long``  -- ~4 KB documents built from sentences (real package summaries when
  ../shared/corpora/package_summaries.jsonl.gz is present, else sentences of a generated
  vocabulary drawn with a Zipf distribution);
* ``short`` -- ~200-character documents from the same sentence source;
* ``real``  -- the real package summaries themselves (first N lines, no planting; the
  ``group`` field is null). Falls back to ``short`` when the file is absent.
* ``realplus`` -- every real summary plus generated near-variants of them up to N;
* ``template`` -- 2-6 KB documentation pages (CLI manual pages): ~80% rendered from 20-40
  templates (fixed boilerplate with slots for command, version, path and option names;
  optional and reordered sections; an option table; each page documents one of the
  template's commands; some pages are revisions of an earlier one), the rest unique pages.
  Millions of pairs >= 0.5 at 20k pages; group = the template ("t07") or "u<i>";
* ``manpages`` -- the 9,885 real manual pages of ../shared/corpora/manpages_a.jsonl.gz as they
  are (8,295 of them one SDK's pages from one template); ``--docs N`` below 9,885 keeps N pages
  evenly spaced through the file (file order), above it all of them. No planting; group null;
* ``manpages2x`` -- every real page plus one generated variant of it (twice as many pages):
  stands in for the full 19.8k-page set we do not have; see ``manpage_variant``;
* ``families`` -- 150-800-character package descriptions (mean ~430): 45% in families of
  near-copies (sizes at quantiles of a power law, 10 to ~1,100 members at 64k documents,
  scaled with the corpus) sharing most text with their own names, versions and word edits;
  the rest singletons. ~1M pairs >= 0.5 at 64k; group = "f<i>" or "s<i>".

``benchmarks/corpus_shape.py`` measures the near-duplicate shape of any kind.

In ``long`` and ``short`` about 45% of the documents belong to planted groups: an original
plus 1-5 variants made by one noise operation each (exact copy, case/whitespace change,
character edits, word edits, sentence replacement, truncation) at several strengths, so
pair similarities spread over the whole 0.3-1.0 range, including just above and below the
usual floors. Every document carries ``group`` (the same string for an original and its
variants; singletons get their own). Output is a pure function of (kind, n, seed).

Run ``python benchmarks/corpora.py --kind long --docs 1000 --out corpus.jsonl`` to write one.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import random
import re
from pathlib import Path
from statistics import NormalDist

REPO = Path(__file__).resolve().parent.parent


def _shared_corpus(name: str) -> Path:
    """../shared/corpora/NAME relative to the repository; in a git worktree (whose .git is a
    file "gitdir: MAIN/.git/worktrees/X"), relative to the main checkout MAIN when not here."""
    here = REPO.parent / "shared" / "corpora" / name
    git = REPO / ".git"
    if not here.exists() and git.is_file():
        line = git.read_text().strip()
        if line.startswith("gitdir:"):
            gitdir = Path(line[len("gitdir:") :].strip())
            if gitdir.parent.name == "worktrees":
                main_checkout = gitdir.parent.parent.parent
                there = main_checkout.parent / "shared" / "corpora" / name
                if there.exists():
                    return there
    return here


SUMMARIES = _shared_corpus("package_summaries.jsonl.gz")
MANPAGES = _shared_corpus("manpages_a.jsonl.gz")

LONG_TARGET = 4000
SHORT_RANGE = (120, 280)
PLANTED_FRACTION = 0.45

# (operation, strength) choices for variants; weights favour the interesting middle.
NOISE_OPS = [
    ("exact", 0.0, 1),
    ("case_space", 0.0, 1),
    ("char", 0.005, 2),
    ("char", 0.01, 2),
    ("char", 0.02, 2),
    ("char", 0.04, 2),
    ("char", 0.08, 1),
    ("word", 0.02, 2),
    ("word", 0.05, 2),
    ("word", 0.1, 2),
    ("word", 0.2, 1),
    ("sentence", 0.1, 1),
    ("sentence", 0.3, 1),
    ("truncate", 0.1, 1),
    ("truncate", 0.3, 1),
]

_WS = re.compile(r"\s+")


def summaries_path() -> Path | None:
    env = os.environ.get("DEDUP_BENCH_SUMMARIES")
    p = Path(env) if env else SUMMARIES
    return p if p.exists() else None


def read_summaries(limit: int | None = None) -> list[str]:
    """Texts of the real package summaries, in file order (first `limit` lines)."""
    path = summaries_path()
    if path is None:
        raise FileNotFoundError(SUMMARIES)
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            out.append(json.loads(line)["text"])
            if limit is not None and len(out) >= limit:
                break
    return out


class SentenceSource:
    """Sentences to build documents from: real summaries or a Zipf-distributed vocabulary."""

    def __init__(self, seed: int, use_real: bool = True):
        self.rng = random.Random(seed * 7919 + 17)
        self.real = None
        if use_real and summaries_path() is not None:
            texts = read_summaries(300_000)
            seen, pool = set(), []
            for t in texts:
                t = _WS.sub(" ", t).strip()
                if 25 <= len(t) <= 300 and t.lower() not in seen:
                    seen.add(t.lower())
                    pool.append(t)
            self.real = pool
        if self.real is None:
            syll = [
                "ka",
                "lo",
                "mi",
                "ne",
                "ru",
                "ta",
                "shi",
                "po",
                "den",
                "var",
                "qu",
                "zel",
                "an",
                "or",
                "ix",
                "um",
                "bre",
                "sto",
                "fa",
                "gli",
                "tor",
                "win",
                "ep",
                "yo",
            ]
            vocab = set()
            r = random.Random(seed)
            while len(vocab) < 20_000:
                vocab.add("".join(r.choice(syll) for _ in range(r.randint(1, 4))))
            self.vocab = sorted(vocab)
            r.shuffle(self.vocab)
            # Zipf(s=1.1) weights over ranks.
            self.weights = [1.0 / (i + 1) ** 1.1 for i in range(len(self.vocab))]
            self.cum = []
            acc = 0.0
            for w in self.weights:
                acc += w
                self.cum.append(acc)

    @property
    def kind(self) -> str:
        return "package-summary sentences" if self.real is not None else "Zipf vocabulary"

    def sentence(self) -> str:
        if self.real is not None:
            s = self.rng.choice(self.real)
            return s if s.endswith((".", "!", "?")) else s + "."
        n = self.rng.randint(5, 20)
        words = self.rng.choices(self.vocab, cum_weights=self.cum, k=n)
        s = " ".join(words)
        return s[0].upper() + s[1:] + "."

    def document(self, target: int) -> str:
        parts, size = [], 0
        while size < target:
            s = self.sentence()
            parts.append(s)
            size += len(s) + 1
        return " ".join(parts)

    def word(self) -> str:
        if self.real is not None:
            return self.rng.choice(self.rng.choice(self.real).split())
        return self.rng.choices(self.vocab, cum_weights=self.cum, k=1)[0]


_ALPHABET = "abcdefghijklmnopqrstuvwxyz etaoinshrdlu"


def _char_edits(rng: random.Random, text: str, rate: float) -> str:
    chars = list(text)
    n_edits = max(1, round(len(chars) * rate))
    for _ in range(n_edits):
        if not chars:
            break
        i = rng.randrange(len(chars))
        op = rng.random()
        if op < 0.4:
            chars[i] = rng.choice(_ALPHABET)
        elif op < 0.7:
            del chars[i]
        else:
            chars.insert(i, rng.choice(_ALPHABET))
    return "".join(chars)


def _word_edits(rng: random.Random, src: SentenceSource, text: str, rate: float) -> str:
    words = text.split(" ")
    n_edits = max(1, round(len(words) * rate))
    for _ in range(n_edits):
        if not words:
            break
        i = rng.randrange(len(words))
        op = rng.random()
        if op < 0.4:
            words[i] = src.word()
        elif op < 0.7 and len(words) > 1:
            del words[i]
        else:
            words.insert(i, src.word())
    return " ".join(words)


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?]) ", text) if s]


def make_variant(rng: random.Random, src: SentenceSource, text: str, op: str, strength: float) -> str:
    if op == "exact":
        return text
    if op == "case_space":  # identical after normalisation
        t = text.upper() if rng.random() < 0.5 else text
        return "  " + t.replace(" ", "  \n", 3) + "\t"
    if op == "char":
        return _char_edits(rng, text, strength)
    if op == "word":
        return _word_edits(rng, src, text, strength)
    if op == "sentence":
        sents = _sentences(text)
        if len(sents) < 3:
            return _word_edits(rng, src, text, strength)
        for _ in range(max(1, round(len(sents) * strength))):
            sents[rng.randrange(len(sents))] = src.sentence()
        return " ".join(sents)
    if op == "truncate":  # drop a tail, append fresh text of similar size
        cut = max(1, int(len(text) * (1 - strength)))
        extra = src.document(max(1, len(text) - cut)) if len(text) > 400 else src.word()
        return text[:cut] + " " + extra
    raise ValueError(op)


# Near-variant operations for short texts (sentence operations make no sense on one line).
SHORT_VARIANT_OPS = [
    ("exact", 0.0),
    ("case_space", 0.0),
    ("char", 0.02),
    ("char", 0.04),
    ("char", 0.08),
    ("char", 0.15),
    ("word", 0.1),
    ("word", 0.2),
    ("word", 0.3),
    ("truncate", 0.1),
    ("truncate", 0.3),
]


def real_plus_variants(n_docs: int, seed: int = 0) -> list[dict]:
    """Every real summary, then near-variants of random ones up to n_docs: a million short
    documents with real template families plus planted near-duplicates. A variant's group is
    its original's id (originals are their own group)."""
    texts = read_summaries()
    rng = random.Random(seed)
    src = SentenceSource(seed)
    pool = [i for i, t in enumerate(texts) if len(t) >= 30]
    out = [{"id": f"r{i:07d}", "text": t, "group": f"r{i:07d}"} for i, t in enumerate(texts[:n_docs])]
    for j in range(max(0, n_docs - len(texts))):
        op, strength = rng.choice(SHORT_VARIANT_OPS)
        base = rng.choice(pool)
        out.append(
            {"id": f"v{j:07d}", "text": make_variant(rng, src, texts[base], op, strength), "group": f"r{base:07d}"}
        )
    return out


# ---------------------------------------------------------------------------------------
# "template": documentation pages rendered from a few dozen templates, plus unique pages.
# ---------------------------------------------------------------------------------------

TEMPLATE_PAGE_CHARS = (2000, 6000)
TEMPLATED_FRACTION = 0.8
TEMPLATE_SPREAD = 0.8  # sigma of the log-normal template popularity
TEMPLATE_REVISIONS = 0.15  # share of templated pages that are a revision of an earlier page

_SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ne",
    "ru",
    "ta",
    "po",
    "den",
    "var",
    "zel",
    "an",
    "or",
    "ix",
    "um",
    "bre",
    "sto",
    "fa",
    "tor",
    "win",
    "ep",
    "yo",
    "sh",
    "gr",
    "kl",
    "v",
    "t",
    "s",
    "d",
]
_NAME_PARTS = [
    "sync",
    "backup",
    "log",
    "net",
    "conf",
    "pkg",
    "dock",
    "stat",
    "mon",
    "auth",
    "cert",
    "db",
    "proxy",
    "mirror",
    "index",
    "build",
    "deploy",
    "fetch",
    "watch",
    "trace",
    "cache",
    "queue",
    "mail",
    "dns",
    "disk",
    "vol",
    "snap",
    "repo",
    "test",
    "lint",
    "fmt",
    "run",
    "serve",
    "shell",
    "crypt",
    "key",
    "user",
    "host",
    "time",
    "job",
    "task",
    "flow",
    "graph",
    "map",
    "scan",
    "diff",
]
_NAME_PREFIXES = ["", "", "", "x", "py", "go", "k", "n", "fs", "lib", "pg", "git-", "ng", "open", "q"]
_OPT_WORDS = [
    "verbose",
    "quiet",
    "output",
    "input",
    "format",
    "config",
    "dry-run",
    "force",
    "recursive",
    "timeout",
    "retries",
    "port",
    "host",
    "user",
    "log-level",
    "no-color",
    "jobs",
    "cache-dir",
    "prefix",
    "include",
    "exclude",
    "since",
    "until",
    "limit",
    "sort",
    "reverse",
    "json",
    "yaml",
    "strict",
    "watch",
    "all",
    "depth",
    "follow",
    "interval",
    "listen",
    "bind",
    "tls",
    "cert",
    "key-file",
    "profile",
    "region",
    "namespace",
    "label",
    "selector",
    "workers",
    "batch-size",
    "compress",
    "checksum",
    "keep",
    "prune",
    "offset",
    "encoding",
    "separator",
    "template",
]
_ARGS = [
    "FILE",
    "DIR",
    "N",
    "SECONDS",
    "PATTERN",
    "URL",
    "NAME",
    "LEVEL",
    "FORMAT",
    "PATH",
    "KEY=VALUE",
    "HOST:PORT",
    "SIZE",
    "DATE",
    "ID",
    "EXPR",
]
_PATHS = [
    "/etc/{c}/{c}.conf",
    "~/.config/{c}/config.toml",
    "/var/lib/{c}",
    "/usr/share/doc/{c}",
    "/var/log/{c}.log",
    "$XDG_CACHE_HOME/{c}",
    "/run/{c}.pid",
    "/opt/{c}/bin/{c}",
    "{c}.yaml",
    "/usr/local/etc/{c}rc",
    "~/.{c}_history",
    "/srv/{c}/data",
]
_VALUES = [
    "3",
    "10",
    "30s",
    "5m",
    "json",
    "yaml",
    "debug",
    "info",
    "./out",
    "/tmp/x",
    "origin",
    "main",
    "eu-west-1",
    "localhost:8080",
    "0.0.0.0:9000",
    "'*.log'",
    "2024-01-01",
    "4",
    "64M",
    "utf-8",
]


def _name(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return (
            rng.choice(_NAME_PREFIXES)
            + rng.choice(_NAME_PARTS)
            + (rng.choice(_NAME_PARTS) if rng.random() < 0.4 else "")
        )
    return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4)))


def _version(rng: random.Random) -> str:
    return f"{rng.randint(0, 12)}.{rng.randint(0, 30)}.{rng.randint(0, 20)}"


def _slotted(rng: random.Random, text: str, slots: tuple[str, ...], n: int) -> list[str]:
    """Words of text with n slot markers (filled per page) put at random word positions."""
    words = text.split(" ")
    for _ in range(n):
        words.insert(rng.randrange(len(words) + 1), rng.choice(slots))
    return words


class _Command:
    def __init__(self, rng: random.Random, src: SentenceSource, tpl: _Template):
        self.name = _name(rng)
        self.tagline = src.sentence()
        self.args = " ".join(rng.sample(_ARGS, rng.randint(0, 2)))
        scale = tpl.cmd_scale
        self.description = src.document(int(rng.randint(150, 500) * scale))
        own = range(tpl.core, len(tpl.options))
        self.options = list(range(tpl.core)) + rng.sample(own, rng.randint(2, min(8, len(own))))
        self.extra = src.document(int(rng.randint(100, 400) * scale))  # notes, present in most of its pages


class _Template:
    """A documentation page shape: boilerplate paragraphs with slots, optional and movable
    sections, an option table, commands that fill it (each page documents one command)."""

    SLOTS = ("§cmd§", "§version§", "§path§", "§project§", "§opt§")

    def __init__(self, rng: random.Random, src: SentenceSource):
        self.project = _name(rng).capitalize()
        self.style = rng.choice(["man", "md", "rst"])
        self.section = rng.choice(["1", "1", "8", "5"])
        self.options = [
            ("--" + w, rng.choice(_ARGS) if rng.random() < 0.6 else "", src.sentence())
            for w in rng.sample(_OPT_WORDS, rng.randint(14, 30))
        ]
        # boilerplate budget: how much of a page is the template's fixed text; how much of it is
        # the command's own (loose templates: pages of different commands share less)
        self.boiler_chars = rng.randint(1000, 2600)
        self.cmd_scale = rng.uniform(0.2, 1.5)
        self.core = rng.randint(2, 8)  # the first `core` options are on every page
        self.sections = []  # (heading, kind, payload, probability present, movable)
        left, i = self.boiler_chars, 0
        while left > 0:
            size = min(left, rng.randint(150, 700))
            text = src.document(size)
            heading = rng.choice(
                [
                    "About",
                    "Usage notes",
                    "Behaviour",
                    "Details",
                    "Caveats",
                    "Security",
                    "Compatibility",
                    "Performance",
                    "Configuration",
                    "Bugs",
                    "History",
                ]
            )
            self.sections.append(
                (
                    heading,
                    "boiler",
                    _slotted(rng, text, self.SLOTS, max(1, size // 150)),
                    1.0 if i < 2 or rng.random() < 0.6 else rng.uniform(0.5, 0.95),
                    i >= 1,
                )
            )
            left -= size
            i += 1
        self.sections += [
            ("Files", "files", rng.sample(_PATHS, rng.randint(2, 5)), rng.uniform(0.5, 1.0), True),
            (
                "Environment",
                "env",
                [rng.choice(_OPT_WORDS).upper().replace("-", "_") for _ in range(rng.randint(1, 4))],
                rng.uniform(0.5, 1.0),
                True,
            ),
            ("Examples", "examples", None, rng.uniform(0.6, 1.0), True),
            ("Notes", "notes", None, 1.0, True),
        ]
        self.exit_text = _slotted(rng, src.document(rng.randint(100, 300)), self.SLOTS, 1)
        self.commands = [_Command(rng, src, self) for _ in range(rng.randint(4, 30))]
        self.cmd_cum = []
        acc = 0.0
        for i in range(len(self.commands)):
            acc += 1.0 / (i + 1)
            self.cmd_cum.append(acc)
        # share of fresh text per page: some templates are tight, some loose
        self.fresh = (rng.uniform(0.0, 0.03), rng.uniform(0.05, 0.25))

    def heading(self, title: str) -> str:
        if self.style == "man":
            return title.upper()
        if self.style == "md":
            return "## " + title
        return title + "\n" + "-" * len(title)

    def page(self, rng: random.Random, src: SentenceSource) -> str:
        cmd = rng.choices(self.commands, cum_weights=self.cmd_cum, k=1)[0]
        version = _version(rng)
        vals = {
            "§cmd§": cmd.name,
            "§version§": version,
            "§project§": self.project,
            "§path§": rng.choice(_PATHS).format(c=cmd.name),
        }

        def fill(words: list[str]) -> str:
            return " ".join(vals.get(w, w) if w != "§opt§" else rng.choice(self.options)[0] for w in words)

        opts = [self.options[i] for i in cmd.options if rng.random() > 0.08]
        opts += rng.sample(self.options, rng.randint(0, 1))
        if self.style == "man":
            head = f"{cmd.name.upper()}({self.section})    {self.project} Manual    {cmd.name.upper()}({self.section})"
        elif self.style == "md":
            head = f"# {cmd.name} — {cmd.tagline}"
        else:
            head = f"{cmd.name} {version} documentation\n" + "=" * 30
        fixed_top = [
            head,
            self.heading("Name") + "\n" + f"{cmd.name} - {cmd.tagline}",
            self.heading("Synopsis")
            + "\n"
            + f"{cmd.name} [OPTIONS] {cmd.args}".rstrip()
            + "\n"
            + "\n".join(f"{cmd.name} {o} {a}".rstrip() for o, a, _ in opts[:3]),
            self.heading("Description") + "\n" + cmd.description,
            self.heading("Options") + "\n" + "\n".join(f"  {o} {a}".rstrip() + f"\n      {d}" for o, a, d in opts),
        ]
        fresh_share = rng.uniform(*self.fresh)
        body = []
        for title, kind, payload, prob, movable in self.sections:
            if prob < 1.0 and rng.random() > prob:
                continue
            if kind == "boiler":
                text = fill(payload)
            elif kind == "files":
                text = "\n".join(p.format(c=cmd.name) for p in payload)
            elif kind == "env":
                text = "\n".join(f"{cmd.name.upper().replace('-', '_')}_{v}" for v in payload)
            elif kind == "examples":
                text = "\n".join(
                    f"$ {cmd.name} {rng.choice(opts or self.options)[0]} {rng.choice(_VALUES)}"
                    for _ in range(rng.randint(2, 5))
                )
            else:  # notes: the command's own notes sometimes, then fresh text
                parts = [cmd.extra] if rng.random() < 0.85 else []
                parts.append(src.document(int(fresh_share * self.boiler_chars) + 1))
                text = " ".join(parts)
            body.append((movable, self.heading(title) + "\n" + text))
        movable_idx = [i for i, (m, _) in enumerate(body) if m]
        if rng.random() < 0.5 and len(movable_idx) > 1:  # reorder the movable sections
            moved = [body[i] for i in movable_idx]
            rng.shuffle(moved)
            for i, item in zip(movable_idx, moved):
                body[i] = item
        tail = [
            self.heading("Exit status") + "\n" + fill(self.exit_text),
            self.heading("See also")
            + "\n"
            + ", ".join(
                f"{c.name}({self.section})"
                for c in rng.sample(self.commands, min(len(self.commands), rng.randint(1, 5)))
            ),
            f"{self.project} {version}    {rng.randint(2015, 2026)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
        ]
        text = "\n\n".join(fixed_top + [t for _, t in body] + tail)
        lo, hi = TEMPLATE_PAGE_CHARS
        if len(text) < lo:
            text += "\n\n" + self.heading("More") + "\n" + src.document(lo - len(text))
        if len(text) > hi:
            cut = text.rfind("\n\n", 0, hi)
            text = text[: cut if cut > lo else hi]
        return text


def template_pages(n_docs: int, seed: int = 0) -> list[dict]:
    """Documentation pages: ~80% rendered from 20-40 templates (group "t<template>"), the rest
    unique pages of sentences (group "u<i>"). Pages are 2-6 KB."""
    rng = random.Random(f"template-{seed}")
    src = SentenceSource(seed)
    src.rng = random.Random(f"template-src-{seed}")
    templates = [_Template(rng, src) for _ in range(rng.randint(20, 40))]
    # template popularity: log-normal quantiles (the same unevenness for every seed)
    weights = [
        math.exp(TEMPLATE_SPREAD * NormalDist().inv_cdf((i + 0.5) / len(templates))) for i in range(len(templates))
    ]
    rng.shuffle(weights)
    n_tpl = round(n_docs * TEMPLATED_FRACTION)
    docs: list[tuple[str, str]] = []
    rendered: list[list[str]] = [[] for _ in templates]
    for t in rng.choices(range(len(templates)), weights=weights, k=n_tpl):
        if rendered[t] and rng.random() < TEMPLATE_REVISIONS:
            # a revision of an earlier page: another version, a few words changed
            prev = rng.choice(rendered[t])
            m = re.search(r"\b\d+\.\d+\.\d+\b", prev)
            text = prev.replace(m.group(0), _version(rng)) if m else prev
            text = _word_edits(rng, src, text, rng.uniform(0.002, 0.03))
        else:
            text = templates[t].page(rng, src)
        rendered[t].append(text)
        docs.append((f"t{t:02d}", text))
    lo, hi = TEMPLATE_PAGE_CHARS
    for i in range(n_docs - n_tpl):
        paras = []
        target = rng.randint(lo, hi)
        size = 0
        while size < target:
            p = src.document(rng.randint(200, 900))
            paras.append(p)
            size += len(p) + 2
        docs.append((f"u{i}", ("# " + src.sentence().rstrip(".") + "\n\n" + "\n\n".join(paras))[:hi]))
    rng.shuffle(docs)
    return [{"id": f"p{i:07d}", "text": t, "group": g} for i, (g, t) in enumerate(docs)]


def generate(kind: str, n_docs: int, seed: int = 0) -> list[dict]:
    """n_docs records {"id", "text", "group"} (deterministic for (kind, n_docs, seed))."""
    if kind == "realplus" and summaries_path() is not None:
        return real_plus_variants(n_docs, seed)
    if kind == "realplus":
        kind = "short"
    if kind == "real":
        if summaries_path() is None:
            kind = "short"
        else:
            texts = read_summaries(n_docs)
            return [{"id": f"r{i:07d}", "text": t, "group": None} for i, t in enumerate(texts)]
    if kind == "template":
        return template_pages(n_docs, seed)
    if kind == "families":
        return family_descriptions(n_docs, seed)
    if kind == "manpages":
        return manpages(n_docs)
    if kind == "manpages2x":
        return manpages_twice(n_docs, seed)
    if kind not in ("long", "short"):
        raise ValueError(f"unknown corpus kind {kind!r}")
    rng = random.Random(seed)
    src = SentenceSource(seed)
    ops = [(o, s) for o, s, w in NOISE_OPS for _ in range(w)]

    def original() -> str:
        if kind == "long":
            return src.document(rng.randint(int(LONG_TARGET * 0.75), int(LONG_TARGET * 1.25)))
        return src.document(rng.randint(*SHORT_RANGE))

    docs: list[tuple[str, str]] = []  # (group, text)
    planted_target = int(n_docs * PLANTED_FRACTION)
    g = 0
    while len(docs) < planted_target:
        base = original()
        group = f"g{g}"
        g += 1
        docs.append((group, base))
        for _ in range(rng.randint(1, 5)):
            op, strength = rng.choice(ops)
            docs.append((group, make_variant(rng, src, base, op, strength)))
    docs = docs[:planted_target]
    while len(docs) < n_docs:
        docs.append((f"s{g}", original()))
        g += 1
    rng.shuffle(docs)
    return [{"id": f"d{i:07d}", "text": t, "group": grp} for i, (grp, t) in enumerate(docs)]


# ---------------------------------------------------------------------------------------
# "families": short package descriptions with dense near-duplicate families.
# ---------------------------------------------------------------------------------------

FAMILY_CHARS = (150, 800, 340)  # triangular(low, high, mode): mean ~430
FAMILY_FRACTION = 0.45  # share of documents in families; the rest are singletons
FAMILY_SIZES_AT_64K = (10, 2000)  # family sizes scale with the corpus (x n/64,000)
FAMILY_TAIL = 1.5  # P(size > s) ~ s^-1.5
_LICENSES = ["MIT", "BSD-3-Clause", "Apache-2.0", "GPL-3.0-or-later", "MPL-2.0", "ISC", "LGPL-2.1"]
_DESC_SHAPES = [
    "{name}: {body} Install with `pip install {name}=={version}`.",
    "{name} {version} - {body} License: {license}.",
    "{body} This is {name} version {version}.",
    "# {name}\n\n{body}\n\nInstallation: pip install {name}\nLicense: {license}",
    "{name} — {body} Requires Python >= 3.{py}. Version {version}.",
]


def _family_sizes(n_docs: int) -> list[int]:
    """Family sizes at quantiles of a truncated power law (not random draws: the shape is the
    same for every seed), scaled to the corpus, summing to about FAMILY_FRACTION * n_docs."""
    lo, hi = FAMILY_SIZES_AT_64K
    a = FAMILY_TAIL

    def inv(u: float) -> float:  # inverse CDF of the density ~ s^-(a+1) on [lo, hi]
        return (lo**-a - u * (lo**-a - hi**-a)) ** (-1 / a)

    scale = n_docs / 64_000
    target = FAMILY_FRACTION * n_docs
    m = 200
    mean = sum(inv((i + 0.5) / m) for i in range(m)) / m
    m = max(1, round(target / (mean * scale)))
    sizes = [max(2, round(inv((i + 0.5) / m) * scale)) for i in range(m)]
    return sorted(sizes, reverse=True)


def _package_body(rng: random.Random, src: SentenceSource, target: int) -> str:
    if rng.random() < 0.3:  # a feature list
        items = []
        size = 0
        while size < target * 0.6:
            s = src.sentence()
            items.append("- " + s)
            size += len(s) + 3
        return src.sentence() + "\nFeatures:\n" + "\n".join(items)
    return src.document(target)


def _description(rng: random.Random, src: SentenceSource, shape: str, name: str, version: str, body: str) -> str:
    text = (
        shape.replace("{name}", name)
        .replace("{version}", version)
        .replace("{body}", body)
        .replace("{license}", rng.choice(_LICENSES))
        .replace("{py}", str(rng.randint(7, 12)))
    )
    hi = FAMILY_CHARS[1]
    return text if len(text) <= hi else text[: max(text.rfind(" ", 0, hi), hi // 2)]


def family_descriptions(n_docs: int, seed: int = 0) -> list[dict]:
    """Package descriptions (150-800 characters, mean ~430): families of near-copies (a base
    text, a few branches of it, members of a branch with their own name, version and small
    word edits; group "f<i>"), and singletons (group "s<i>")."""
    rng = random.Random(f"families-{seed}")
    src = SentenceSource(seed)
    src.rng = random.Random(f"families-src-{seed}")
    lo, hi, mode = FAMILY_CHARS
    docs: list[tuple[str, str]] = []
    for f, size in enumerate(_family_sizes(n_docs)):
        if len(docs) + size > n_docs:
            size = n_docs - len(docs)
            if size <= 0:
                break
        target = int(rng.triangular(lo, hi, mode))
        shape = rng.choice(_DESC_SHAPES)
        stem = _name(rng)
        body = _package_body(rng, src, max(60, target - 60))
        # how far the branches and the members drift from the base: per family
        branch_edit = rng.uniform(0.0, 0.3)
        member_edit = rng.uniform(0.0, 0.12)
        branches = [body] + [
            _word_edits(rng, src, body, branch_edit) if branch_edit > 0.01 else body
            for _ in range(max(0, round(size**0.5 / 3)))
        ]
        for _ in range(size):
            text = rng.choice(branches)
            if member_edit > 0.005 and rng.random() < 0.8:
                text = _word_edits(rng, src, text, rng.uniform(0, member_edit))
            if rng.random() < 0.15:  # a sentence more
                text = text + " " + src.sentence()
            name = stem + rng.choice(["-", "_", "", "."]) + _name(rng) if rng.random() < 0.9 else stem
            docs.append((f"f{f}", _description(rng, src, shape, name, _version(rng), text)))
    i = 0
    while len(docs) < n_docs:
        target = int(rng.triangular(lo, hi, mode))
        text = _description(
            rng, src, rng.choice(_DESC_SHAPES), _name(rng), _version(rng), _package_body(rng, src, max(60, target - 60))
        )
        docs.append((f"s{i}", text))
        i += 1
    rng.shuffle(docs)
    return [{"id": f"k{i:07d}", "text": t, "group": g} for i, (g, t) in enumerate(docs)]


# ---------------------------------------------------------------------------------------
# "manpages" and "manpages2x": real manual pages (../shared/corpora/manpages_a.jsonl.gz).
# ---------------------------------------------------------------------------------------

MANPAGES_PAGES = 9_885


class CorpusMissing(SystemExit):
    """A real corpus file is absent: one line on stderr, exit status 1 (a SystemExit)."""

    def __init__(self, what: str, path: Path, env: str):
        super().__init__(
            f"error: {what} not found at {path} (set ${env} to its path, or place it at "
            f"../shared/corpora/ relative to the repository)"
        )


def manpages_path() -> Path | None:
    env = os.environ.get("DEDUP_BENCH_MANPAGES")
    p = Path(env) if env else MANPAGES
    return p if p.exists() else None


def read_manpages() -> list[dict]:
    """Every record of manpages_a.jsonl.gz ({"id": "man1/name.1", "text": page}) in file order."""
    path = manpages_path()
    if path is None:
        raise CorpusMissing(
            "the manual pages corpus (manpages_a.jsonl.gz)",
            Path(os.environ.get("DEDUP_BENCH_MANPAGES") or MANPAGES),
            "DEDUP_BENCH_MANPAGES",
        )
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def _spaced(n_total: int, n: int) -> list[int]:
    """n indices evenly spaced through range(n_total) (all of them when n >= n_total)."""
    if n >= n_total:
        return list(range(n_total))
    return [i * n_total // n for i in range(n)]


def manpages(n_docs: int) -> list[dict]:
    """The real pages as they are (id and text). Fewer than all: evenly spaced through the file,
    so a small development run keeps the corpus's mix (84% from the SDK's template)."""
    recs = read_manpages()
    return [recs[i] for i in _spaced(len(recs), n_docs)]


_MAN_NAME = re.compile(r"^(man\w*)/(.+?)(\.\w+)?$")
_WORD = re.compile(r"\S+")


def _man_name(doc_id: str) -> tuple[str, str, str]:
    """(section folder, page name, extension) of an id such as "man1/gcloud_beta_iap_web.1"."""
    m = _MAN_NAME.match(doc_id)
    return (m.group(1), m.group(2), m.group(3) or "") if m else ("", doc_id, "")


def _family(name: str) -> str:
    return re.split(r"[_\-.]", name, maxsplit=1)[0].lower()


def _units(text: str) -> tuple[list[str], str]:
    """A page's units: its paragraphs when it has many (gcloud pages), else its lines."""
    paras = text.split("\n\n")
    return (paras, "\n\n") if len(paras) >= 8 else (text.split("\n"), "\n")


def _is_option(unit: str) -> bool:
    u = unit.lstrip()
    if u.startswith("2m\n"):  # gcloud's rendering puts "2m" before a flag's line
        u = u[3:].lstrip()
    return u.startswith("-")


def _is_heading(unit: str) -> bool:
    """A section heading ("NAME", "GCLOUD WIDE FLAGS"): upper case, one short line."""
    u = unit.strip()
    return bool(u) and "\n" not in u and len(u) <= 40 and u.upper() == u and any(c.isalpha() for c in u)


def manpage_variant(
    recs: list[dict], i: int, by_family: dict[str, list[int]], loners_by_section: dict[str, list[int]], seed: int = 0
) -> dict:
    """A new page in page i's template: page i with another page's ("donor": same family, e.g.
    another gcloud page; for a page of its own, one of its section outside families of more than
    100 pages) command name, option blocks and words swapped in.

    1. Name: the page's command (e.g. "gcloud beta iap web", in its spaced, underscored and
       upper-case forms) gets the donor's last name word instead of its own ("gcloud beta iap
       describe"); when they are equal, the donor's word is appended.
    2. Units (paragraphs on pages with 8 or more, else lines): every option unit (a flag and,
       for gcloud, its "2m" marker) is replaced, with probability p_opt ~ U(0.3, 0.7), by a random
       option unit of the donor; every other unit but a heading, with probability p_swap ~
       U(0.05, 0.3), by the donor's unit at the same relative position unless that one is a
       heading (the page keeps its own headings: the template's shape stays).
    3. Words: a share ~ U(0.02, 0.08) of the words is replaced by a donor word, dropped, or
       preceded by a donor word (a third each).
    A variant whose normalised text equals its original's is edited again. Deterministic per
    (seed, i): the same page gets the same variant whatever the corpus size."""
    rng = random.Random(f"manpages2x-{seed}-{i}")
    rec = recs[i]
    section, name, ext = _man_name(rec["id"])
    pool = by_family.get(_family(name), [])
    if len(pool) < 2:  # a page of its own: a donor of its section, not from the SDK's template
        pool = loners_by_section.get(section) or list(range(len(recs)))
    j = i
    while j == i and len(pool) > 1:
        j = rng.choice(pool)
    donor = recs[j]
    _, dname, _ = _man_name(donor["id"])
    words = name.split("_") if "_" in name else [name]
    dwords = dname.split("_") if "_" in dname else [dname]
    new_words = words[:-1] + [dwords[-1]] if dwords[-1] != words[-1] else words + [dwords[0]]
    text = rec["text"]
    for old, new in ((" ".join(words), " ".join(new_words)), ("_".join(words), "_".join(new_words))):
        if len(old) >= 3:
            text = text.replace(old, new).replace(old.upper(), new.upper())
    units, sep = _units(text)
    dunits, _ = _units(donor["text"])
    d_opts = [u for u in dunits if _is_option(u)]
    p_opt, p_swap = rng.uniform(0.3, 0.7), rng.uniform(0.05, 0.3)
    out = []
    for k, u in enumerate(units):
        if _is_option(u) and d_opts:
            out.append(rng.choice(d_opts) if rng.random() < p_opt else u)
        elif dunits and not _is_heading(u) and rng.random() < p_swap:
            d = dunits[min(len(dunits) - 1, k * len(dunits) // max(1, len(units)))]
            out.append(u if _is_heading(d) else d)
        else:
            out.append(u)
    text = sep.join(out)
    dvocab = _WORD.findall(donor["text"]) or ["x"]

    def norm(t):
        return _WS.sub(" ", t.lower().strip())

    original = norm(rec["text"])
    rate = rng.uniform(0.02, 0.08)
    while True:
        pieces = re.split(r"(\s+)", text)  # words at even positions, the whitespace between kept
        for w in range(0, len(pieces), 2):
            if pieces[w] and rng.random() < rate:
                op = rng.random()
                if op < 1 / 3:
                    pieces[w] = rng.choice(dvocab)
                elif op < 2 / 3:
                    pieces[w] = ""
                else:
                    pieces[w] = rng.choice(dvocab) + " " + pieces[w]
        text = "".join(pieces)
        if norm(text) != original:
            break
        rate = max(rate, 0.05)
    return {"id": f"{section}/{'_'.join(new_words)}{ext}#v{i}" if section else f"{rec['id']}#v{i}", "text": text}


def manpages_twice(n_docs: int, seed: int = 0) -> list[dict]:
    """Every real page (of the evenly spaced ceil(n/2), see ``manpages``), then one variant of
    each (``manpage_variant``) in the same order: 19,770 pages at full size."""
    recs = read_manpages()
    base = _spaced(len(recs), (n_docs + 1) // 2)
    by_family: dict[str, list[int]] = {}
    names = [_man_name(r["id"]) for r in recs]
    for k, (_, name, _) in enumerate(names):
        by_family.setdefault(_family(name), []).append(k)
    loners_by_section: dict[str, list[int]] = {}  # pages outside families of more than 100
    for k, (section, name, _) in enumerate(names):
        if len(by_family[_family(name)]) <= 100:
            loners_by_section.setdefault(section, []).append(k)
    out = [recs[i] for i in base]
    out += [manpage_variant(recs, i, by_family, loners_by_section, seed) for i in base]
    return out[:n_docs]


KINDS = ["long", "short", "real", "realplus", "template", "families", "manpages", "manpages2x"]


def write_jsonl(records: list[dict], path: str | Path) -> int:
    """Write records as JSONL; returns the number of bytes of text (UTF-8)."""
    total = 0
    with open(path, "w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
            total += len(r["text"].encode("utf-8"))
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kind", choices=KINDS, default="long")
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    recs = generate(a.kind, a.docs, a.seed)
    size = write_jsonl(recs, a.out)
    print(f"{len(recs):,} documents, {size / 1e6:.1f} MB of text -> {a.out}")


if __name__ == "__main__":
    main()
