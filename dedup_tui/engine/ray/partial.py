"""A project imported from a cluster scan (scandir.import_scan) is a partial view of a larger
corpus: it holds only the documents in some pair or exact group. Its PartialView says of what,
and the local commands that would need the whole corpus refuse it."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field

from ..errors import ProjectError
from ..store import Project

META_KEY = "partial_view"


@dataclass(frozen=True)
class PartialView:
    scan_dir: str
    corpus_documents: int  # documents in the whole corpus the cluster scan read
    documents: int  # of those, the ones this project holds
    inputs: list[str] = field(default_factory=list)  # the corpus's files
    imported_at: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, raw: str | None) -> PartialView | None:
        """The view stored by an import; None for a local project (or a damaged value)."""
        if not raw:
            return None
        try:
            view = json.loads(raw)
        except ValueError:
            return None
        if not isinstance(view, dict):
            return None
        inputs = view.get("inputs", [])
        return cls(
            scan_dir=str(view.get("scan_dir", "")),
            corpus_documents=int(view.get("corpus_documents", 0)),
            documents=int(view.get("documents", 0)),
            inputs=[str(p) for p in inputs] if isinstance(inputs, list) else [],
            imported_at=str(view.get("imported_at", "")),
        )

    def describe(self) -> str:
        names = [os.path.basename(p) for p in self.inputs]
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        return (
            f"partial view: {self.documents:,} of {self.corpus_documents:,} documents "
            f"(those in a pair or exact group) of {shown}; write the curated corpus with cluster-export"
        )


def partial_view(project: Project) -> PartialView | None:
    """For an imported cluster scan, what it is a partial view of; else None."""
    return PartialView.from_json(project.get_meta(META_KEY))


def refuse_local_rescan(project: Project, doing: str) -> None:
    if partial_view(project) is not None:
        raise ProjectError(
            f"{project.path}: imported from a cluster scan, so it cannot be {doing} here: scan the "
            f"corpus again with dedup-tui cluster-scan and import that"
        )


def refuse_local_export(project: Project) -> None:
    view = partial_view(project)
    if view is not None:
        raise ProjectError(
            f"{project.path}: holds {view.documents:,} of the corpus's "
            f"{view.corpus_documents:,} documents (imported from a cluster scan); write the "
            f"curated corpus with dedup-tui cluster-export"
        )
