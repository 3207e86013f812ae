"""Injected faults: deliver-then-error/hang/reset, rejections, latency, and rule matching."""

from __future__ import annotations

import time

import httpx
import pytest

from sandbox.client import SandboxAdmin, SandboxError
from tests.integration.sandbox.helpers import (
    APP_ID,
    MARCO_COMMENT,
    OLD_COMMENT,
    OLGA_COMMENT,
    error_of,
    private_reply,
)
from tests.support.sandbox_process import SandboxProcess, WebhookReceiver


def test_deliver_then_code_1_leaves_exactly_one_message(
    graph: httpx.Client, admin: SandboxAdmin, token: str, receiver: WebhookReceiver
) -> None:
    admin.add_fault("messages", "deliver_then_error", code=1, times=1)
    answer = private_reply(graph, token, OLGA_COMMENT, {"text": "your recipe"})
    assert answer.status_code == 500
    error = error_of(answer)
    assert (error["code"], error["type"], error["message"]) == (
        1,
        "OAuthException",
        "An unknown error occurred",
    )
    inbox = admin.inbox("olga.petrova")["messages"]
    assert [(m["text"], m["comment_id"]) for m in inbox] == [("your recipe", OLGA_COMMENT)]
    stats = admin.comment_stats(OLGA_COMMENT)
    assert (stats["private_replies_delivered"], stats["send_requests"]) == (1, 1)
    record = admin.requests(comment_id=OLGA_COMMENT)[0]
    assert record["delivered"] is True
    assert record["status"] == 500
    assert record["fault"]["action"] == "deliver_then_error"

    # A blind retry is refused: Meta already spent the comment's private reply.
    retry = private_reply(graph, token, OLGA_COMMENT)
    assert error_of(retry)["error_subcode"] == 2534025
    # The echo of the delivered message still reaches the callback.
    posts = receiver.wait_for(1)
    echoes = [
        item["message"]
        for post in posts
        for entry in post.json()["entry"]
        for item in entry.get("messaging", [])
    ]
    assert echoes
    assert echoes[0]["is_echo"] is True
    assert echoes[0]["text"] == "your recipe"


def test_deliver_then_code_2_and_plain_500(
    graph: httpx.Client, admin: SandboxAdmin, token: str
) -> None:
    admin.add_fault("messages", "deliver_then_error", code=2, comment_id=OLGA_COMMENT)
    admin.add_fault(
        "messages", "deliver_then_error", http_status=500, body="html", comment_id=MARCO_COMMENT
    )
    code_2 = private_reply(graph, token, OLGA_COMMENT)
    assert code_2.status_code == 503
    assert (error_of(code_2)["code"], error_of(code_2)["is_transient"]) == (2, True)
    html = private_reply(graph, token, MARCO_COMMENT)
    assert html.status_code == 500
    assert html.headers["content-type"].startswith("text/html")
    assert not html.text.lstrip().startswith("{")
    assert admin.comment_stats(OLGA_COMMENT)["private_replies_delivered"] == 1
    assert admin.comment_stats(MARCO_COMMENT)["private_replies_delivered"] == 1


def test_deliver_then_hang_outlives_the_client_timeout(
    sandbox_process: SandboxProcess, admin: SandboxAdmin, token: str
) -> None:
    admin.add_fault("messages", "deliver_then_hang", seconds=5, times=1)
    with httpx.Client(base_url=sandbox_process.graph_base, timeout=0.5) as impatient:
        started = time.monotonic()
        with pytest.raises(httpx.ReadTimeout):
            private_reply(impatient, token, OLGA_COMMENT)
        assert time.monotonic() - started < 3
    assert admin.comment_stats(OLGA_COMMENT)["private_replies_delivered"] == 1
    assert len(admin.inbox("olga.petrova")["messages"]) == 1


def test_deliver_then_reset_drops_the_connection_after_delivery(
    sandbox_process: SandboxProcess, admin: SandboxAdmin, token: str
) -> None:
    admin.add_fault("messages", "deliver_then_reset", times=1)
    with httpx.Client(base_url=sandbox_process.graph_base, timeout=5) as client:
        with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
            private_reply(client, token, OLGA_COMMENT, {"text": "did it arrive?"})
        # The server keeps serving; the next call on a fresh connection is normal.
        assert client.get("/me", params={"access_token": token}).status_code == 200
    assert [m["text"] for m in admin.inbox("olga.petrova")["messages"]] == ["did it arrive?"]
    assert admin.requests(comment_id=OLGA_COMMENT)[0]["status"] == "reset"


def test_reject_with_any_code_does_not_deliver(
    graph: httpx.Client, admin: SandboxAdmin, token: str
) -> None:
    admin.add_fault(
        "messages", "reject", code=368, http_status=400, message="(#368) Blocked for spam"
    )
    answer = private_reply(graph, token, OLGA_COMMENT)
    assert answer.status_code == 400
    assert (error_of(answer)["code"], error_of(answer)["message"]) == (
        368,
        "(#368) Blocked for spam",
    )
    assert admin.comment_stats(OLGA_COMMENT)["private_replies_delivered"] == 0
    assert admin.inbox("olga.petrova")["messages"] == []


