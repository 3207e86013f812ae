"""Building signed webhook bodies the way Meta sends them, and the rows they need to match.

Bodies are serialized like Meta's: non-ASCII as `\\uXXXX` and `/` as `\\/`, so every test that
uses them also proves the signature is checked over the raw bytes, not a re-serialization.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import (
    AccountStatus,
    Campaign,
    CampaignScope,
    CampaignStatus,
    InstagramAccount,
    MatchMode,
    WebhookEvent,
    WebhookStatus,
    Workspace,
)
from app.delivery.intake.outbox import run_ingest
from app.queue.saq_adapter import pending_job_keys, queued_job_keys
from app.resources import Resources

INSTAGRAM_SECRET = "test-instagram-app-secret"
META_SECRET = "test-meta-app-secret"
VERIFY_TOKEN = "test-verify-token"
ACCOUNT = "17841405822304914"
OTHER_ACCOUNT = "17841400000000777"
REEL = "17918195224117851"
OTHER_REEL = "17918195224110000"


def meta_bytes(document: Any) -> bytes:
    return (
        json.dumps(document, ensure_ascii=True, separators=(",", ":")).replace("/", "\\/").encode()
    )


def sign(body: bytes, secret: str = INSTAGRAM_SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def signed_headers(body: bytes, secret: str = INSTAGRAM_SECRET) -> dict[str, str]:
    return {"Content-Type": "application/json", "X-Hub-Signature-256": sign(body, secret)}


def comment_value(
    comment_id: str,
    text: str = "GUIDE please",
    *,
    media_id: str = REEL,
    commenter_id: str = "1254459154682919",
    username: str = "jane_doe",
    parent_id: str | None = None,
    original_media_id: str | None = None,
) -> dict[str, Any]:
    media: dict[str, Any] = {"id": media_id, "media_product_type": "REELS"}
    if original_media_id:
        media["original_media_id"] = original_media_id
    value: dict[str, Any] = {
        "from": {"id": commenter_id, "username": username},
        "media": media,
        "id": comment_id,
        "text": text,
    }
    if parent_id:
        value["parent_id"] = parent_id
    return value


def comments_body(*values: dict[str, Any], account: str = ACCOUNT, flat: bool = False) -> bytes:
    now = int(time.time())
    if flat:
        entries = [{"id": account, "time": now, "field": "comments", "value": v} for v in values]
    else:
        entries = [
            {
                "id": account,
                "time": now,
                "changes": [{"field": "comments", "value": v} for v in values],
            }
        ]
    return meta_bytes({"object": "instagram", "entry": entries})


def messaging_body(*items: dict[str, Any], account: str = ACCOUNT) -> bytes:
    now = int(time.time() * 1000)
    return meta_bytes(
        {"object": "instagram", "entry": [{"id": account, "time": now, "messaging": list(items)}]}
    )


async def seed_account(
    session: AsyncSession,
    ig_user_id: str = ACCOUNT,
    *,
    status: AccountStatus = AccountStatus.ACTIVE,
    username: str = "sunny.bakes",
) -> InstagramAccount:
    workspace = Workspace(name=f"ws {ig_user_id}")
    session.add(workspace)
    await session.flush()
    account = InstagramAccount(
        workspace_id=workspace.id, ig_user_id=ig_user_id, username=username, status=status
    )
    session.add(account)
    await session.flush()
    return account


async def seed_campaign(
    session: AsyncSession,
    account: InstagramAccount,
    *,
    name: str = "Guide",
    scope: CampaignScope = CampaignScope.POST,
    media_id: str | None = REEL,
    keywords: list[str] | None = None,
    excluded: list[str] | None = None,
    mode: MatchMode = MatchMode.WHOLE_WORD,
    status: CampaignStatus = CampaignStatus.ACTIVE,
    priority: int = 0,
    public_replies: list[str] | None = None,
) -> Campaign:
    campaign = Campaign(
        workspace_id=account.workspace_id,
        account_id=account.id,
        name=name,
        status=status,
        scope=scope,
        media_id=media_id if scope is not CampaignScope.ANY_POST else None,
        keywords=keywords if keywords is not None else ["guide"],
        excluded_keywords=excluded or [],
        match_mode=mode,
        dm_text="Here it is: {link}",
        priority=priority,
        activated_at=func.now() - func.make_interval(0, 0, 0, 1),
        public_reply_enabled=bool(public_replies),
        public_replies=public_replies or [],
    )
    session.add(campaign)
    await session.flush()
    return campaign


async def store_event(session: AsyncSession, body: bytes) -> int:
    """A stored outbox row, as the web process writes it."""
    event = WebhookEvent(body=body, signature_key="instagram")
    session.add(event)
    await session.flush()
    return event.id


async def event_ids(session: AsyncSession) -> list[int]:
    return list(
        (await session.execute(select(WebhookEvent.id).order_by(WebhookEvent.id))).scalars()
    )


async def ingest_received(resources: Resources, *, within_s: float = 10.0) -> dict[str, object]:
    """Run ingest over every event still waiting, as the worker's job would: once the web has
    marked them enqueued, as it does just before enqueueing their job (a worker never sees
    the job sooner), so this never races the web's mark for the rows."""
    waiting = [WebhookStatus.RECEIVED, WebhookStatus.ENQUEUED]
    deadline = time.monotonic() + within_s
    while True:
        async with resources.sessionmaker() as session:
            rows = (
                await session.execute(
                    select(WebhookEvent.id, WebhookEvent.status)
                    .where(WebhookEvent.status.in_(waiting))
                    .order_by(WebhookEvent.id)
                )
            ).all()
        if all(status is WebhookStatus.ENQUEUED for _, status in rows):
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"the web did not enqueue its events within {within_s:g} s")
        await asyncio.sleep(0.02)
    ids = [event_id for event_id, _ in rows]
    return await run_ingest(resources, ids) if ids else {}


async def queued_keys(resources: Resources) -> list[str]:
    """Keys of the jobs waiting in the queue, each lane's oldest first (the work lane's first)."""
    return [key for lane in resources.queue.lanes for key in await queued_job_keys(lane)]


async def pending_keys(resources: Resources) -> list[str]:
    """Keys of the jobs queued, running or scheduled in every lane, crons aside."""
    return [key for lane in resources.queue.lanes for key in await pending_job_keys(lane)]
