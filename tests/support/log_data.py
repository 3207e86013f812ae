"""Seeding the delivery log for dashboard tests: creators signed in through the real app,
and rows written the way the engine writes them (ledger entries, `dm_logs`, attempts).

    creator = await new_creator(client, resources, "sunny@example.com")
    row = await add_log(resources, creator, state=LegState.FAILED, username="jane.doe")
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from itertools import count
from typing import Any

from litestar.testing import AsyncTestClient
from sqlalchemy import select

from app.asgi import create_app
from app.auth.passwords import hash_password
from app.db.models import (
    AttemptClass,
    Campaign,
    CampaignScope,
    CampaignStatus,
    Comment,
    CommentOutcome,
    DeliveryAttempt,
    DmLog,
    Leg,
    LegState,
    MissReason,
    Role,
    SeenVia,
    TriggerKind,
    User,
    WorkspaceMember,
)
from app.resources import Resources
from app.settings import Settings
from tests.support.dashboard import (
    NORTH,
    PASSWORD,
    SUNNY,
    add_account,
    csrf_token,
    identity_of,
    sign_up,
)

_ids = count(1)
CREATORS = {
    "sunny": ("sunny@example.com", SUNNY, "sunny.bakes"),
    "north": ("north@example.com", NORTH, "north.trails"),
}


@dataclass
class Creator:
    """A signed-up creator (the client holds their session) with one account and campaign."""

    client: Any
    user_id: int
    workspace_id: int
    account_id: int
    campaign_id: int


async def new_creator(
    client: Any,
    resources: Resources,
    email: str,
    *,
    ig_user_id: str = SUNNY,
    username: str = "sunny.bakes",
) -> Creator:
    await sign_up(client, email, workspace=f"{username}'s workspace")
    user_id, workspace_id = await identity_of(resources, email)
    account_id = await add_account(
        resources, workspace_id, ig_user_id=ig_user_id, username=username
    )
    campaign_id = await add_campaign(resources, workspace_id, account_id, "Lemon loaf")
    return Creator(client, user_id, workspace_id, account_id, campaign_id)


@asynccontextmanager
async def signed_in_creator(
    settings: Settings, resources: Resources, who: str = "sunny"
) -> AsyncIterator[Creator]:
    """A creator signed up through a fresh in-process app: "sunny" owns @sunny.bakes, "north"
    (another workspace) owns @north.trails."""
    email, ig_user_id, username = CREATORS[who]
    async with AsyncTestClient(create_app(settings)) as client:
        yield await new_creator(client, resources, email, ig_user_id=ig_user_id, username=username)


async def other_workspace(settings: Settings, resources: Resources) -> Creator:
    """Another workspace with its rows' account and campaign (its client is closed)."""
    async with signed_in_creator(settings, resources, "north") as creator:
        return creator


@cache
def password_hash() -> str:
    """One argon2 hash of `PASSWORD` for every user seeded here: each hash is half a second of
    CPU on purpose, and a salt shared by test users proves nothing less (sign-up through the
    app, as `new_creator` does, still hashes each time)."""
    return hash_password(PASSWORD)


async def add_member(resources: Resources, workspace_id: int, email: str) -> None:
    """A user with the member role in `workspace_id` (password `PASSWORD`)."""
    async with resources.sessionmaker() as session, session.begin():
        user = User(email=email, password_hash=password_hash())
        session.add(user)
        await session.flush()
        session.add(WorkspaceMember(workspace_id=workspace_id, user_id=user.id, role=Role.MEMBER))


@asynccontextmanager
async def signed_in_as(settings: Settings, email: str) -> AsyncIterator[AsyncTestClient]:  # type: ignore[type-arg]
    """A fresh in-process app's client, signed in through the login form as `email` (a user
    with the password `PASSWORD`, such as one `add_member` made)."""
    async with AsyncTestClient(create_app(settings)) as client:
        page = await client.get("/login")
        signed_in = await client.post(
            "/login",
            data={"_csrf_token": csrf_token(page.text), "email": email, "password": PASSWORD},
            follow_redirects=False,
        )
        assert signed_in.status_code == 303, signed_in.text
        yield client


async def add_campaign(
    resources: Resources, workspace_id: int, account_id: int, name: str, **values: Any
) -> int:
    async with resources.sessionmaker() as session, session.begin():
        campaign = Campaign(
            workspace_id=workspace_id,
            account_id=account_id,
            name=name,
            status=values.pop("status", CampaignStatus.ACTIVE),
            scope=values.pop("scope", CampaignScope.ANY_POST),
            keywords=values.pop("keywords", ["recipe"]),
            dm_text=values.pop("dm_text", "Hi {username}!"),
            **values,
        )
        session.add(campaign)
        await session.flush()
        return campaign.id


