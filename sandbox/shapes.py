"""GitHub's JSON shapes for the sandbox's objects: pure functions of state objects and the base
URL the client used (so PyGithub follows `url` fields back to the same server)."""

from __future__ import annotations

import base64
import hashlib
from datetime import datetime
from typing import Any
from urllib.parse import quote

from sandbox import git
from sandbox.git import CommitInfo
from sandbox.state import (
    REACTIONS,
    App,
    Comment,
    Installation,
    Pull,
    Reaction,
    Repo,
    SandboxState,
    Status,
    Team,
    User,
)

Json = dict[str, Any]
LEGACY_PERMISSION = {"admin": "admin", "maintain": "write", "write": "write", "triage": "read"}
RANK = {"none": 0, "read": 1, "triage": 2, "write": 3, "maintain": 4, "admin": 5}


def ts(value: datetime | None) -> str | None:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if value else None


def node_id(kind: str, ident: int | str) -> str:
    return base64.b64encode(f"0:{kind}{ident}".encode()).decode()


def user_json(base: str, user: User) -> Json:
    url = f"{base}/users/{user.login}"
    return {
        "login": user.login,
        "id": user.id,
        "node_id": node_id("User", user.id),
        "avatar_url": f"{base}/avatars/{user.login}",
        "gravatar_id": "",
        "url": url,
        "html_url": f"{base}/{user.login}",
        "followers_url": f"{url}/followers",
        "following_url": f"{url}/following{{/other_user}}",
        "gists_url": f"{url}/gists{{/gist_id}}",
        "starred_url": f"{url}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{url}/subscriptions",
        "organizations_url": f"{url}/orgs",
        "repos_url": f"{url}/repos",
        "events_url": f"{url}/events{{/privacy}}",
        "received_events_url": f"{url}/received_events",
        "type": user.type,
        "user_view_type": "public",
        "site_admin": False,
    }


def full_user_json(base: str, user: User) -> Json:
    """GET /user and /users/{login}: the summary plus profile fields."""
    data = user_json(base, user)
    data.update(
        {
            "name": user.login,
            "company": None,
            "blog": "",
            "location": None,
            "email": None,
            "hireable": None,
            "bio": None,
            "twitter_username": None,
            "public_repos": 0,
            "public_gists": 0,
            "followers": 0,
            "following": 0,
            "created_at": ts(user.created_at),
            "updated_at": ts(user.created_at),
        }
    )
    return data


def clone_url(base: str, repo: Repo) -> str:
    """Where git fetches `repo`: a private one over this server's smart HTTP, which asks for
    a token as GitHub does; a public one from its path on disk (no server in between)."""
    return f"{base}/{repo.full_name}.git" if repo.private else repo.git_path


def repo_json(base: str, state: SandboxState, repo: Repo, viewer: str | None = None) -> Json:
    api = f"{base}/repos/{repo.full_name}"
    data: Json = {
        "id": repo.id,
        "node_id": node_id("Repository", repo.id),
        "name": repo.name,
        "full_name": repo.full_name,
        "private": repo.private,
        "owner": user_json(base, state.users[repo.owner]),
        "html_url": f"{base}/{repo.full_name}",
        "description": None,
        "fork": False,
        "url": api,
        "pulls_url": f"{api}/pulls{{/number}}",
        "issues_url": f"{api}/issues{{/number}}",
        "issue_comment_url": f"{api}/issues/comments{{/number}}",
        "statuses_url": f"{api}/statuses/{{sha}}",
        "commits_url": f"{api}/commits{{/sha}}",
        "collaborators_url": f"{api}/collaborators{{/collaborator}}",
        "hooks_url": f"{api}/hooks",
        "git_url": repo.git_path,
        "ssh_url": repo.git_path,
        "clone_url": clone_url(base, repo),
        "svn_url": f"{base}/{repo.full_name}",
        "homepage": None,
        "size": 0,
        "stargazers_count": 0,
        "watchers_count": 0,
        "language": "Python",
        "has_issues": True,
        "has_projects": False,
        "has_wiki": False,
        "has_pages": False,
        "has_discussions": False,
        "forks_count": 0,
        "archived": False,
        "disabled": False,
        "open_issues_count": sum(
            1 for p in state.pulls.values() if p.repo == repo.full_name and p.state == "open"
        ),
        "license": None,
        "allow_forking": True,
        "is_template": False,
        "topics": [],
        "visibility": "private" if repo.private else "public",
        "forks": 0,
        "open_issues": 0,
        "watchers": 0,
        "default_branch": repo.default_branch,
        "created_at": ts(repo.created_at),
        "updated_at": ts(repo.created_at),
        "pushed_at": ts(repo.created_at),
    }
    data["open_issues"] = data["open_issues_count"]
    if viewer is not None:
        data["permissions"] = permissions_json(state.permission(repo, viewer))
    return data


