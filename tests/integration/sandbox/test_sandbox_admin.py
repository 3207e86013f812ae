"""The admin API and the process itself: reset, clock, publishing, fans, settings, bad input,
and the command line's refusal of bad configuration."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import httpx
import pytest

from sandbox.client import SandboxAdmin, SandboxError
from tests.integration.sandbox.helpers import (
    LEMON_REEL,
    NORTH,
    OLGA_COMMENT,
    SUNNY,
    error_of,
    private_reply,
)
from tests.support.processes import ROOT


def test_reset_returns_to_the_fixture(graph: httpx.Client, admin: SandboxAdmin, token: str) -> None:
    made = admin.fan_comment("jane.doe", LEMON_REEL, "RECIPE")["id"]
    assert private_reply(graph, token, OLGA_COMMENT).status_code == 200
    admin.advance_clock(3600)
    admin.update_settings(private_replies_per_hour=1)
    admin.add_fault("messages", "reject", code=1)

    admin.reset()
    assert admin.faults() == []
    assert admin.clock()["offset_seconds"] == 0
    assert admin.settings()["private_replies_per_hour"] == 750
    assert admin.inbox("olga.petrova")["messages"] == []
    assert admin.requests() == []
    assert made not in admin.world()["media"][0]["comment_ids"]
    # Tokens are gone too: a reset is a fresh Meta.
    assert error_of(graph.get("/me", params={"access_token": token}))["code"] == 190
    assert admin.webhook()["registered"] is True  # kept unless asked otherwise


def test_clock_moves_forward_only(admin: SandboxAdmin) -> None:
    before = admin.clock()
    after = admin.advance_clock(86400)
    assert after["offset_seconds"] == 86400
    assert after["now"] - before["now"] >= 86400
    with pytest.raises(SandboxError) as refused:
        admin.advance_clock(-1)
    assert refused.value.status == 400


def test_publishing_a_post_for_next_post_campaigns(
    graph: httpx.Client, admin: SandboxAdmin, token: str
) -> None:
    post = admin.publish_media(
        "sunny.bakes", "Focaccia! Comment BREAD", media_type="VIDEO", media_product_type="REELS"
    )
    listed = graph.get(
        f"/{SUNNY}/media", params={"access_token": token, "fields": "id,caption"}
    ).json()
    assert listed["data"][0] == {"id": post["id"], "caption": "Focaccia! Comment BREAD"}
    comment = admin.fan_comment("zoe.lefevre", post["id"], "BREAD stp")
    assert private_reply(graph, token, comment["id"]).status_code == 200


def test_new_fans_get_an_igsid_per_account(admin: SandboxAdmin) -> None:
    fan = admin.add_fan("new.fan_01", "New Fan")
    assert set(fan["igsids"]) == {SUNNY, NORTH}
    assert all(len(i) == 16 and i.isdigit() for i in fan["igsids"].values())
    assert admin.inbox(fan["igsids"][SUNNY])["fan"] == "new.fan_01"
    with pytest.raises(SandboxError):
        admin.add_fan("new.fan_01")


def test_world_lists_fixture_ids(admin: SandboxAdmin) -> None:
    world = admin.world()
    assert [a["username"] for a in world["accounts"]] == ["sunny.bakes", "north.trails"]
    assert len(world["fans"]) == 8
    names = {f["name"] for f in world["fans"]}
    assert {"Ольга Петрова", "山田 花子", "Zoë Lefèvre"} <= names


def test_admin_input_errors(admin: SandboxAdmin) -> None:
    cases: list[Callable[[], object]] = [
        lambda: admin.update_settings(private_replies_per_hour=0),
        lambda: admin.update_settings(no_such_setting=True),
        lambda: admin.fan_comment("nobody.here", LEMON_REEL, "hi"),
        lambda: admin.fan_comment("jane.doe", "12345", "hi"),
        lambda: admin.fan_comment("jane.doe", LEMON_REEL, "   "),
        lambda: admin.fan_tap("jane.doe", "sunny.bakes"),
        lambda: admin.mint_token("ghost.account"),
    ]
    for case in cases:
        with pytest.raises(SandboxError) as refused:
            case()
        assert refused.value.status in (400, 404)
        assert "error" in refused.value.body


def test_bad_graph_input_gets_meta_errors_not_tracebacks(graph: httpx.Client, token: str) -> None:
    garbage = graph.post(
        "/me/messages",
        params={"access_token": token},
        content=b"{not json",
        headers={"content-type": "application/json"},
    )
    assert error_of(garbage)["code"] == 100
    for answer in (
        graph.put("/me", params={"access_token": token}),
        graph.get(f"/{LEMON_REEL}/comments", params={"access_token": token, "limit": "many"}),
        graph.get(f"/{LEMON_REEL}/comments", params={"access_token": token, "after": "!!"}),
        graph.get("/me", params={"access_token": token, "fields": "id}"}),
        graph.post("/me/messages", params={"access_token": token}, json=[1, 2]),
        graph.post("/me/messages", params={"access_token": token}, json={"recipient": "x"}),
    ):
        assert answer.status_code == 400, answer.text
        assert error_of(answer)["code"] == 100
        assert "Traceback" not in answer.text


@pytest.mark.parametrize(
    ("args", "env", "names"),
    [
        ([], {"SANDBOX_PORT": "eighty"}, "SANDBOX_PORT"),
        (["--port", "70000"], {}, "--port"),
        ([], {"SANDBOX_WEBHOOK_CALLBACK_URL": "ftp://x"}, "SANDBOX_WEBHOOK_CALLBACK_URL"),
        (
            [],
            {"SANDBOX_WEBHOOK_CALLBACK_URL": "http://127.0.0.1:1/w"},
            "SANDBOX_WEBHOOK_VERIFY_TOKEN",
        ),
        (["--fixture", "/nope.json"], {}, "--fixture"),
        ([], {"SANDBOX_PRIVATE_REPLIES_PER_HOUR": "-5"}, "SANDBOX_PRIVATE_REPLIES_PER_HOUR"),
        (["--colour"], {}, "--colour"),
    ],
)
def test_bad_configuration_exits_2_with_one_line(
    args: list[str], env: dict[str, str], names: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "sandbox", *args],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert names in lines[0]