def log_values(
    creator: Creator,
    *,
    state: LegState = LegState.SENT,
    username: str | None = "jane.doe",
    text: str = "RECIPE please",
    created_at: datetime | None = None,
    **values: Any,
) -> dict[str, Any]:
    """The columns of one comment delivery (an unused comment id each time)."""
    created = created_at or datetime.now(UTC)
    return {
        "workspace_id": creator.workspace_id,
        "account_id": values.pop("account_id", creator.account_id),
        "campaign_id": values.pop("campaign_id", creator.campaign_id),
        "campaign_version": 1,
        "trigger_kind": values.pop("trigger_kind", TriggerKind.COMMENT),
        "trigger_id": values.pop("trigger_id", f"1790{next(_ids):012d}"),
        "recipient_id": values.pop("recipient_id", "1254459154682919"),
        "recipient_username": username,
        "trigger_text": text,
        "matched_keyword": "recipe",
        "media_id": "17918195224117851",
        "deadline_at": values.pop("deadline_at", created + timedelta(days=7)),
        "pr_state": state,
        "pr_attempts": values.pop("pr_attempts", 0 if state is LegState.PENDING else 1),
        "created_at": created,
        "updated_at": created,
        **values,
    }


async def add_log(resources: Resources, creator: Creator, **options: Any) -> int:
    async with resources.sessionmaker() as session, session.begin():
        row = DmLog(**log_values(creator, **options))
        session.add(row)
        await session.flush()
        return row.id


async def add_logs(resources: Resources, rows: list[dict[str, Any]]) -> list[int]:
    async with resources.sessionmaker() as session, session.begin():
        models = [DmLog(**values) for values in rows]
        session.add_all(models)
        await session.flush()
        return [model.id for model in models]


async def add_comment(
    resources: Resources,
    account_id: int,
    *,
    text: str = "RECIPE please",
    username: str = "jane.doe",
    missed: MissReason | None = None,
    decision: dict[str, Any] | None = None,
    via: SeenVia = SeenVia.WEBHOOK,
    created_at: datetime | None = None,
    campaign_id: int | None = None,
) -> int:
    """A ledger entry: matched (the default) or missed for `missed`."""
    created = created_at or datetime.now(UTC)
    async with resources.sessionmaker() as session, session.begin():
        comment = Comment(
            account_id=account_id,
            comment_id=f"1780{next(_ids):012d}",
            media_id="17918195224117851",
            text=text,
            commenter_id="1254459154682919",
            commenter_username=username,
            commented_at=created - timedelta(seconds=2),
            first_seen_via=via,
            outcome=CommentOutcome.MISSED if missed else CommentOutcome.MATCHED,
            miss_reason=missed,
            campaign_id=campaign_id,
            decision=decision,
            created_at=created,
        )
        session.add(comment)
        await session.flush()
        return comment.id


async def add_attempt(resources: Resources, dm_log_id: int, **values: Any) -> None:
    async with resources.sessionmaker() as session, session.begin():
        session.add(
            DeliveryAttempt(
                dm_log_id=dm_log_id,
                leg=values.pop("leg", Leg.PRIVATE_REPLY),
                attempt_no=values.pop("attempt_no", 1),
                request_kind=values.pop("request_kind", "template"),
                worker_id="worker-test",
                classification=values.pop("classification", AttemptClass.SENT),
                **values,
            )
        )


async def log_row(resources: Resources, dm_log_id: int) -> DmLog:
    async with resources.sessionmaker() as session:
        return (await session.execute(select(DmLog).where(DmLog.id == dm_log_id))).scalar_one()


def wait_past_activation(database_url: str) -> None:
    """Wait (polling the database clock) until the second after the newest activation.

    Instagram stamps comments in whole seconds, and matching treats a comment stamped before
    a campaign's `activated_at` as older than the campaign; a browser test that comments
    within the activation's own second would see it missed (`before_activation`).
    """
    import psycopg

    from tests.support.processes import wait_until

    def passed() -> bool:
        with psycopg.connect(database_url) as conn:
            row = conn.execute(
                "SELECT now() >= date_trunc('second', max(activated_at)) + interval '1 second'"
                " FROM campaigns"
            ).fetchone()
        return bool(row and row[0])

    # About a second of the clock; the bound is for a loaded machine's slow connections.
    wait_until(passed, timeout=30, interval=0.05, what="the activation's second to pass")