def _branch_json(base: str, state: SandboxState, repo: Repo, ref: str, sha: str) -> Json:
    owner = state.users[repo.owner]
    return {
        "label": f"{repo.owner}:{ref}",
        "ref": ref,
        "sha": sha,
        "user": user_json(base, owner),
        "repo": repo_json(base, state, repo),
    }


def pull_json(base: str, state: SandboxState, repo: Repo, pull: Pull) -> Json:
    api = f"{base}/repos/{repo.full_name}"
    html = f"{base}/{repo.full_name}/pull/{pull.number}"
    comments = state.comments_on(pull)
    return {
        "url": f"{api}/pulls/{pull.number}",
        "id": pull.id,
        "node_id": node_id("PullRequest", pull.id),
        "html_url": html,
        "diff_url": f"{html}.diff",
        "patch_url": f"{html}.patch",
        "issue_url": f"{api}/issues/{pull.number}",
        "commits_url": f"{api}/pulls/{pull.number}/commits",
        "review_comments_url": f"{api}/pulls/{pull.number}/comments",
        "review_comment_url": f"{api}/pulls/comments{{/number}}",
        "comments_url": f"{api}/issues/{pull.number}/comments",
        "statuses_url": f"{api}/statuses/{pull.head_sha}",
        "number": pull.number,
        "state": pull.state,
        "locked": False,
        "title": pull.title,
        "user": user_json(base, state.users[pull.user]),
        "body": pull.body,
        "labels": [label_json(base, repo, name) for name in pull.labels],
        "milestone": None,
        "active_lock_reason": None,
        "created_at": ts(pull.created_at),
        "updated_at": ts(pull.updated_at),
        "closed_at": ts(pull.closed_at),
        "merged_at": ts(pull.closed_at) if pull.merged else None,
        "merge_commit_sha": pull.merge_commit_sha,
        "assignee": None,
        "assignees": [],
        "requested_reviewers": [],
        "requested_teams": [],
        "head": _branch_json(base, state, repo, pull.head_ref, pull.head_sha),
        "base": _branch_json(base, state, repo, pull.base_ref, pull.base_sha),
        "author_association": _association(state, repo, pull.user),
        "auto_merge": None,
        "draft": False,
        "merged": pull.merged,
        "mergeable": None if pull.state == "closed" else True,
        "rebaseable": None,
        "mergeable_state": "clean" if pull.state == "open" else "unknown",
        "merged_by": None,
        "comments": len(comments),
        "review_comments": 0,
        "maintainer_can_modify": False,
        "commits": pull.commits,
        **_diff_counts(repo, pull),
    }


def _diff_counts(repo: Repo, pull: Pull) -> Json:
    """additions, deletions and changed_files: all of them, past the files list's cap too."""
    try:
        files = git.pull_files(repo.git_path, pull.base_sha, pull.head_sha)
    except git.GitError:
        files = ()
    return {
        "additions": sum(f.additions for f in files),
        "deletions": sum(f.deletions for f in files),
        "changed_files": len(files),
    }


def pull_file_json(
    base: str, repo: Repo, pull: Pull, change: git.FileChange, patch: str | None = None
) -> Json:
    """One entry of `GET /repos/{o}/{r}/pulls/{n}/files`; `patch` where GitHub gives one."""
    path = quote(change.path)
    blob = f"{base}/{repo.full_name}/blob/{pull.head_sha}/{path}"
    found: Json = {
        "sha": change.sha,
        "filename": change.path,
        "status": change.status,
        "additions": change.additions,
        "deletions": change.deletions,
        "changes": change.additions + change.deletions,
        "blob_url": blob,
        "raw_url": f"{base}/{repo.full_name}/raw/{pull.head_sha}/{path}",
        "contents_url": f"{base}/repos/{repo.full_name}/contents/{path}?ref={pull.head_sha}",
    }
    if patch is not None:
        found["patch"] = patch
    if change.previous is not None:
        found["previous_filename"] = change.previous
    return found


def label_json(base: str, repo: Repo, name: str) -> Json:
    """A label as issues carry it (GitHub makes one when an issue first names it)."""
    ident = int(hashlib.sha256(f"{repo.full_name}:{name}".encode()).hexdigest()[:8], 16)
    return {
        "id": ident,
        "node_id": node_id("Label", ident),
        "url": f"{base}/repos/{repo.full_name}/labels/{quote(name, safe='')}",
        "name": name,
        "color": "ededed",
        "default": False,
        "description": None,
    }


