"""Connecting an Instagram professional account to a workspace, and disconnecting it.

The flow, with Instagram Login (OAuth), `/me` and `subscribed_apps`:

1. `begin_connect` makes the authorize URL; its `state`, PKCE verifier, workspace and start
   time go into the server-side session (`PendingConnect`).
   The page's origin goes into Redis under the state (`remember_origin`): a dashboard opened
   at `127.0.0.1` while `PUBLIC_BASE_URL` says `localhost` gets Instagram's answer at
   `localhost`, where this browser has no session; the callback sends it back to the origin
   it started from (`origin_to_resume`, loopback names of one server only, never elsewhere).
2. The callback checks the answer against the session (`check_callback`): a denial, a missing
   or different state, or one older than ten minutes stop here. `claim_state` then spends the
   state in Redis (`SET NX`), so two racing replays of one callback cannot both go on.
3. `complete_connect`: code → short-lived token (authlib, PKCE) → long-lived token → `/me`,
   whose `user_id` (not `id`, the app-scoped id) is the professional account id that webhooks
   carry → one upsert that refuses an account owned by another workspace → webhook
   subscription for comments, messages, postbacks and read receipts. The token is stored
   encrypted, bound to the account.

Disconnecting wipes the token, marks the account `disconnected` and pauses its campaigns;
connecting the same account again in the same workspace restores it (its campaigns stay
paused until the creator resumes them). A policy pause with time left survives a reconnect.
"""

from __future__ import annotations

import hmac
import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from redis.asyncio import Redis
from redis.exceptions import RedisError
from sqlalchemy import and_, case, func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.accounts.tokens import MissingTokenError, open_access_token, seal_access_token
from app.db.models import (
    AccountStatus,
    Campaign,
    CampaignStatus,
    EventLevel,
    InstagramAccount,
)
from app.instagram.graph import GraphClient, GraphError
from app.instagram.oauth import OAuthExchangeError, exchange_code, start_authorization
from app.operations.events import record_event
from app.resources import Resources
from app.settings import Settings

logger = logging.getLogger("oncereply.connect")

SESSION_KEY = "ig_connect"
STATE_TTL_S = 600
WEBHOOK_FIELDS = ("comments", "messages", "messaging_postbacks", "messaging_seen")
DEFAULT_TOKEN_LIFETIME_S = 60 * 24 * 3600
_USED_STATE_PREFIX = "oncereply:oauth:used-state:"
_ORIGIN_PREFIX = "oncereply:oauth:origin:"
# Names one machine answers to: a callback may hop between these, and only these.
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


class ConnectProblem(StrEnum):
    DENIED = "denied"
    STATE = "state"
    EXPIRED = "expired"
    ELSEWHERE = "elsewhere"
    REFUSED = "refused"
    UNAVAILABLE = "unavailable"

    @property
    def message(self) -> str:
        return _MESSAGES[self]


_MESSAGES = {
    ConnectProblem.DENIED: "You declined on Instagram's permission screen, so nothing was "
    "connected. Connect again whenever you are ready.",
    ConnectProblem.STATE: "That Instagram sign-in could not be verified: it was already used, "
    "or it was not started from this browser. Nothing was connected; please start again.",
    ConnectProblem.EXPIRED: "That Instagram sign-in took longer than 10 minutes and has "
    "expired. Nothing was connected; please start again.",
    ConnectProblem.ELSEWHERE: "This Instagram account is already connected to another "
    "OnceReply workspace. It can only belong to one workspace at a time.",
    ConnectProblem.REFUSED: "Instagram refused the connection. Nothing was connected; please "
    "start again (the details are in the operator log).",
    ConnectProblem.UNAVAILABLE: "Instagram did not answer in time. Nothing was connected; "
    "please try again in a minute.",
}


