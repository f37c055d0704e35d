"""The GitHub App flow through PyGithub: a JWT signed with the App's RSA key finds the
repository's installation and mints an installation token that then authenticates as the bot."""

from __future__ import annotations

import pytest
from github import Auth, GithubException, GithubIntegration

from tests.sandbox.conftest import REPO, World
from tests.support.keys import rsa_keypair

APP_ID = 4242


def test_installation_token_flow(world: World) -> None:
    private, public = rsa_keypair()
    registered = world.sandbox.admin.register_app(APP_ID, public, slug="ondemand")
    assert registered["bot_login"] == "ondemand[bot]"

    app_auth = Auth.AppAuth(APP_ID, private)
    integration = GithubIntegration(auth=app_auth, base_url=world.sandbox.url)
    assert integration.get_app().slug == "ondemand"
    installation = integration.get_repo_installation("acme", "kernels")
    assert installation.id == registered["installation_id"]
    assert integration.get_org_installation("acme").id == installation.id
    token = integration.get_access_token(installation.id)
    assert token.token.startswith("ghs_")
    assert token.expires_at is not None

    gh = world.sandbox.github(auth=app_auth.get_installation_auth(installation.id))
    comment = gh.get_repo(REPO).get_issue(1).create_comment("queued")
    assert comment.user.login == "ondemand[bot]"
    assert comment.user.type == "Bot"
    with pytest.raises(GithubException) as err:
        gh.get_user().login  # noqa: B018 — installation tokens may not read /user, as on GitHub
    assert err.value.status == 403

    plain = world.sandbox.github(token.token)
    assert plain.get_repo(REPO).get_issue(1).get_comments().totalCount == 1


def test_a_jwt_signed_by_another_key_is_refused(world: World) -> None:
    _, public = rsa_keypair()
    other_private, _ = rsa_keypair()
    world.sandbox.admin.register_app(APP_ID, public)
    integration = GithubIntegration(
        auth=Auth.AppAuth(APP_ID, other_private), base_url=world.sandbox.url
    )
    with pytest.raises(GithubException) as err:
        integration.get_repo_installation("acme", "kernels")
    assert err.value.status == 401
    unknown = GithubIntegration(
        auth=Auth.AppAuth(APP_ID + 1, other_private), base_url=world.sandbox.url
    )
    with pytest.raises(GithubException) as err:
        unknown.get_access_token(1)
    assert err.value.status == 401


def test_an_installation_on_another_account_does_not_cover_the_repo(world: World) -> None:
    private, public = rsa_keypair()
    world.sandbox.admin.register_app(APP_ID, public, account="someone-else")
    integration = GithubIntegration(auth=Auth.AppAuth(APP_ID, private), base_url=world.sandbox.url)
    with pytest.raises(GithubException) as err:
        integration.get_repo_installation("acme", "kernels")
    assert err.value.status == 404