def issue_json(base: str, state: SandboxState, repo: Repo, pull: Pull) -> Json:
    """An issue; a pull request seen as one (GitHub's shared number space) has `pull_request`."""
    api = f"{base}/repos/{repo.full_name}"
    html = f"{base}/{repo.full_name}/pull/{pull.number}"
    issue_api = f"{api}/issues/{pull.number}"
    if not pull.is_pull:
        html = f"{base}/{repo.full_name}/issues/{pull.number}"
    data: Json = {
        "url": issue_api,
        "repository_url": api,
        "labels_url": f"{issue_api}/labels{{/name}}",
        "comments_url": f"{issue_api}/comments",
        "events_url": f"{issue_api}/events",
        "html_url": html,
        "id": pull.issue_id,
        "node_id": node_id("Issue", pull.issue_id),
        "number": pull.number,
        "title": pull.title,
        "user": user_json(base, state.users[pull.user]),
        "labels": [label_json(base, repo, name) for name in pull.labels],
        "state": pull.state,
        "locked": False,
        "assignee": None,
        "assignees": [],
        "milestone": None,
        "comments": len(state.comments_on(pull)),
        "created_at": ts(pull.created_at),
        "updated_at": ts(pull.updated_at),
        "closed_at": ts(pull.closed_at),
        "author_association": _association(state, repo, pull.user),
        "active_lock_reason": None,
        "draft": False,
        "body": pull.body,
        "reactions": _reaction_summary(issue_api, []),
        "timeline_url": f"{issue_api}/timeline",
        "state_reason": pull.state_reason,
    }
    if pull.is_pull:
        data["pull_request"] = {
            "url": f"{api}/pulls/{pull.number}",
            "html_url": html,
            "diff_url": f"{html}.diff",
            "patch_url": f"{html}.patch",
            "merged_at": ts(pull.closed_at) if pull.merged else None,
        }
    return data


def _association(state: SandboxState, repo: Repo, login: str) -> str:
    if login == repo.owner:
        return "OWNER"
    if login in repo.collaborators:
        return "COLLABORATOR"
    return "NONE"


def _reaction_summary(url: str, reactions: list[Reaction]) -> Json:
    data: Json = {"url": f"{url}/reactions", "total_count": len(reactions)}
    for content in REACTIONS:
        data[content] = sum(1 for r in reactions if r.content == content)
    return data


def comment_json(base: str, state: SandboxState, repo: Repo, comment: Comment) -> Json:
    api = f"{base}/repos/{repo.full_name}"
    url = f"{api}/issues/comments/{comment.id}"
    issue = state.pulls.get((repo.full_name, comment.issue_number))
    kind = "pull" if issue is None or issue.is_pull else "issues"
    return {
        "url": url,
        "html_url": f"{base}/{repo.full_name}/{kind}/{comment.issue_number}"
        f"#issuecomment-{comment.id}",
        "issue_url": f"{api}/issues/{comment.issue_number}",
        "id": comment.id,
        "node_id": node_id("IssueComment", comment.id),
        "user": user_json(base, state.users[comment.user]),
        "created_at": ts(comment.created_at),
        "updated_at": ts(comment.updated_at),
        "author_association": _association(state, repo, comment.user),
        "body": comment.body,
        "reactions": _reaction_summary(url, state.reactions_on(comment.id)),
        "performed_via_github_app": None,
    }


def reaction_json(base: str, state: SandboxState, reaction: Reaction) -> Json:
    return {
        "id": reaction.id,
        "node_id": node_id("Reaction", reaction.id),
        "user": user_json(base, state.users[reaction.user]),
        "content": reaction.content,
        "created_at": ts(reaction.created_at),
    }


def status_json(base: str, state: SandboxState, repo: Repo, status: Status) -> Json:
    creator = state.users[status.creator]
    return {
        "url": f"{base}/repos/{repo.full_name}/statuses/{status.sha}",
        "avatar_url": f"{base}/avatars/{creator.login}",
        "id": status.id,
        "node_id": node_id("StatusContext", status.id),
        "state": status.state,
        "description": status.description,
        "target_url": status.target_url,
        "context": status.context,
        "created_at": ts(status.created_at),
        "updated_at": ts(status.created_at),
        "creator": user_json(base, creator),
    }


def combined_state(latest: list[Status]) -> str:
    """GitHub's rule: failure if any error/failure, pending if any pending or none, else success."""
    states = {s.state for s in latest}
    if states & {"error", "failure"}:
        return "failure"
    if not latest or "pending" in states:
        return "pending"
    return "success"


def combined_status_json(
    base: str, state: SandboxState, repo: Repo, sha: str, statuses: list[Status]
) -> Json:
    latest: dict[str, Status] = {}
    for s in statuses:  # newest first: keep the first seen per context
        latest.setdefault(s.context, s)
    chosen = list(latest.values())
    api = f"{base}/repos/{repo.full_name}"
    return {
        "state": combined_state(chosen),
        "statuses": [status_json(base, state, repo, s) for s in chosen],
        "sha": sha,
        "total_count": len(chosen),
        "repository": repo_json(base, state, repo),
        "commit_url": f"{api}/commits/{sha}",
        "url": f"{api}/commits/{sha}/status",
    }


