"""One table of the app's actions: bindings, the help screen and the command palette use it."""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding


@dataclass(frozen=True)
class Act:
    key: str  # Textual key name(s), comma separated
    action: str
    description: str  # footer / help text
    display: str  # how the key is shown in help and footer
    title: str  # command palette: "noun: verb"
    section: str
    show: bool = True
    priority: bool = False
    screen: str = "main"  # the binding id's prefix: ids are unique across the app
    variant: str = ""  # tells apart two bindings of one action (enter and d both open the pair)

    @property
    def id(self) -> str:
        """The binding id a keymap file names, e.g. main.remove, main.threshold-up-0.01."""
        name, _, args = self.action.removeprefix("app.").partition("(")
        args = args.rstrip(")").strip("'\"")
        if args.startswith("-"):
            args = "down-" + args[1:]
        elif args and args[0].isdigit():
            args = "up-" + args
        slug = "-".join(x for x in (name.replace("_", "-"), args.replace("_", "-"), self.variant) if x)
        return f"{self.screen}.{slug}"

    def binding(self) -> Binding:
        return Binding(
            self.key,
            self.action,
            self.description,
            show=self.show,
            key_display=self.display,
            id=self.id,
            priority=self.priority,
        )


def threshold_acts(section: str, screen: str = "main") -> list[Act]:
    """The threshold keys, the same on every screen that moves the threshold."""
    return [
        Act("plus", "threshold(0.01)", "+.01", "+", "threshold: raise by 0.01", section, show=False, screen=screen),
        Act("minus", "threshold(-0.01)", "-.01", "-", "threshold: lower by 0.01", section, show=False, screen=screen),
        Act(
            "ctrl+right",
            "threshold(0.05)",
            "+.05",
            "^→",
            "threshold: raise by 0.05",
            section,
            show=False,
            screen=screen,
        ),
        Act(
            "ctrl+left",
            "threshold(-0.05)",
            "-.05",
            "^←",
            "threshold: lower by 0.05",
            section,
            show=False,
            screen=screen,
        ),
    ]


