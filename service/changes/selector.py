"""The change selection in the service: the pull request's files from GitHub (every page, up
to GitHub's cap), its tree at the commit from a cached bare mirror, and the pure selection of
`workflows.changes` over both."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ondemand.git import Mirrors, Tree
from service.report.github import FILES_CAP, GitHubClient, PullFile, PullInfo
from workflows.changes import Changed, Rule, Selection, patch_lines, select_for_workflow
from workflows.spec import WorkflowSpec


@dataclass(frozen=True)
class ChangeReport:
    """What a pull request changes at `sha`: `selection` None when it has more files than
    GitHub lists (`total` past FILES_CAP), so no selection could see them all."""

    sha: str
    total: int
    listed: int
    selection: Selection | None

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
        self, repo: str, pull: PullInfo, sha: str, backend: str, rules: Sequence[Rule] = ()
    ) -> ChangeReport:
        """The operators `pull` changes at `sha` (its head, approved), as `backend`'s
        workflow names them. GitError when the commit cannot be fetched; GitHubError as for
        every call."""
        if pull.changed_files > FILES_CAP:
            return ChangeReport(sha, pull.changed_files, 0, None)
        files = self.github.pull_files(repo, pull.number)
        changed = [as_changed(f) for f in files]
        mirror = self.mirrors.fetch(pull.clone_url, sha, pull.number, shallow=True)
        tree = Tree(mirror, sha)
        workflow = self.workflows[backend]
        chosen = select_for_workflow(changed, tree.paths, tree.read, workflow, rules)
        return ChangeReport(sha, max(pull.changed_files, len(files)), len(files), chosen)
