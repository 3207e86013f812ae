"""Constants from the sandbox's default fixture and small helpers for the sandbox's own tests."""

from __future__ import annotations

from typing import Any

import httpx

APP_ID = "1122334455667788"
APP_SECRET = "ig-app-secret-for-tests"
META_SECRET = "meta-app-secret-for-tests"
VERIFY_TOKEN = "verify-me-please"

SUNNY = "17841458120395731"  # @sunny.bakes, professional account id (webhook entry.id)
SUNNY_APP_SCOPED = "27640875392278831"  # /me.id and the token exchange's user_id
NORTH = "17841462908174420"  # @north.trails
LEMON_REEL = "17918195224117851"  # 2 hours old
STARTER_POST = "17918195224117852"
ROLLS_REEL = "17918195224117855"  # 10 days old
NORTH_REEL = "17895695668004551"
OLGA_COMMENT = "17870913679156902"  # on LEMON_REEL, 1.2 h old, Cyrillic text
MARCO_COMMENT = "17870913679156901"  # on LEMON_REEL
OLD_COMMENT = "17870913679156906"  # on ROLLS_REEL, 230 h (9.6 days) old
JANE_SUNNY_IGSID = "1254459154682919"
NORTH_COMMENT = "17870913679156908"  # by sam.okafor on NORTH_REEL

DAY = 24 * 3600


def error_of(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert "error" in body, body
    error: dict[str, Any] = body["error"]
    assert error.get("fbtrace_id"), error
    return error


def private_reply(
    graph: httpx.Client, token: str, comment_id: str, message: dict[str, Any] | None = None
) -> httpx.Response:
    return graph.post(
        "/me/messages",
        headers={"Authorization": f"Bearer {token}"},
        json={
            "recipient": {"comment_id": comment_id},
            "message": {"text": "Here!"} if message is None else message,
        },
    )


def direct_message(
    graph: httpx.Client, token: str, igsid: str, message: dict[str, Any] | None = None
) -> httpx.Response:
    return graph.post(
        f"/{SUNNY}/messages",
        headers={"Authorization": f"Bearer {token}"},
        json={
            "recipient": {"id": igsid},
            "message": {"text": "Hello again"} if message is None else message,
        },
    )