@dataclass(frozen=True, slots=True)
class PendingConnect:
    state: str
    verifier: str
    workspace_id: int
    user_id: int
    started_at: float

    def to_session(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "verifier": self.verifier,
            "workspace_id": self.workspace_id,
            "user_id": self.user_id,
            "started_at": self.started_at,
        }

    @classmethod
    def from_session(cls, raw: object) -> PendingConnect | None:
        if not isinstance(raw, dict):
            return None
        try:
            return cls(
                state=str(raw["state"]),
                verifier=str(raw["verifier"]),
                workspace_id=int(raw["workspace_id"]),
                user_id=int(raw["user_id"]),
                started_at=float(raw["started_at"]),
            )
        except (KeyError, TypeError, ValueError):
            return None


async def begin_connect(
    settings: Settings, *, workspace_id: int, user_id: int
) -> tuple[str, PendingConnect]:
    """The authorize URL to redirect to, and what the session must remember."""
    authorization = await start_authorization(settings)
    pending = PendingConnect(
        state=authorization.state,
        verifier=authorization.verifier,
        workspace_id=workspace_id,
        user_id=user_id,
        started_at=time.time(),
    )
    return authorization.url, pending


def check_callback(
    pending: PendingConnect | None,
    params: dict[str, str],
    *,
    workspace_id: int,
    user_id: int,
    now: float | None = None,
) -> ConnectProblem | None:
    """What is wrong with this callback, if anything, before any token is asked for."""
    if params.get("error"):
        return (
            ConnectProblem.DENIED if params["error"] == "access_denied" else ConnectProblem.REFUSED
        )
    if pending is None or not params.get("code"):
        return ConnectProblem.STATE
    if not hmac.compare_digest(pending.state.encode(), params.get("state", "").encode()):
        return ConnectProblem.STATE
    if pending.workspace_id != workspace_id or pending.user_id != user_id:
        return ConnectProblem.STATE
    if (now if now is not None else time.time()) - pending.started_at > STATE_TTL_S:
        return ConnectProblem.EXPIRED
    return None


def _origin_key(state: str) -> str:
    return _ORIGIN_PREFIX + hmac.new(b"oauth-origin", state.encode(), "sha256").hexdigest()


async def remember_origin(redis: Redis, state: str, origin: str) -> None:
    """Note where (`scheme://host:port`) this sign-in began, for `origin_to_resume`."""
    try:
        await redis.set(_origin_key(state), origin.encode(), ex=STATE_TTL_S)
    except (RedisError, OSError):
        logger.warning("could not remember where an Instagram sign-in began")


async def origin_to_resume(redis: Redis, state: str, here: str) -> str | None:
    """The origin the callback must go back to, when the sign-in began under another loopback
    name of this same server (`127.0.0.1` against `localhost`); else None."""
    if not state:
        return None
    try:
        raw = await redis.get(_origin_key(state))
    except (RedisError, OSError):
        return None
    if raw is None:
        return None
    origin = raw.decode() if isinstance(raw, bytes) else str(raw)
    return origin if origin != here and _same_machine(origin, here) else None


def _same_machine(one: str, other: str) -> bool:
    a, b = urlsplit(one), urlsplit(other)
    try:
        ports = (a.port, b.port)
    except ValueError:
        return False
    return (
        a.scheme == b.scheme
        and ports[0] == ports[1]
        and a.hostname in LOOPBACK_HOSTS
        and b.hostname in LOOPBACK_HOSTS
    )


async def claim_state(redis: Redis, state: str) -> bool:
    """Spend a state once; False when it was already spent (a replayed callback)."""
    digest = hmac.new(b"oauth-state", state.encode(), "sha256").hexdigest()
    claimed = await redis.set(f"{_USED_STATE_PREFIX}{digest}", b"1", nx=True, ex=STATE_TTL_S * 2)
    return bool(claimed)


@dataclass(frozen=True, slots=True)
class Connected:
    account_id: int
    username: str
    webhooks_subscribed: bool


