"""Graph endpoints: paths and versions, tokens, /me, media and comments paging, public replies,
subscriptions, conversations, the follow check and account isolation."""

from __future__ import annotations

import httpx

from sandbox.client import SandboxAdmin
from tests.integration.sandbox.helpers import (
    LEMON_REEL,
    MARCO_COMMENT,
    NORTH,
    NORTH_COMMENT,
    NORTH_REEL,
    OLGA_COMMENT,
    SUNNY,
    SUNNY_APP_SCOPED,
    direct_message,
    error_of,
    private_reply,
)


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_any_version_prefix_or_none_and_both_token_styles(
    sandbox_process: object, graph: httpx.Client, token: str
) -> None:
    base = str(graph.base_url).rsplit("/v25.0", 1)[0]
    for prefix in ("/v25.0", "/v21.0", "/v26.0", ""):
        by_header = httpx.get(f"{base}{prefix}/me", headers=auth(token))
        by_query = httpx.get(f"{base}{prefix}/me", params={"access_token": token})
        assert by_header.status_code == by_query.status_code == 200
        assert by_header.json()["user_id"] == SUNNY
        assert "x-app-usage" in by_header.headers


def test_me_is_flat_and_honours_fields(graph: httpx.Client, token: str) -> None:
    default = graph.get("/me", headers=auth(token)).json()
    assert default == {
        "id": SUNNY_APP_SCOPED,
        "user_id": SUNNY,
        "username": "sunny.bakes",
        "account_type": "Media_Creator",
    }
    picked = graph.get(
        "/me",
        params={"fields": "username,followers_count,media_count,nonsense"},
        headers=auth(token),
    ).json()
    assert picked == {
        "username": "sunny.bakes",
        "followers_count": 48210,
        "media_count": 6,
        "id": SUNNY_APP_SCOPED,
    }


def test_unknown_and_doubled_paths_give_2500(graph: httpx.Client, token: str) -> None:
    doubled = graph.post("/v25.0/me/messages", headers=auth(token), json={})
    error = error_of(doubled)
    assert (error["code"], error["message"]) == (2500, "Unknown path components: /messages")
    assert error_of(graph.get("/me/everything", headers=auth(token)))["code"] == 2500


def test_missing_token_and_unknown_object(graph: httpx.Client, token: str) -> None:
    assert error_of(graph.get("/me"))["code"] == 2500
    unknown = graph.get("/17800000000000000", headers=auth(token))
    assert unknown.status_code == 400
    assert (error_of(unknown)["code"], error_of(unknown)["error_subcode"]) == (100, 33)


def test_media_paging_walks_every_post_newest_first(graph: httpx.Client, token: str) -> None:
    seen: list[dict[str, str]] = []
    url: str | None = (
        f"/{SUNNY}/media?fields=id,caption,media_type,media_product_type,timestamp&limit=4"
    )
    pages = 0
    while url is not None:
        page = graph.get(url, headers=auth(token)).json()
        seen.extend(page["data"])
        pages += 1
        assert set(page["paging"]["cursors"]) == {"before", "after"}
        url = page["paging"].get("next")
    assert pages == 2
    assert len(seen) == 6
    assert [m["timestamp"] for m in seen] == sorted((m["timestamp"] for m in seen), reverse=True)
    assert seen[0]["id"] == LEMON_REEL
    assert seen[0]["media_product_type"] == "REELS"


def test_media_default_fields_are_ids_and_previous_page_returns(
    graph: httpx.Client, token: str
) -> None:
    first = graph.get(f"/{SUNNY}/media", params={"limit": 2}, headers=auth(token)).json()
    assert all(set(m) == {"id"} for m in first["data"])
    second = graph.get(first["paging"]["next"], headers=auth(token)).json()
    assert "previous" in second["paging"]
    back = graph.get(second["paging"]["previous"], headers=auth(token)).json()
    assert back["data"] == first["data"]


def test_comments_paging_50_per_page_newest_first_top_level_only(
    graph: httpx.Client, admin: SandboxAdmin, token: str
) -> None:
    admin.update_settings(webhook_batch_window_ms=0)
    made = [admin.fan_comment("jane.doe", LEMON_REEL, f"comment {i}")["id"] for i in range(110)]
    admin.fan_reply("marco_rossi", made[-1], "a reply, never listed at top level")
    ids: list[str] = []
    sizes: list[int] = []
    url: str | None = f"/{LEMON_REEL}/comments?limit=100&fields=id,text,replies{{id,text,from}}"
    while url is not None:
        page = graph.get(url, headers=auth(token)).json()
        sizes.append(len(page["data"]))
        ids.extend(c["id"] for c in page["data"])
        if len(ids) == 50:
            newest = page["data"][0]
            assert newest["id"] == made[-1]
            assert newest["replies"]["data"][0]["text"] == "a reply, never listed at top level"
        url = page["paging"].get("next")
    # 110 new + 2 from the fixture, capped at 50 a page, no reply among them.
    assert sizes == [50, 50, 12]
    assert ids[:110] == list(reversed(made))
    assert ids[110:] == [OLGA_COMMENT, MARCO_COMMENT]


