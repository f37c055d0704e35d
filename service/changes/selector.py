"""The change selection in the service: the pull request's files from GitHub (every page, up
to GitHub's cap), its tree at the commit from a cached bare mirror, and the pure selection of
`workflows.changes` over both."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ondemand.git import Mirrors, Tree
from service.github.client import FILES_CAP, GitHubClient, PullFile, PullInfo
from workflows.changes import (
    Changed,
    Rule,
    Selection,
    accuracy_argv,
    patch_lines,
    select_for_workflow,
)
from workflows.spec import WorkflowSpec


@dataclass(frozen=True)
class ChangeReport:
    """What a pull request changes at `sha`: `selection` None when it has more files than
    GitHub lists (`total` past FILES_CAP), so no selection could see them all. `selection`
    holds every backend's operators with why; `by_backend` which of them each backend's
    tests name (backends whose workflows look in other test folders may differ)."""

    sha: str
    total: int
    listed: int
    selection: Selection | None
    by_backend: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @property
    def capped(self) -> bool:
        return self.selection is None


def as_changed(item: PullFile) -> Changed:
    """A listed file as the selection reads it: its changed lines from its patch; a rename
    with no change has none, a file GitHub gives no patch for (binary, too large) unknown."""
    removed = item.status == "removed"
    if item.patch:
        lines = patch_lines(item.patch)
    elif item.status == "renamed" and item.changes == 0:
        lines = ()
    else:
        lines = None
    return Changed(
        item.filename,
        previous=item.previous_filename,
        lines=None if removed else lines,
        removed=removed,
    )


class ChangeSelector:
    """Selects the operators of a pull request's change, per backend's workflow."""

    def __init__(
        self, github: GitHubClient, mirrors: Mirrors, workflows: Mapping[str, WorkflowSpec]
    ) -> None:
        self.github = github
        self.mirrors = mirrors
        self.workflows = workflows

    def select(
        self,
        repo: str,
        pull: PullInfo,
        sha: str,
        backends: Sequence[str],
        rules: Sequence[Rule] = (),
    ) -> ChangeReport:
        """The operators `pull` changes at `sha` (its head, approved), as each backend's
        workflow names them (once per distinct set of accuracy steps); a private repository
        is fetched with a token. GitError when the commit cannot be fetched; GitHubError as
        for every call."""
        if pull.changed_files > FILES_CAP:
            return ChangeReport(sha, pull.changed_files, 0, None)
        files = self.github.pull_files(repo, pull.number)
        changed = [as_changed(f) for f in files]
        token = self.github.git_token(repo) if pull.private else None
        mirror = self.mirrors.fetch(pull.clone_url, sha, pull.number, shallow=True, token=token)
        tree = Tree(mirror, sha)
        union = Selection()
        by_key: dict[tuple[tuple[str, ...], ...], Selection] = {}
        by_backend: dict[str, frozenset[str]] = {}
        for backend in backends:
            workflow = self.workflows[backend]
            key = accuracy_argv(workflow)
            if key not in by_key:
                by_key[key] = select_for_workflow(changed, tree.paths, tree.read, workflow, rules)
            chosen = by_key[key]
            by_backend[backend] = frozenset(chosen.operators)
            for op, reasons in chosen.operators.items():
                for why in reasons:
                    union.add(op, why)
        selections = list(by_key.values())
        union.operators = dict(sorted(union.operators.items()))
        union.unmatched = sorted(set.intersection(*(set(s.unmatched) for s in selections)))
        total = max(pull.changed_files, len(files))
        return ChangeReport(sha, total, len(files), union, by_backend)