async def complete_connect(
    resources: Resources, *, workspace_id: int, code: str, verifier: str
) -> Connected | ConnectProblem:
    """Exchange the code and store the account; commits its own transactions."""
    settings, graph = resources.settings, resources.graph
    try:
        short = await exchange_code(settings, code, verifier)
        long_lived = await graph.exchange_long_lived_token(
            short.access_token, settings.instagram_app_secret
        )
        token = str(long_lived.get("access_token") or "")
        me = _flat(await graph.get_me(token)) if token else {}
    except OAuthExchangeError as exc:
        return await _failed(resources, workspace_id, exc.detail, rejected=exc.rejected)
    except GraphError as exc:
        return await _failed(resources, workspace_id, str(exc), rejected=True)
    if not token:
        return await _failed(resources, workspace_id, "no long-lived token", rejected=True)

    ig_user_id = str(me.get("user_id") or "")
    if not ig_user_id.isdigit():
        return await _failed(resources, workspace_id, "/me has no user_id", rejected=True)
    username = str(me.get("username") or ig_user_id)
    expires_in = _int(long_lived.get("expires_in")) or DEFAULT_TOKEN_LIFETIME_S

    async with resources.sessionmaker() as session, session.begin():
        account_id = await upsert_account(
            session,
            resources,
            workspace_id=workspace_id,
            ig_user_id=ig_user_id,
            me=me,
            token=token,
            expires_at=datetime.now(UTC) + timedelta(seconds=expires_in),
            permissions=short.permissions,
        )
        if account_id is None:
            await record_event(
                session,
                source="web",
                level=EventLevel.WARNING,
                kind="instagram_connect_refused",
                message=f"@{username} is connected to another workspace",
                workspace_id=workspace_id,
            )
            return ConnectProblem.ELSEWHERE

    subscribed = await subscribe_webhooks(resources, account_id, ig_user_id, token)
    return Connected(account_id=account_id, username=username, webhooks_subscribed=subscribed)


async def upsert_account(
    session: AsyncSession,
    resources: Resources,
    *,
    workspace_id: int,
    ig_user_id: str,
    me: dict[str, Any],
    token: str,
    expires_at: datetime,
    permissions: tuple[str, ...] | None = None,
) -> int | None:
    """Insert or restore the account; None when another workspace owns it."""
    sealed = InstagramAccount(ig_user_id=ig_user_id)
    seal_access_token(resources.cipher, sealed, token)
    values = {
        "workspace_id": workspace_id,
        "ig_user_id": ig_user_id,
        "app_scoped_id": _short(me.get("id"), 32),
        "username": _short(me.get("username"), 64) or ig_user_id,
        "name": _short(me.get("name"), 255),
        "account_type": _short(me.get("account_type"), 32),
        "token_ciphertext": sealed.token_ciphertext,
        "token_key_id": sealed.token_key_id,
        "token_issued_at": func.now(),
        "token_expires_at": expires_at,
        "status": AccountStatus.ACTIVE,
        "status_reason": None,
        "paused_until": None,
        "webhook_subscribed_at": None,
        "webhook_fields": None,
        "granted_permissions": list(permissions) if permissions is not None else None,
    }
    statement = insert(InstagramAccount).values(**values)
    excluded = statement.excluded
    still_paused = and_(
        InstagramAccount.status == AccountStatus.PAUSED,
        InstagramAccount.paused_until > func.now(),
    )
    statement = statement.on_conflict_do_update(
        index_elements=[InstagramAccount.ig_user_id],
        set_={
            **{name: excluded[name] for name in values if name not in {"workspace_id", "status"}},
            "status": case((still_paused, InstagramAccount.status), else_=excluded.status),
            "status_reason": case((still_paused, InstagramAccount.status_reason), else_=None),
            "paused_until": case((still_paused, InstagramAccount.paused_until), else_=None),
            "updated_at": func.now(),
        },
        # The one check that keeps an account in one workspace, decided by the same statement.
        where=InstagramAccount.workspace_id == excluded.workspace_id,
    )
    return await session.scalar(statement.returning(InstagramAccount.id))


