"""The objects of the simulated Instagram world, as plain dataclasses.

They hold data and nothing else; the rules that change them live in the modules named for
each endpoint, and the indexes that find them live in ``state.World``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

MessageKind = Literal[
    "private_reply", "dm", "fan_message", "quick_reply", "story_reply", "story_mention"
]
# A story is live for this long after it is posted; then it takes no replies.
STORY_LIFETIME_S = 24 * 3600.0


@dataclass(slots=True)
class Account:
    """A creator's Instagram professional account (the business side)."""

    user_id: str  # professional account id: webhook entry.id, /me.user_id
    app_scoped_id: str  # /me.id and the token exchange's user_id
    username: str
    name: str
    account_type: str
    biography: str
    followers_count: int
    follows_count: int
    media_ids: list[str] = field(default_factory=list)  # oldest first
    story_ids: list[str] = field(default_factory=list)  # oldest first; not in /media
    subscribed_fields: list[str] = field(default_factory=list)
    # The permissions of the token that made the subscription: Meta sends a field's events
    # only when the account granted the permission the field needs.
    subscribed_scopes: tuple[str, ...] = ()

    @property
    def profile_picture_url(self) -> str:
        return f"https://scontent.cdninstagram.com/v/sandbox/{self.username}.jpg"


@dataclass(slots=True)
class Fan:
    """A person who comments, follows and messages; seen by each account under an IGSID."""

    username: str
    name: str
    igsids: dict[str, str]  # account user_id -> IGSID
    follows: dict[str, float]  # account user_id -> when the follow happened
    follower_count: int
    is_verified: bool
    inbox: list[Message] = field(default_factory=list)  # messages received, oldest first


@dataclass(slots=True)
class Media:
    id: str
    owner_id: str
    caption: str
    media_type: str
    media_product_type: str
    shortcode: str
    created_at: float
    like_count: int
    comment_ids: list[str] = field(default_factory=list)  # top-level only, oldest first
    comments_count: int = 0

    @property
    def is_story(self) -> bool:
        return self.media_product_type == "STORY"

    @property
    def expires_at(self) -> float:
        """When a story stops being live (a post never does; this is then meaningless)."""
        return self.created_at + STORY_LIFETIME_S

    def live_at(self, now: float) -> bool:
        return not self.is_story or now < self.expires_at

    @property
    def permalink(self) -> str:
        kind = "reel" if self.media_product_type == "REELS" else "p"
        return f"https://www.instagram.com/{kind}/{self.shortcode}/"

    @property
    def media_url(self) -> str:
        extension = "mp4" if self.media_type == "VIDEO" else "jpg"
        return f"https://scontent.cdninstagram.com/v/sandbox/{self.id}.{extension}"


@dataclass(slots=True)
class Comment:
    id: str
    media_id: str
    account_id: str  # owner of the media, i.e. whose comments these are
    fan: str | None  # author's username, None when the account itself wrote it
    text: str
    created_at: float
    parent_id: str | None
    hidden: bool = False
    deleted: bool = False
    like_count: int = 0
    reply_ids: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Message:
    mid: str
    account_id: str
    fan: str
    igsid: str
    from_business: bool
    kind: MessageKind
    created_at: float
    text: str | None = None
    attachment: dict[str, Any] | None = None
    quick_replies: list[dict[str, Any]] | None = None
    quick_reply_payload: str | None = None
    comment_id: str | None = None  # set on private replies
    # A fan's reply to one of the account's stories: Meta's `reply_to.story` {id, url}.
    reply_to_story: dict[str, str] | None = None


@dataclass(slots=True)
class Conversation:
    id: str
    account_id: str
    fan: str
    igsid: str
    messages: list[Message] = field(default_factory=list)
    updated_at: float = 0.0
    # The 24-hour window runs from the fan's latest message or postback tap.
    last_fan_activity: float | None = None
    # A message or a tap is the consent that unlocks GET /{igsid} (code 230 before).
    consented: bool = False
    seen_mid: str | None = None


@dataclass(slots=True)
class Token:
    value: str
    account_id: str
    kind: Literal["short", "long"]
    issued_at: float
    expires_at: float
    scopes: tuple[str, ...]
    source: str
    revoked: bool = False


@dataclass(slots=True)
class AuthCode:
    code: str
    account_id: str
    redirect_uri: str
    scopes: tuple[str, ...]
    created_at: float
    used: bool = False
    # The authorize request's PKCE S256 challenge; the exchange must then prove the verifier.
    code_challenge: str | None = None


@dataclass(slots=True)
class AuthRequest:
    """A validated ``/oauth/authorize`` request waiting for the person's allow or deny."""

    id: str
    redirect_uri: str
    scopes: tuple[str, ...]
    state: str | None
    created_at: float
    code_challenge: str | None = None