def test_deleted_comments_leave_the_list(
    graph: httpx.Client, admin: SandboxAdmin, token: str
) -> None:
    admin.delete_comment(OLGA_COMMENT)
    listed = graph.get(f"/{LEMON_REEL}/comments", headers=auth(token)).json()["data"]
    assert [c["id"] for c in listed] == [MARCO_COMMENT]
    assert set(listed[0]) == {"id", "text", "timestamp"}


def test_public_reply_json_form_and_query(
    graph: httpx.Client, admin: SandboxAdmin, token: str
) -> None:
    as_json = graph.post(
        f"/{OLGA_COMMENT}/replies", headers=auth(token), json={"message": "Check your DMs 📩"}
    )
    as_form = graph.post(f"/{OLGA_COMMENT}/replies", headers=auth(token), data={"message": "form"})
    as_query = graph.post(
        f"/{OLGA_COMMENT}/replies", params={"message": "query", "access_token": token}
    )
    for answer in (as_json, as_form, as_query):
        assert answer.status_code == 200, answer.text
        assert answer.json()["id"].isdigit()
    stats = admin.comment_stats(OLGA_COMMENT)
    assert stats["public_replies"] == 3
    assert [r["text"] for r in admin.replies(comment_id=OLGA_COMMENT)] == [
        "Check your DMs 📩",
        "form",
        "query",
    ]

    # A reply to a reply hangs off the top-level comment.
    nested = graph.post(
        f"/{as_json.json()['id']}/replies", headers=auth(token), json={"message": "deeper"}
    )
    assert nested.status_code == 200
    reply = graph.get(
        f"/{nested.json()['id']}", params={"fields": "id,parent_id,from"}, headers=auth(token)
    )
    assert reply.json()["parent_id"] == OLGA_COMMENT
    assert reply.json()["from"] == {"id": SUNNY_APP_SCOPED, "username": "sunny.bakes"}


def test_public_reply_to_a_deleted_comment_is_100_33(
    graph: httpx.Client, admin: SandboxAdmin, token: str
) -> None:
    admin.delete_comment(MARCO_COMMENT)
    answer = graph.post(f"/{MARCO_COMMENT}/replies", headers=auth(token), json={"message": "hi"})
    assert answer.status_code == 400
    error = error_of(answer)
    assert (error["code"], error["error_subcode"]) == (100, 33)
    assert "does not exist" in error["message"]
    missing = graph.post(f"/{OLGA_COMMENT}/replies", headers=auth(token), json={})
    assert error_of(missing)["code"] == 100


def test_subscribed_apps(graph: httpx.Client, admin: SandboxAdmin) -> None:
    fresh = admin.mint_token("sunny.bakes")["access_token"]
    assert graph.get(f"/{SUNNY}/subscribed_apps", headers=auth(fresh)).json() == {"data": []}
    posted = graph.post(
        f"/{SUNNY}/subscribed_apps",
        params={"subscribed_fields": "comments,messages,messaging_postbacks"},
        headers=auth(fresh),
    )
    assert posted.json() == {"success": True}
    listed = graph.get(f"/{SUNNY}/subscribed_apps", headers=auth(fresh)).json()["data"]
    assert listed[0]["subscribed_fields"] == ["comments", "messages", "messaging_postbacks"]

    via_me = graph.post(
        "/me/subscribed_apps", params={"subscribed_fields": "comments"}, headers=auth(fresh)
    )
    assert via_me.status_code == 400
    assert error_of(via_me)["message"] == "Unsupported request - method type: post"
    wrong = graph.post(
        f"/{SUNNY}/subscribed_apps", params={"subscribed_fields": "likes"}, headers=auth(fresh)
    )
    assert error_of(wrong)["code"] == 100