# The main footer shows the decisions (and help, quit); the threshold, policy, sort and diff keys
# are shown where they act (the threshold bar, the list titles), so every key fits at 80 columns.
MAIN_ACTIONS = [
    Act("f1,question_mark", "app.help", "Help", "?", "app: show help and keys", "General"),
    Act(
        "ctrl+p",
        "app.command_palette",
        "Palette",
        "^p",
        "app: command palette (every action, by name)",
        "General",
        show=False,
    ),
    Act("q", "app.quit", "Quit", "q", "app: quit", "General"),
    Act("escape", "cancel_scan", "Cancel scan", "esc", "scan: cancel", "General"),
    Act(
        "R",
        "rescan",
        "Rescan",
        "R",
        "scan: scan again, with another floor or shingle size (or after a cancel or a failure)",
        "General",
        show=False,
    ),
    Act(
        "slash",
        "search",
        "Find",
        "/",
        "find: documents by id or text (every match listed), and jump to one",
        "Clusters",
        show=False,
    ),
    Act(
        "full_stop",
        "next_match(1)",
        "Next match",
        ".",
        "find: the next match of the last search",
        "Clusters",
        show=False,
    ),
    Act(
        "comma",
        "next_match(-1)",
        "Prev match",
        ",",
        "find: the previous match of the last search",
        "Clusters",
        show=False,
    ),
    # Each key means one thing on every screen: + - ctrl+→ ctrl+← move the threshold (here and in
    # the tuning screen), } { go to the next / previous cluster, ] [ to the next / previous change
    # (in the pair view: here they say so).
    *threshold_acts("Threshold"),
    Act("t", "type_threshold", "Set threshold", "t", "threshold: type a value", "Threshold", show=False),
    Act("p", "toggle_policy", "Policy", "p", "policy: switch components / greedy", "Threshold", show=False),
    Act("s", "cycle_sort", "Sort", "s", "clusters: change sort order", "Clusters", show=False),
    Act(
        "K",
        "cycle_keep_rule",
        "Keep rule",
        "K",
        "clusters: keep the first in corpus order / the longest text (when you did not choose)",
        "Clusters",
        show=False,
    ),
    Act(
        "ctrl+k",
        "keep_by_field",
        "Keep by field",
        "^k",
        "clusters: keep the highest / lowest value of a field (max:date = newest, max:score = best)",
        "Clusters",
        show=False,
    ),
    Act(
        "i",
        "id_width(4)",
        "Wider ids",
        "i",
        "ids: widen the id columns (remembered with the project)",
        "Clusters",
        show=False,
    ),
    Act("I", "id_width(-4)", "Narrower ids", "I", "ids: narrow the id columns", "Clusters", show=False),
    Act(
        "f",
        "cycle_filter",
        "Filter",
        "f",
        "clusters: show all / undecided / with a near duplicate / exact copies only",
        "Clusters",
        show=False,
    ),
    Act(
        "F",
        "type_filter",
        "Filter by",
        "F",
        "clusters: filter by size and lowest similarity (size>=5 sim<=0.9 undecided)",
        "Clusters",
        show=False,
    ),
    Act("greater_than_sign", "page(1)", "Next page", ">", "clusters: next page", "Clusters", show=False),
    Act("less_than_sign", "page(-1)", "Prev page", "<", "clusters: previous page", "Clusters", show=False),
    Act(
        "right_curly_bracket",
        "cluster(1)",
        "Next cluster",
        "}",
        "clusters: the next cluster of the list (its first member to review)",
        "Clusters",
        show=False,
    ),
    Act(
        "left_curly_bracket",
        "cluster(-1)",
        "Prev cluster",
        "{",
        "clusters: the previous cluster of the list",
        "Clusters",
        show=False,
    ),
    Act(
        "right_square_bracket",
        "change(1)",
        "Next change",
        "]",
        "pair: the next change (in the pair view: enter opens it)",
        "Clusters",
        show=False,
    ),
    Act(
        "left_square_bracket",
        "change(-1)",
        "Prev change",
        "[",
        "pair: the previous change (in the pair view: enter opens it)",
        "Clusters",
        show=False,
    ),
    Act(
        "enter",
        "open_pair",
        "Diff",
        "enter",
        "pair: compare with the kept document (in the cluster list: go to its members first)",
        "Clusters",
        show=False,
        variant="enter",
    ),
    Act("d", "open_pair", "Diff", "d", "pair: compare with the kept document", "Clusters", show=False),
    Act("k", "keep", "Keep", "k", "decide: keep this document (kept in its cluster)", "Decisions"),
    Act("x", "remove", "Remove", "x", "decide: remove this document", "Decisions"),
    Act(
        "n",
        "not_duplicate",
        "Not dup",
        "n",
        "decide: this document is not a duplicate (split it off its cluster, every link cut)",
        "Decisions",
    ),
    Act(
        "N",
        "none_duplicates",
        "None dup",
        "N",
        "decide: none of this cluster's documents are duplicates "
        "(variants, language packs; asks first if some were not shown)",
        "Decisions",
        show=False,
    ),
    Act(
        "a",
        "accept",
        "Accept",
        "a",
        "decide: accept the cluster as proposed (asks first if some members were not shown)",
        "Decisions",
    ),
    Act(
        "A",
        "bulk_accept",
        "Accept many",
        "A",
        "decide: accept every listed cluster to review whose lowest similarity is at least X (1 = exact copies only)",
        "Decisions",
        show=False,
    ),
    Act("m", "note", "Note", "m", "decide: add a note to this document", "Decisions", show=False),
    Act("u,ctrl+z", "undo", "Undo", "u", "decide: undo the last decision", "Decisions"),
    Act("r,ctrl+y", "redo", "Redo", "r", "decide: redo", "Decisions", show=False),
    Act("e", "export", "Export", "e", "export: write the curated corpus", "Export"),
    Act(
        "T",
        "tune",
        "Tune",
        "T",
        "tune: threshold tuning (distribution, labels, recommendation)",
        "Threshold",
        show=False,
    ),
    Act(
        "V",
        "audit",
        "Audit",
        "V",
        "audit: estimate the wrong removals nobody reviewed (label a sample)",
        "Threshold",
        show=False,
    ),
]

