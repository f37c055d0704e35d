"""The change selection in the service: the pull request's files from GitHub (every page, up
to GitHub's cap), its tree at the commit from a cached bare mirror, and the pure selection of
`workflows.changes` over both. For the default branch's own runs, a push's files come from the
mirror instead (`before..after`, both commits fetched one deep: no cap), and a run of every
operator selects as if every file of the tree had changed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ondemand.git import Mirrors, Tree, changed_between, diff_zero
from service.github.client import GitHubClient
from service.github.reads import FILES_CAP, PullFile, PullInfo
from workflows.changes import (
    Changed,
    Rule,
    Selection,
    accuracy_argv,
    changed_lines,
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
        report = self._selected(Tree(mirror, sha), changed, backends, rules, sha)
        total = max(pull.changed_files, len(files))
        return ChangeReport(sha, total, len(files), report.selection, report.by_backend)

    def select_push(
        self,
        repo: str,
        clone_url: str,
        private: bool,
        before: str,
        after: str,
        backends: Sequence[str],
        rules: Sequence[Rule] = (),
    ) -> ChangeReport:
        """The operators a push to the default branch changes (`before..after`), from the
        mirror: both commits one deep, their diff. GitError when either cannot be fetched."""
        token = self.github.git_token(repo) if private else None
        mirror = self.mirrors.fetch(clone_url, after, None, shallow=True, token=token)
        self.mirrors.fetch(clone_url, before, None, shallow=True, token=token)
        lines = changed_lines(diff_zero(mirror, before, after))
        changed = []
        for letter, path, previous in changed_between(mirror, before, after):
            if letter == "D":
                changed.append(Changed(path, removed=True))
            elif path not in lines and letter in "RC":
                changed.append(Changed(path, previous=previous, lines=()))  # moved, unchanged
            else:  # no hunk: a binary file, its lines unknown
                changed.append(Changed(path, previous=previous, lines=lines.get(path)))
        return self._selected(Tree(mirror, after), changed, backends, rules, after)

    def select_all(
        self, repo: str, clone_url: str, private: bool, sha: str, backends: Sequence[str]
    ) -> ChangeReport:
        """Every operator of the tree at `sha`, per backend: the selection of a change to
        every file (each operator's own files and tests among them)."""
        token = self.github.git_token(repo) if private else None
        mirror = self.mirrors.fetch(clone_url, sha, None, shallow=True, token=token)
        tree = Tree(mirror, sha)
        return self._selected(tree, [Changed(p) for p in tree.paths], backends, (), sha)

    def _selected(
        self,
        tree: Tree,
        changed: Sequence[Changed],
        backends: Sequence[str],
        rules: Sequence[Rule],
        sha: str,
    ) -> ChangeReport:
        """The selection of `changed` in `tree`, per backend's workflow (once per distinct set
        of accuracy steps), and their union."""
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
        if selections:
            union.unmatched = sorted(set.intersection(*(set(s.unmatched) for s in selections)))
        return ChangeReport(sha, len(changed), len(changed), union, by_backend)