def test_follow_check_needs_consent_then_follows_lag(
    graph: httpx.Client, admin: SandboxAdmin, token: str
) -> None:
    olga = admin.inbox("olga.petrova")["igsids"][SUNNY]
    fields = {"fields": "is_user_follow_business,username"}
    before = graph.get(f"/{olga}", params=fields, headers=auth(token))
    assert before.status_code == 400
    assert error_of(before)["code"] == 230
    assert error_of(before)["message"] == "User consent is required to access user profile"

    # A comment is not consent; a postback tap is.
    assert (
        private_reply(
            graph,
            token,
            OLGA_COMMENT,
            {
                "attachment": {
                    "type": "template",
                    "payload": {
                        "template_type": "button",
                        "text": "Tap to get it",
                        "buttons": [
                            {"type": "postback", "title": "Send it", "payload": "reveal:1"}
                        ],
                    },
                }
            },
        ).status_code
        == 200
    )
    assert graph.get(f"/{olga}", params=fields, headers=auth(token)).status_code == 400
    admin.fan_tap("olga.petrova", "sunny.bakes", payload="reveal:1")
    consented = graph.get(f"/{olga}", params=fields, headers=auth(token)).json()
    assert consented == {"is_user_follow_business": False, "username": "olga.petrova", "id": olga}

    admin.update_settings(follow_lag_seconds=120)
    admin.fan_follow("olga.petrova", "sunny.bakes")
    assert (
        graph.get(f"/{olga}", params=fields, headers=auth(token)).json()["is_user_follow_business"]
        is False
    )
    admin.advance_clock(121)
    assert (
        graph.get(f"/{olga}", params=fields, headers=auth(token)).json()["is_user_follow_business"]
        is True
    )
    admin.fan_unfollow("olga.petrova", "sunny.bakes")
    assert (
        graph.get(f"/{olga}", params=fields, headers=auth(token)).json()["is_user_follow_business"]
        is False
    )


def test_conversations_show_only_the_20_newest(
    graph: httpx.Client, admin: SandboxAdmin, token: str
) -> None:
    jane = admin.fan_dm("jane.doe", "sunny.bakes", "hi! is the recipe free?")["igsid"]
    for n in range(24):
        assert direct_message(graph, token, jane, {"text": f"reply {n}"}).status_code == 200
    admin.update_settings(conversations_per_second=100)
    found = graph.get(
        f"/{SUNNY}/conversations",
        params={"platform": "instagram", "user_id": jane},
        headers=auth(token),
    ).json()["data"]
    assert len(found) == 1
    assert found[0]["updated_time"].endswith("+0000")
    thread = graph.get(
        f"/{found[0]['id']}",
        params={"fields": "messages{id,created_time,from,to,message}"},
        headers=auth(token),
    ).json()
    messages = thread["messages"]["data"]
    assert len(messages) == 20
    assert [m["message"] for m in messages[:2]] == ["reply 23", "reply 22"]
    assert messages[0]["from"] == {"username": "sunny.bakes", "id": SUNNY}
    assert messages[0]["to"] == {"data": [{"username": "jane.doe", "id": jane}]}
    # The fan's own first message is older than the 20 newest: not readable any more.
    assert "hi! is the recipe free?" not in [m["message"] for m in messages]


def test_conversations_rate_limit(graph: httpx.Client, admin: SandboxAdmin, token: str) -> None:
    answers = [graph.get(f"/{SUNNY}/conversations", headers=auth(token)) for _ in range(4)]
    codes = [a.status_code for a in answers]
    assert codes[:2] == [200, 200]
    assert 400 in codes[2:]
    assert error_of(next(a for a in answers if a.status_code == 400))["code"] == 613


def test_accounts_are_isolated(graph: httpx.Client, admin: SandboxAdmin, token: str) -> None:
    for path in (f"/{NORTH}/media", f"/{NORTH_REEL}/comments", f"/{NORTH_COMMENT}"):
        answer = graph.get(path, headers=auth(token))
        assert answer.status_code == 400, path
        assert (error_of(answer)["code"], error_of(answer)["error_subcode"]) == (100, 33)
    foreign = private_reply(graph, token, NORTH_COMMENT)
    assert error_of(foreign)["error_subcode"] == 33
    # IGSIDs are scoped per business account: Sam's id towards north.trails means nothing to sunny.
    sam_north = admin.inbox("sam.okafor")["igsids"][NORTH]
    sam_sunny = admin.inbox("sam.okafor")["igsids"][SUNNY]
    assert sam_north != sam_sunny
    assert error_of(direct_message(graph, token, sam_north))["error_subcode"] == 2534014


def test_comment_hide_and_delete_by_the_owner(
    graph: httpx.Client, admin: SandboxAdmin, token: str
) -> None:
    hidden = graph.post(f"/{MARCO_COMMENT}", params={"hide": "true"}, headers=auth(token))
    assert hidden.json() == {"success": True}
    listed = graph.get(
        f"/{LEMON_REEL}/comments", params={"fields": "id,hidden"}, headers=auth(token)
    )
    assert {"id": MARCO_COMMENT, "hidden": True} in listed.json()["data"]
    assert graph.delete(f"/{MARCO_COMMENT}", headers=auth(token)).json() == {"success": True}
    assert admin.comment_stats(MARCO_COMMENT)["comment"]["deleted"] is True