# The pair view decides as the main screen does (the same keys, on the right-hand document); its
# footer shows the decisions and the moves a reviewer at 80x24 triages with.
PAIR_ACTIONS = [
    Act("escape", "close", "Back", "esc", "pair: back to the clusters", "Pair view", screen="pair"),
    Act("greater_than_sign", "step(1)", "Next", ">", "pair: next member", "Pair view", screen="pair"),
    Act("less_than_sign", "step(-1)", "Prev", "<", "pair: previous member", "Pair view", show=False, screen="pair"),
    Act(
        "right_curly_bracket",
        "cluster(1)",
        "Next cluster",
        "}",
        "pair: next cluster of the list (its first member to review)",
        "Pair view",
        screen="pair",
    ),
    Act(
        "left_curly_bracket",
        "cluster(-1)",
        "Prev cl.",
        "{",
        "pair: previous cluster of the list",
        "Pair view",
        show=False,
        screen="pair",
    ),
    Act("k", "keep", "Keep", "k", "decide: keep the right-hand document", "Pair view", screen="pair"),
    Act("x", "remove", "Remove", "x", "decide: remove the right-hand document", "Pair view", screen="pair"),
    Act(
        "n",
        "not_duplicate",
        "Not dup",
        "n",
        "decide: the right-hand document is not a duplicate (split it off)",
        "Pair view",
        screen="pair",
    ),
    Act(
        "N",
        "none_duplicates",
        "None dup",
        "N",
        "decide: none of this cluster's documents are duplicates (asks first if some were not shown)",
        "Pair view",
        show=False,
        screen="pair",
    ),
    Act(
        "a",
        "accept",
        "Accept",
        "a",
        "decide: accept the cluster as proposed (asks first if some were not shown)",
        "Pair view",
        screen="pair",
    ),
    Act(
        "m",
        "note",
        "Note",
        "m",
        "decide: add a note to the right-hand document",
        "Pair view",
        show=False,
        screen="pair",
    ),
    Act("u,ctrl+z", "undo", "Undo", "u", "decide: undo the last decision", "Pair view", screen="pair"),
    Act("r,ctrl+y", "redo", "Redo", "r", "decide: redo", "Pair view", show=False, screen="pair"),
    Act("w", "toggle_layout", "Layout", "w", "pair: side by side / stacked", "Pair view", show=False, screen="pair"),
    Act(
        "c",
        "toggle_normalized",
        "Ignore case",
        "c",
        "pair: ignore differences of case and spacing (as the similarity does)",
        "Pair view",
        show=False,
        screen="pair",
    ),
    Act(
        "l",
        "toggle_aligned",
        "Lines",
        "l",
        "pair: lines aligned side by side / text flowing",
        "Pair view",
        show=False,
        screen="pair",
    ),
    Act(
        "right_square_bracket",
        "change(1)",
        "Next change",
        "]",
        "pair: the next change, marked ▶ (lines aligned)",
        "Pair view",
        show=False,
        screen="pair",
    ),
    Act(
        "left_square_bracket",
        "change(-1)",
        "Prev change",
        "[",
        "pair: the previous change, marked ▶ (lines aligned)",
        "Pair view",
        show=False,
        screen="pair",
    ),
    Act(
        "o",
        "toggle_fold",
        "Unfold",
        "o",
        "pair: show / fold runs of identical lines (lines aligned)",
        "Pair view",
        show=False,
        screen="pair",
    ),
    Act("f1,question_mark", "app.help", "Help", "?", "app: show help and keys", "Pair view", show=False, screen="pair"),
]

