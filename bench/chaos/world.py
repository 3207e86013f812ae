"""The run's world: the sandbox's posts and fans, our account and one campaign per post.

The account is connected as a creator's would be (a long-lived token minted by the sandbox,
sealed with our key, subscribed to comment webhooks only) and gets one active post campaign
per post, each with its own text; the sandbox's limits that would only slow the run down
(sends per second, private replies per hour, conversation reads) are lifted, and it is told
not to refuse a second private reply to one comment, so a duplicate we send would be
delivered and counted instead of hidden by the sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from bench.chaos.plan import KEYWORD, Shape, once_per_person
from bench.seeding import connected_account

ACCOUNT = "sunny.bakes"
ACCOUNT_IG_ID = "17841458120395731"


@dataclass(frozen=True, slots=True)
class World:
    posts: list[str]  # media ids, by post number
    fans: list[str]  # usernames, by fan number


def sandbox_settings(admin: Any) -> None:
    admin.update_settings(
        sends_per_second=10**9,
        private_replies_per_hour=10**9,
        conversations_per_second=10**6,
        enforce_one_private_reply=False,
    )


def build(admin: Any, database_url: str, encryption_key: str, shape: Shape, tag: str) -> World:
    sandbox_settings(admin)
    token = admin.mint_token(ACCOUNT, age_seconds=2 * 86400, subscribe=["comments"])
    posts = [
        str(admin.publish_media(ACCOUNT, f"Chaos post {i}: comment RECIPE")["id"])
        for i in range(shape.posts)
    ]
    fans = [f"{tag}.fan{i}" for i in range(shape.fans)]
    for fan in fans:
        admin.add_fan(fan)
    _seed(database_url, token["access_token"], encryption_key, posts)
    return World(posts, fans)


def _seed(database_url: str, token: str, encryption_key: str, posts: list[str]) -> None:
    now = datetime.now(UTC)
    with psycopg.connect(database_url, autocommit=True) as conn:
        workspace_id, account_id = connected_account(
            conn,
            workspace_name="chaos",
            ig_user_id=ACCOUNT_IG_ID,
            username=ACCOUNT,
            token=token,
            encryption_key=encryption_key,
        )
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO campaigns (workspace_id, account_id, name, status, scope, media_id, "
                "activated_at, keywords, dm_text, once_per_person) "
                "VALUES (%s, %s, %s, 'active', 'post', %s, %s, %s, %s, %s)",
                [
                    (
                        workspace_id,
                        account_id,
                        f"post {i}",
                        media_id,
                        now - timedelta(minutes=5),
                        [KEYWORD],
                        f"Hi {{username}}! The recipe for post {i} is on its way.",
                        once_per_person(i),
                    )
                    for i, media_id in enumerate(posts)
                ],
            )
