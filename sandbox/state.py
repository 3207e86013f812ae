"""The in-memory world: accounts, fans, media, comments, conversations, tokens and codes.

One ``World`` lives on the app (``app.state``); nothing here is module-global. Mutations are
plain synchronous methods and callers never ``await`` between checking a rule and applying
it, so on the single event loop every send is atomic without a lock.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from sandbox.clock import Clock
from sandbox.fixture import CommentSeed, Fixture
from sandbox.ids import IdFactory, conversation_id, derived_igsid
from sandbox.models import (
    Account,
    AuthCode,
    AuthRequest,
    Comment,
    Conversation,
    Fan,
    Media,
    Message,
    Token,
)

HOUR = 3600.0


@dataclass(slots=True)
class CommentCounters:
    """What a test needs to prove "exactly one" for a comment."""

    private_replies_delivered: int = 0
    send_requests: int = 0
    public_replies: int = 0
    public_reply_requests: int = 0


class World:
    def __init__(self, fixture: Fixture, clock: Clock) -> None:
        self.clock = clock
        self.ids = IdFactory()
        self.app_name = fixture.app_name
        self.accounts: dict[str, Account] = {}
        self._account_refs: dict[str, Account] = {}
        self.fans: dict[str, Fan] = {}
        self._fan_refs: dict[str, Fan] = {}
        self.igsids: dict[str, tuple[Fan, str]] = {}  # IGSID -> (fan, account user_id)
        self.media: dict[str, Media] = {}
        self.comments: dict[str, Comment] = {}
        self.conversations: dict[tuple[str, str], Conversation] = {}
        self.conversations_by_id: dict[str, Conversation] = {}
        self.messages: dict[str, Message] = {}
        self.tokens: dict[str, Token] = {}
        self.codes: dict[str, AuthCode] = {}
        self.auth_requests: dict[str, AuthRequest] = {}
        self.counters: dict[str, CommentCounters] = {}
        self._seed(fixture)

    # --- seeding -------------------------------------------------------------------------

    def _seed(self, fixture: Fixture) -> None:
        now = self.clock.now()
        for seed in fixture.accounts:
            account = Account(
                user_id=seed.user_id,
                app_scoped_id=seed.app_scoped_id,
                username=seed.username,
                name=seed.name,
                account_type=seed.account_type,
                biography=seed.biography,
                followers_count=seed.followers_count,
                follows_count=seed.follows_count,
            )
            self._add_account(account)
            for media in sorted(seed.media, key=lambda m: -m.age_hours):
                self.add_media(
                    account,
                    caption=media.caption,
                    media_type=media.media_type,
                    media_product_type=media.media_product_type,
                    created_at=now - media.age_hours * HOUR,
                    like_count=media.like_count,
                    media_id=media.id,
                    shortcode=media.shortcode,
                )
        by_name = {a.username: a for a in self.accounts.values()}
        for fan_seed in fixture.fans:
            fan = self.add_fan(
                fan_seed.username,
                fan_seed.name,
                igsids={by_name[k].user_id: v for k, v in fan_seed.igsids.items()},
                follower_count=fan_seed.follower_count,
                is_verified=fan_seed.is_verified,
            )
            for name in fan_seed.follows:
                fan.follows[by_name[name].user_id] = now - 30 * 24 * HOUR

        def plant(seed: CommentSeed, media: Media, parent: Comment | None) -> None:
            comment = self.add_comment(
                media,
                fan=seed.fan,
                text=seed.text,
                parent=parent,
                created_at=now - seed.age_hours * HOUR,
                comment_id=seed.id,
            )
            comment.hidden = seed.hidden
            comment.like_count = seed.like_count
            for reply in sorted(seed.replies, key=lambda r: -r.age_hours):
                plant(reply, media, comment)

        for top in sorted(fixture.comments, key=lambda c: -c.age_hours):
            # The fixture loader has checked that every top-level comment names its media.
            plant(top, self.media[top.media_id or ""], None)

    def _add_account(self, account: Account) -> None:
        self.accounts[account.user_id] = account
        for ref in (account.user_id, account.app_scoped_id, account.username.lower()):
            self._account_refs[ref] = account
        self.ids.reserve(account.user_id)
        self.ids.reserve(account.app_scoped_id)

    # --- lookups -------------------------------------------------------------------------

    def account(self, ref: str) -> Account | None:
        """An account by professional id, app-scoped id or username (``@`` optional)."""
        return self._account_refs.get(ref.removeprefix("@").lower())

    def fan(self, ref: str) -> Fan | None:
        """A fan by username (``@`` optional) or by any of their IGSIDs."""
        ref = ref.removeprefix("@")
        found = self._fan_refs.get(ref.lower())
        if found is None and ref in self.igsids:
            found = self.igsids[ref][0]
        return found

    def igsid(self, fan: Fan, account_id: str) -> str:
        return fan.igsids[account_id]

    def counters_for(self, comment_id: str) -> CommentCounters:
        counters = self.counters.get(comment_id)
        if counters is None:
            counters = self.counters[comment_id] = CommentCounters()
        return counters

    # --- mutations -----------------------------------------------------------------------

    def add_fan(
        self,
        username: str,
        name: str,
        *,
        igsids: dict[str, str] | None = None,
        follower_count: int | None = None,
        is_verified: bool = False,
    ) -> Fan:
        given = igsids or {}
        scoped = {
            account_id: given.get(account_id) or derived_igsid(username, account_id)
            for account_id in self.accounts
        }
        if follower_count is None:
            # Stable, varied numbers so profiles look lived-in.
            follower_count = int(hashlib.sha256(username.encode()).hexdigest()[:4], 16) % 3000
        fan = Fan(
            username=username,
            name=name,
            igsids=scoped,
            follows={},
            follower_count=follower_count,
            is_verified=is_verified,
        )
        self.fans[username] = fan
        self._fan_refs[username.lower()] = fan
        for account_id, igsid in scoped.items():
            self.igsids[igsid] = (fan, account_id)
        return fan

    def add_media(
        self,
        account: Account,
        *,
        caption: str,
        media_type: str,
        media_product_type: str,
        created_at: float,
        like_count: int = 0,
        media_id: str | None = None,
        shortcode: str | None = None,
    ) -> Media:
        if media_id is None:
            media_id = self.ids.object_id()
        else:
            self.ids.reserve(media_id)
        media = Media(
            id=media_id,
            owner_id=account.user_id,
            caption=caption,
            media_type=media_type,
            media_product_type=media_product_type,
            shortcode=shortcode or _shortcode(media_id),
            created_at=created_at,
            like_count=like_count,
        )
        self.media[media_id] = media
        # Stories are not in /{ig-user-id}/media, as on Instagram; /stories lists the live ones.
        (account.story_ids if media.is_story else account.media_ids).append(media_id)
        return media

    def add_comment(
        self,
        media: Media,
        *,
        fan: str | None,
        text: str,
        parent: Comment | None,
        created_at: float | None = None,
        comment_id: str | None = None,
    ) -> Comment:
        if comment_id is None:
            comment_id = self.ids.object_id()
        else:
            self.ids.reserve(comment_id)
        # Instagram threads are one level deep: a reply to a reply hangs off the top comment.
        while parent is not None and parent.parent_id is not None:
            parent = self.comments[parent.parent_id]
        comment = Comment(
            id=comment_id,
            media_id=media.id,
            account_id=media.owner_id,
            fan=fan,
            text=text,
            created_at=self.clock.now() if created_at is None else created_at,
            parent_id=parent.id if parent is not None else None,
        )
        self.comments[comment_id] = comment
        if parent is None:
            media.comment_ids.append(comment_id)
        else:
            parent.reply_ids.append(comment_id)
        media.comments_count += 1
        return comment

    def delete_comment(self, comment: Comment) -> None:
        if comment.deleted:
            return
        comment.deleted = True
        self.media[comment.media_id].comments_count -= 1

    def conversation(self, account_id: str, fan: Fan) -> Conversation:
        key = (account_id, fan.username)
        found = self.conversations.get(key)
        if found is None:
            igsid = fan.igsids[account_id]
            found = Conversation(
                id=conversation_id(account_id, igsid),
                account_id=account_id,
                fan=fan.username,
                igsid=igsid,
                updated_at=self.clock.now(),
            )
            self.conversations[key] = found
            self.conversations_by_id[found.id] = found
        return found

    def record_message(self, conversation: Conversation, message: Message) -> None:
        conversation.messages.append(message)
        conversation.updated_at = message.created_at
        self.messages[message.mid] = message
        if message.from_business:
            self.fans[message.fan].inbox.append(message)


def _shortcode(media_id: str) -> str:
    digest = hashlib.sha256(media_id.encode()).digest()
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
    return "C" + "".join(alphabet[b % 64] for b in digest[:10])
