"""Webhook deliveries to a real receiving app: GitHub's payload shapes and headers, a valid
HMAC-SHA256 signature of the raw body, the response status recorded, and redelivery."""

from __future__ import annotations

import uuid

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.sandbox.conftest import REPO, SECRET, Receiver, World, git


def test_comment_created_is_delivered_signed_in_githubs_shape(
    world: World, receiver: Receiver
) -> None:
    admin = world.sandbox.admin
    admin.set_webhook(receiver.url, SECRET)
    posted = admin.comment(REPO, 1, "alice", "/test add:cpu")
    (got,) = receiver.wait(1)
    assert got.signature_ok
    assert got.event == "issue_comment"
    assert uuid.UUID(got.delivery)
    assert got.headers["user-agent"].startswith("GitHub-Hookshot/")
    assert got.headers["content-type"] == "application/json"
    p = got.payload
    assert p["action"] == "created"
    assert p["comment"]["id"] == posted["id"]
    assert p["comment"]["body"] == "/test add:cpu"
    assert p["comment"]["user"]["login"] == "alice"
    assert p["issue"]["number"] == 1
    assert "pull_request" in p["issue"]
    assert p["repository"]["full_name"] == REPO
    assert p["repository"]["clone_url"] == str(world.repo.path)
    assert p["sender"] == {**p["sender"], "login": "alice", "type": "User"}
    assert "installation" not in p  # no App installed yet

    (delivery,) = admin.wait_for_deliveries(1)
    assert delivery["id"] == got.delivery
    assert delivery["status_code"] == 200


def test_edit_delete_and_bot_comments_are_delivered(world: World, receiver: Receiver) -> None:
    admin = world.sandbox.admin
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    installation = admin.register_app(77, public)["installation_id"]
    admin.set_webhook(receiver.url, SECRET)
    posted = admin.comment(REPO, 1, "alice", "/test add")
    admin.edit_comment(REPO, posted["id"], "/test mul")
    admin.delete_comment(REPO, posted["id"])
    world.sandbox.github(world.bot_token).get_repo(REPO).get_issue(1).create_comment("hi")
    got = receiver.wait(4)
    assert [(r.event, r.payload["action"]) for r in got] == [
        ("issue_comment", "created"),
        ("issue_comment", "edited"),
        ("issue_comment", "deleted"),
        ("issue_comment", "created"),
    ]
    assert all(r.signature_ok for r in got)
    assert got[1].payload["changes"] == {"body": {"from": "/test add"}}
    assert got[1].payload["comment"]["body"] == "/test mul"
    assert got[3].payload["sender"]["type"] == "Bot"
    assert got[3].payload["sender"]["login"] == "ondemand-bot"
    assert {r.payload["installation"]["id"] for r in got} == {installation}


def test_pull_request_synchronize_and_closed(world: World, receiver: Receiver) -> None:
    admin = world.sandbox.admin
    admin.set_webhook(receiver.url, SECRET)
    admin.push(REPO, 1, world.repo.feature2_sha)
    admin.close_pull(REPO, 1)
    sync, closed = receiver.wait(2)
    assert sync.event == closed.event == "pull_request"
    assert sync.payload["action"] == "synchronize"
    assert sync.payload["before"] == world.repo.feature_sha
    assert sync.payload["after"] == world.repo.feature2_sha
    assert sync.payload["pull_request"]["head"]["sha"] == world.repo.feature2_sha
    assert sync.payload["number"] == 1
    assert closed.payload["action"] == "closed"
    assert closed.payload["pull_request"]["state"] == "closed"
    assert git(world.repo.path, "rev-parse", "refs/pull/1/head") == world.repo.feature2_sha


def test_response_status_is_recorded_and_redelivery_keeps_the_id(
    world: World, receiver: Receiver
) -> None:
    admin = world.sandbox.admin
    admin.set_webhook(receiver.url, SECRET)
    receiver.status = 503
    admin.comment(REPO, 1, "alice", "/test add")
    (first,) = admin.wait_for_deliveries(1)
    assert first["status_code"] == 503

    receiver.status = 200
    admin.redeliver(first["id"])
    got = receiver.wait(2)
    assert [r.delivery for r in got] == [first["id"], first["id"]]
    assert got[0].payload == got[1].payload
    delivery = admin.wait("deliveries", count=1)[0]
    assert [a["status_code"] for a in delivery["attempts"]] == [503, 200]


def test_a_wrong_secret_is_rejected_by_the_receiver_and_recorded(
    world: World, receiver: Receiver
) -> None:
    admin = world.sandbox.admin
    admin.set_webhook(receiver.url, "not-the-secret")
    admin.comment(REPO, 1, "alice", "/test add")
    (delivery,) = admin.wait_for_deliveries(1)
    assert delivery["status_code"] == 401
    assert not receiver.received[0].signature_ok


def test_no_webhook_no_delivery_and_unreachable_is_recorded(world: World) -> None:
    admin = world.sandbox.admin
    admin.comment(REPO, 1, "alice", "/test add")
    assert admin.deliveries() == []
    admin.set_webhook("http://127.0.0.1:9/nothing-listens", SECRET)
    admin.comment(REPO, 1, "alice", "/test add")
    (delivery,) = admin.wait_for_deliveries(1)
    assert delivery["status_code"] is None
    assert delivery["attempts"][0]["error"]


def test_comments_on_plain_issues_carry_no_pull_request(world: World, receiver: Receiver) -> None:
    admin = world.sandbox.admin
    admin.set_webhook(receiver.url, SECRET)
    issue = admin.open_issue(REPO, user="alice", title="bug")
    assert issue["number"] == 2 and "pull_request" not in issue
    admin.comment(REPO, 2, "alice", "/test add")
    (got,) = receiver.wait(1)
    assert got.payload["issue"]["number"] == 2
    assert "pull_request" not in got.payload["issue"]
    repo = world.sandbox.github(world.bot_token).get_repo(REPO)
    assert repo.get_issue(2).pull_request is None
    assert [p.number for p in repo.get_pulls()] == [1]
    assert admin.open_pull(REPO, head="feature", user="alice")["number"] == 3


def test_form_encoded_deliveries_are_signed_over_the_form_body(
    world: World, receiver: Receiver
) -> None:
    admin = world.sandbox.admin
    admin.set_webhook(receiver.url, SECRET, content_type="form")
    admin.comment(REPO, 1, "alice", "/test add:cpu & more")
    (got,) = receiver.wait(1)
    assert got.headers["content-type"] == "application/x-www-form-urlencoded"
    assert got.signature_ok  # the HMAC covers the raw form body, not the JSON inside it
    assert got.payload["comment"]["body"] == "/test add:cpu & more"


def test_held_deliveries_go_out_late_reversed_and_twice(world: World, receiver: Receiver) -> None:
    admin = world.sandbox.admin
    admin.set_webhook(receiver.url, SECRET)
    admin.hold_deliveries()
    first = admin.comment(REPO, 1, "alice", "first")
    second = admin.comment(REPO, 1, "alice", "second")
    assert receiver.wait(1, timeout=0.5) == []  # nothing goes out while held
    sent = admin.release_deliveries(reversed_order=True, duplicate=True)
    got = receiver.wait(4)
    assert [r.payload["comment"]["id"] for r in got] == [
        second["id"], second["id"], first["id"], first["id"]
    ]
    assert [r.delivery for r in got] == sent and sent[0] == sent[1] != sent[2]
    admin.comment(REPO, 1, "alice", "third")  # released: deliveries flow again
    assert receiver.wait(5)[-1].payload["comment"]["body"] == "third"