# The tuning screen and the labelling queues (tuning labels, audit) use keys of their own where their verb
# is not the main screen's: a label is evidence, never a decision, so no label key is a decision key
# (k x n N a A), and a tuning key never means on one screen what it means on another.
TUNE_ACTIONS = [
    Act("escape", "close", "Back", "esc", "tune: back to the clusters", "Tuning", screen="tune"),
    Act(
        "L",
        "label_pairs",
        "Label pairs",
        "L",
        "tune: label borderline pairs (labelling queue)",
        "Tuning",
        screen="tune",
    ),
    Act(
        "equals_sign",
        "apply",
        "Apply rec.",
        "=",
        "tune: set the threshold to the recommended one",
        "Tuning",
        screen="tune",
    ),
    Act(
        "v",
        "toggle_plots",
        "Plots",
        "v",
        "tune: numbers / plots (narrow terminals)",
        "Tuning",
        screen="tune",
        show=False,
    ),
    Act(
        "right_parenthesis",
        "target(0.01)",
        "Target ↑",
        ")",
        "tune: raise the target precision by 0.01",
        "Tuning",
        screen="tune",
    ),
    Act(
        "left_parenthesis",
        "target(-0.01)",
        "Target ↓",
        "(",
        "tune: lower the target precision by 0.01",
        "Tuning",
        screen="tune",
    ),
    *threshold_acts("Tuning", screen="tune"),
    Act(
        "b",
        "split_chain",
        "Break chain",
        "b",
        "tune: break the chained cluster (its weakest links decided not dup)",
        "Tuning",
        screen="tune",
    ),
    Act(
        "g",
        "open_chain",
        "Open",
        "g",
        "tune: go to the chained cluster in the main screen (open it)",
        "Tuning",
        screen="tune",
    ),
    Act("S", "save_svg", "Save SVG", "S", "tune: save the tuning screen as SVG", "Tuning", screen="tune"),
    Act(
        "j",
        "export_labels",
        "Labels JSONL",
        "j",
        "tune: export the labels as JSONL",
        "Tuning",
        show=False,
        screen="tune",
    ),
    Act("f1,question_mark", "app.help", "Help", "?", "app: show help and keys", "Tuning", show=False, screen="tune"),
]

LABEL_ACTIONS = [
    Act("escape", "close", "Back", "esc", "label: back to the tuning screen", "Labelling", screen="label"),
    Act("1", "label('duplicate')", "Duplicate", "1", "label: this pair is a duplicate", "Labelling", screen="label"),
    Act(
        "2",
        "label('not_duplicate')",
        "Not dup",
        "2",
        "label: this pair is not a duplicate (splits it)",
        "Labelling",
        screen="label",
    ),
    Act("0", "label('skip')", "Skip", "0", "label: skip this pair (not counted)", "Labelling", screen="label"),
    Act("u", "undo_label", "Undo", "u", "label: take back the last label", "Labelling", screen="label"),
    Act("w", "toggle_layout", "Layout", "w", "label: side by side / stacked", "Labelling", show=False, screen="label"),
    Act(
        "f1,question_mark", "app.help", "Help", "?", "app: show help and keys", "Labelling", show=False, screen="label"
    ),
]

AUDIT_ACTIONS = [
    Act("escape", "close", "Back", "esc", "audit: back to the clusters", "Audit", screen="audit"),
    Act(
        "1",
        "label('duplicate')",
        "Duplicate",
        "1",
        "audit: this removal is right (a duplicate)",
        "Audit",
        screen="audit",
    ),
    Act(
        "2",
        "label('not_duplicate')",
        "Not dup",
        "2",
        "audit: this removal is wrong (not a duplicate; no decision is made)",
        "Audit",
        screen="audit",
    ),
    Act("0", "label('skip')", "Skip", "0", "audit: skip this pair (not counted)", "Audit", screen="audit"),
    Act("f1,question_mark", "app.help", "Help", "?", "app: show help and keys", "Audit", show=False, screen="audit"),
]

EXTRA_KEYS = [
    ("tab / shift+tab", "move between the cluster list and the members", "General"),
    ("↑ ↓ pgup pgdn home end", "move in a list, scroll a document", "General"),
]

# The only keys bound to different actions on different screens, each meaning one thing still:
# key -> (the actions, that one meaning). Every other key runs one action wherever it is bound.
SAME_MEANING = {
    "escape": ({"close", "cancel_scan"}, "back: leave this screen (on the main screen: cancel the scan)"),
    "u": ({"undo", "undo_label"}, "undo the last change made on this screen"),
    "greater_than_sign": ({"page(1)", "step(1)"}, "next in the list on screen (page of clusters, member)"),
    "less_than_sign": ({"page(-1)", "step(-1)"}, "previous in the list on screen (page of clusters, member)"),
}