def commit_json(base: str, state: SandboxState, repo: Repo, info: CommitInfo) -> Json:
    api = f"{base}/repos/{repo.full_name}"

    def person(name: str, email: str, date: str) -> Json:
        return {"name": name, "email": email, "date": date}

    return {
        "sha": info.sha,
        "node_id": node_id("Commit", info.sha),
        "url": f"{api}/commits/{info.sha}",
        "html_url": f"{base}/{repo.full_name}/commit/{info.sha}",
        "comments_url": f"{api}/commits/{info.sha}/comments",
        "commit": {
            "url": f"{api}/git/commits/{info.sha}",
            "author": person(info.author_name, info.author_email, info.author_date),
            "committer": person(info.committer_name, info.committer_email, info.committer_date),
            "message": info.message,
            "tree": {"url": f"{api}/git/trees/{info.tree}", "sha": info.tree},
            "comment_count": 0,
            "verification": {"verified": False, "reason": "unsigned", "signature": None},
        },
        "author": None,
        "committer": None,
        "parents": [
            {
                "url": f"{api}/commits/{p}",
                "html_url": f"{base}/{repo.full_name}/commit/{p}",
                "sha": p,
            }
            for p in info.parents
        ],
        "stats": {"total": 0, "additions": 0, "deletions": 0},
        "files": [],
    }


def permissions_json(role: str) -> Json:
    """GitHub's `permissions` object for a collaborator role: each level it reaches."""
    rank = RANK[role]
    return {
        "admin": rank >= RANK["admin"],
        "maintain": rank >= RANK["maintain"],
        "push": rank >= RANK["write"],
        "triage": rank >= RANK["triage"],
        "pull": rank >= RANK["read"],
    }


def permission_json(base: str, state: SandboxState, repo: Repo, user: User) -> Json:
    role = state.permission(repo, user.login)
    data = user_json(base, user)
    data["permissions"] = permissions_json(role)
    data["role_name"] = role
    return {"permission": LEGACY_PERMISSION.get(role, role), "role_name": role, "user": data}


def app_json(base: str, state: SandboxState, app: App) -> Json:
    return {
        "id": app.id,
        "slug": app.slug,
        "node_id": node_id("Integration", app.id),
        "client_id": f"Iv1.{app.id:016x}",
        "owner": user_json(base, state.users[app.owner]),
        "name": app.name,
        "description": "",
        "external_url": base,
        "html_url": f"{base}/apps/{app.slug}",
        "created_at": ts(app.created_at),
        "updated_at": ts(app.created_at),
        "permissions": dict(app.permissions),
        "events": ["issue_comment", "pull_request", "check_run"],
        "installations_count": sum(1 for i in state.installations.values() if i.app_id == app.id),
    }


def installation_json(base: str, state: SandboxState, inst: Installation) -> Json:
    app = state.apps[inst.app_id]
    account = state.users.get(inst.account or app.owner)
    return {
        "id": inst.id,
        "account": user_json(base, account) if account else None,
        "access_tokens_url": f"{base}/app/installations/{inst.id}/access_tokens",
        "repositories_url": f"{base}/installation/repositories",
        "html_url": f"{base}/settings/installations/{inst.id}",
        "app_id": app.id,
        "app_slug": app.slug,
        "target_id": account.id if account else 0,
        "target_type": account.type if account else "Organization",
        "permissions": dict(inst.permissions),
        "events": app_json(base, state, app)["events"],
        "created_at": ts(inst.created_at),
        "updated_at": ts(inst.created_at),
        "single_file_name": None,
        "has_multiple_single_files": False,
        "single_file_paths": [],
        "repository_selection": "all",
        "suspended_at": None,
        "suspended_by": None,
    }


def team_json(base: str, state: SandboxState, team: Team) -> Json:
    url = f"{base}/orgs/{team.org}/teams/{team.slug}"
    return {
        "id": team.id,
        "node_id": node_id("Team", team.id),
        "url": url,
        "html_url": f"{base}/orgs/{team.org}/teams/{team.slug}",
        "name": team.name,
        "slug": team.slug,
        "description": None,
        "privacy": "closed",
        "notification_setting": "notifications_enabled",
        "permission": "pull",
        "members_url": f"{url}/members{{/member}}",
        "repositories_url": f"{url}/repos",
        "parent": None,
        "members_count": len(team.members),
        "repos_count": 0,
        "organization": user_json(base, state.users[team.org]),
    }