def test_times_and_rule_removal(graph: httpx.Client, admin: SandboxAdmin, token: str) -> None:
    rule = admin.add_fault("replies", "reject", code=613, subcode=2534040, times=2)
    assert rule["id"]
    assert rule["remaining"] == 2
    codes = [
        graph.post(
            f"/{OLGA_COMMENT}/replies", params={"access_token": token, "message": "hi"}
        ).status_code
        for _ in range(3)
    ]
    assert codes == [400, 400, 200]
    assert admin.faults() == []


def test_a_deliver_then_rule_is_used_up_only_by_a_call_it_applied_to(
    graph: httpx.Client, admin: SandboxAdmin, token: str
) -> None:
    admin.add_fault("messages", "deliver_then_error", code=1, times=1)
    # The sandbox's own rule refuses this one (older than 7 days): the real error, no fault.
    too_old = private_reply(graph, token, OLD_COMMENT)
    assert (too_old.status_code, error_of(too_old)["error_subcode"]) == (403, 2534022)
    (waiting,) = admin.faults()
    assert (waiting["remaining"], waiting["hits"]) == (1, 0)
    assert admin.requests(comment_id=OLD_COMMENT)[0]["fault"] is None

    # The next send that is delivered is the one that gets the code 1.
    delivered = private_reply(graph, token, OLGA_COMMENT)
    assert (delivered.status_code, error_of(delivered)["code"]) == (500, 1)
    assert admin.comment_stats(OLGA_COMMENT)["private_replies_delivered"] == 1
    assert admin.requests(comment_id=OLGA_COMMENT)[0]["fault"]["id"] == waiting["id"]
    assert admin.faults() == []
    assert private_reply(graph, token, MARCO_COMMENT).status_code == 200


def test_a_reject_rule_is_used_up_even_where_the_call_would_have_been_refused(
    graph: httpx.Client, admin: SandboxAdmin, token: str
) -> None:
    admin.add_fault("messages", "reject", code=2, http_status=503, times=1)
    # The fault answers before the sandbox's rules are looked at, so it applied.
    assert error_of(private_reply(graph, token, OLD_COMMENT))["code"] == 2
    assert admin.faults() == []
    assert error_of(private_reply(graph, token, OLD_COMMENT))["error_subcode"] == 2534022


def test_matching_by_recipient_and_account(
    graph: httpx.Client, admin: SandboxAdmin, token: str
) -> None:
    admin.add_fault("messages", "reject", code=551, subcode=1545041, recipient="marco_rossi")
    admin.add_fault("messages", "reject", code=10, account="north.trails")
    assert private_reply(graph, token, OLGA_COMMENT).status_code == 200
    marco = private_reply(graph, token, MARCO_COMMENT)
    assert (error_of(marco)["code"], error_of(marco)["error_subcode"]) == (551, 1545041)
    assert len(admin.faults()) == 2
    admin.clear_faults()
    assert private_reply(graph, token, MARCO_COMMENT).status_code == 200


def test_probability_and_latency(graph: httpx.Client, admin: SandboxAdmin, token: str) -> None:
    never = admin.add_fault("me", "reject", code=1, probability=0.0)
    assert all(
        graph.get("/me", params={"access_token": token}).status_code == 200 for _ in range(5)
    )
    admin.remove_fault(never["id"])
    admin.add_fault("me", "reject", code=2, probability=1.0, times=1)
    assert graph.get("/me", params={"access_token": token}).status_code == 503
    admin.add_fault("me", "latency", seconds=0.4, times=1)
    started = time.monotonic()
    assert graph.get("/me", params={"access_token": token}).status_code == 200
    assert time.monotonic() - started >= 0.4


def test_oauth_token_faults_keep_the_legacy_shape(
    sandbox_process: SandboxProcess, admin: SandboxAdmin
) -> None:
    admin.add_fault("oauth_token", "reject", http_status=400, code=100, message="Invalid code")
    answer = httpx.post(
        f"{sandbox_process.base_url}/oauth/access_token",
        data={
            "client_id": APP_ID,
            "client_secret": "x",
            "grant_type": "authorization_code",
            "redirect_uri": "https://a.example/cb",
            "code": "AQBnope",
        },
    )
    assert answer.status_code == 400
    assert answer.json() == {
        "error_type": "OAuthException",
        "code": 400,
        "error_message": "Invalid code",
    }


def test_bad_fault_specs_are_refused(admin: SandboxAdmin) -> None:
    for spec in (
        {"endpoint": "messages", "action": "drop"},
        {"endpoint": "webhook", "action": "reject"},
        {"endpoint": "nowhere", "action": "reject"},
        {"endpoint": "messages", "action": "reject", "recipient": "nobody.here"},
    ):
        with pytest.raises(SandboxError) as refused:
            admin.add_fault(**spec)
        assert refused.value.status in (400, 404)
    assert admin.faults() == []