async def subscribe_webhooks(
    resources: Resources, account_id: int, ig_user_id: str, token: str
) -> bool:
    """Subscribe the account's webhooks and record the outcome on the account row."""
    try:
        ok = await resources.graph.subscribe_app(token, ig_user_id, list(WEBHOOK_FIELDS))
        problem = None if ok else "Instagram did not confirm the subscription"
    except GraphError as exc:
        ok, problem = False, str(exc)
    async with resources.sessionmaker() as session, session.begin():
        if ok:
            await session.execute(
                update(InstagramAccount)
                .where(InstagramAccount.id == account_id)
                .values(webhook_subscribed_at=func.now(), webhook_fields=list(WEBHOOK_FIELDS))
            )
        else:
            await record_event(
                session,
                source="web",
                level=EventLevel.WARNING,
                kind="webhook_subscription_failed",
                message=f"webhook subscription for account {account_id} failed: {problem}",
                account_id=account_id,
                workspace_id=await session.scalar(
                    select(InstagramAccount.workspace_id).where(InstagramAccount.id == account_id)
                ),
            )
    return ok


async def disconnect_account(session: AsyncSession, workspace_id: int, account_id: int) -> bool:
    """Wipe the token, mark the account disconnected and pause its campaigns (the caller
    commits). False when there is no such connected account in this workspace."""
    disconnected = await session.scalar(
        update(InstagramAccount)
        .where(
            InstagramAccount.id == account_id,
            InstagramAccount.workspace_id == workspace_id,
            InstagramAccount.status != AccountStatus.DISCONNECTED,
        )
        .values(
            status=AccountStatus.DISCONNECTED,
            status_reason="Disconnected from the dashboard",
            token_ciphertext=None,
            token_key_id=None,
            token_expires_at=None,
            webhook_subscribed_at=None,
            webhook_fields=None,
            updated_at=func.now(),
        )
        .returning(InstagramAccount.id)
    )
    if disconnected is None:
        return False
    await session.execute(
        update(Campaign)
        .where(
            Campaign.account_id == account_id,
            Campaign.workspace_id == workspace_id,
            Campaign.status == CampaignStatus.ACTIVE,
        )
        .values(status=CampaignStatus.PAUSED, updated_at=func.now())
    )
    return True


async def unsubscribe_webhooks(graph: GraphClient, ig_user_id: str, token: str) -> None:
    """Best effort, before the token is wiped: stop Meta sending this account's events."""
    try:
        await graph.request("DELETE", f"{ig_user_id}/subscribed_apps", token=token)
    except GraphError as exc:
        logger.warning("could not unsubscribe webhooks for %s: %s", ig_user_id, exc)


def account_token(resources: Resources, account: InstagramAccount) -> str | None:
    try:
        return open_access_token(resources.cipher, account)
    except MissingTokenError:
        return None


async def _failed(
    resources: Resources, workspace_id: int, detail: str, *, rejected: bool
) -> ConnectProblem:
    async with resources.sessionmaker() as session, session.begin():
        await record_event(
            session,
            source="web",
            level=EventLevel.WARNING,
            kind="instagram_connect_failed",
            message=f"Instagram connect failed: {detail}",
            workspace_id=workspace_id,
        )
    return ConnectProblem.REFUSED if rejected else ConnectProblem.UNAVAILABLE


def _flat(me: dict[str, Any]) -> dict[str, Any]:
    data = me.get("data")
    if isinstance(data, list) and data and isinstance(data[0], dict):
        return data[0]  # the documented wrapper; real answers are flat
    return me


def _short(value: object, limit: int) -> str | None:
    return str(value)[:limit] if value not in (None, "") else None


def _int(value: object) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None
