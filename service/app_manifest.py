"""`ondemand app-manifest`: the GitHub App this service needs, as the manifest GitHub's
"register an App from a manifest" flow takes (JSON), or as the docs' table of permissions and
events (`--markdown`). Both come from `service/github/permissions.py`."""

from __future__ import annotations

import argparse
import json
import sys

from service.github.permissions import manifest, markdown
from service.settings import Settings, read_settings


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="ondemand app-manifest",
        description="Print the GitHub App manifest (permissions, events, webhook URL) as JSON.",
    )
    parser.add_argument("--name", default="ondemand", help="the App's name (unique on GitHub)")
    parser.add_argument(
        "--public-url",
        help="where GitHub reaches the service (default: ONDEMAND_PUBLIC_URL)",
    )
    parser.add_argument(
        "--teams",
        action="store_true",
        help="ask for Members: read, for team allow-lists (implied by ONDEMAND_ALLOWED_TEAMS)",
    )
    parser.add_argument(
        "--markdown", action="store_true", help="print the permissions and events as a table"
    )
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown(), end="")
        return 0
    # Only what the manifest is made of counts: the App's key does not exist yet.
    settings, problems = read_settings()
    used = [p for p in problems if {"public_url", "allowed_teams"} & set(p.fields)]
    for problem in used:
        print(f"ondemand app-manifest: {problem.line}", file=sys.stderr)
    if used or settings is None:
        return 2
    public_url = args.public_url or settings.public_url
    if (
        args.public_url is None
        and settings.public_url == Settings.model_fields["public_url"].default
    ):
        print(
            f"ondemand app-manifest: ONDEMAND_PUBLIC_URL is not set: the webhook URL is "
            f"{public_url}/webhook, which GitHub cannot reach (--public-url URL)",
            file=sys.stderr,
        )
    teams = args.teams or bool(settings.allowed_teams)
    print(json.dumps(manifest(args.name, public_url, teams=teams), indent=2))
    return 0
