"""The seed world: creator accounts, fans, posts and comments, read from a JSON fixture.

Times are given as ages (``age_hours``) so the seeded world looks recent whenever it loads;
ids are fixed so tests and people can refer to them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import msgspec

MediaType = Literal["IMAGE", "VIDEO", "CAROUSEL_ALBUM"]
ProductType = Literal["FEED", "REELS", "STORY", "AD"]


class FixtureError(Exception):
    """The fixture file cannot be used; the message says where."""


class MediaSeed(msgspec.Struct, forbid_unknown_fields=True):
    id: str
    caption: str
    age_hours: float
    media_type: MediaType = "IMAGE"
    media_product_type: ProductType = "FEED"
    like_count: int = 0
    shortcode: str | None = None


class AccountSeed(msgspec.Struct, forbid_unknown_fields=True):
    user_id: str
    app_scoped_id: str
    username: str
    name: str
    account_type: Literal["Business", "Media_Creator"] = "Media_Creator"
    biography: str = ""
    followers_count: int = 0
    follows_count: int = 0
    media: list[MediaSeed] = []


class FanSeed(msgspec.Struct, forbid_unknown_fields=True):
    username: str
    name: str
    # IGSID per business account (keyed by account username); missing ones are derived.
    igsids: dict[str, str] = {}
    follows: list[str] = []
    follower_count: int = 0
    is_verified: bool = False


class CommentSeed(msgspec.Struct, forbid_unknown_fields=True):
    id: str
    text: str
    age_hours: float
    media_id: str | None = None  # required on top-level comments, implied on replies
    fan: str | None = None  # a fan's username; absent means the account itself wrote it
    hidden: bool = False
    like_count: int = 0
    replies: list[CommentSeed] = []


class Fixture(msgspec.Struct, forbid_unknown_fields=True):
    accounts: list[AccountSeed]
    fans: list[FanSeed]
    comments: list[CommentSeed] = []
    app_name: str = "OnceReply Sandbox App"


def load_fixture(path: Path) -> Fixture:
    try:
        fixture = msgspec.json.decode(path.read_bytes(), type=Fixture)
    except (OSError, msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise FixtureError(f"{path}: {exc}") from None
    _check(fixture, path)
    return fixture


def _check(fixture: Fixture, path: Path) -> None:
    seen: set[str] = set()

    def unique(kind: str, value: str) -> None:
        if not value.isdigit():
            raise FixtureError(f"{path}: {kind} id {value!r} must be numeric")
        if value in seen:
            raise FixtureError(f"{path}: id {value} is used twice")
        seen.add(value)

    if not fixture.accounts:
        raise FixtureError(f"{path}: at least one account is needed")
    usernames = {a.username for a in fixture.accounts}
    media_ids: set[str] = set()
    for account in fixture.accounts:
        unique("account", account.user_id)
        unique("app-scoped", account.app_scoped_id)
        for media in account.media:
            unique("media", media.id)
            media_ids.add(media.id)
    fans = {f.username for f in fixture.fans}
    if len(fans) != len(fixture.fans) or fans & usernames:
        raise FixtureError(f"{path}: fan usernames must be unique and differ from accounts")
    for fan in fixture.fans:
        for name, igsid in fan.igsids.items():
            if name not in usernames:
                raise FixtureError(f"{path}: fan {fan.username} has an IGSID for unknown {name}")
            unique("IGSID", igsid)
        for name in fan.follows:
            if name not in usernames:
                raise FixtureError(f"{path}: fan {fan.username} follows unknown {name}")

    def walk(comment: CommentSeed, top_level: bool) -> None:
        unique("comment", comment.id)
        if top_level and comment.media_id not in media_ids:
            raise FixtureError(f"{path}: comment {comment.id} is on unknown media")
        if comment.fan is not None and comment.fan not in fans:
            raise FixtureError(f"{path}: comment {comment.id} is by unknown fan {comment.fan}")
        if comment.replies and not top_level:
            raise FixtureError(f"{path}: reply {comment.id} cannot have replies")
        for reply in comment.replies:
            walk(reply, False)

    for comment in fixture.comments:
        walk(comment, True)
