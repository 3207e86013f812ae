"""Webhook subscription self-check: keep every working account subscribed to its webhooks.

An account that is not subscribed (`POST /{ig-user-id}/subscribed_apps`) silently receives
nothing: the most common silent failure in the field. So, for accounts that can work (active,
or paused by a policy block or the creator), subscribe again with the fields the connect flow
asks for (`connect.WEBHOOK_FIELDS`) when the last confirmed subscription is missing, lacks one
of them, or is more than a day old; record `webhook_subscribed_at` / `webhook_fields` on
success and an operational event on failure (one per account a day while it keeps failing).
Subscribing is idempotent at Meta, so two overlapping checks do no harm.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy import text

from app.accounts.connect import WEBHOOK_FIELDS
from app.accounts.tokens import MissingTokenError, open_access_token
from app.crypto import TokenDecryptError
from app.db.models import EventLevel, InstagramAccount
from app.instagram.graph import GraphError
from app.operations.events import record_event_once
from app.resources import Resources

logger = logging.getLogger("oncereply.subscriptions")

RESUBSCRIBE_AFTER = timedelta(days=1)
FAILURE_NOTICE_EVERY = timedelta(hours=20)

_DUE = text(
    """
SELECT id FROM instagram_accounts
WHERE status IN ('active', 'paused') AND token_ciphertext IS NOT NULL
  AND (CAST(:account_id AS bigint) IS NULL OR id = :account_id)
  AND (CAST(:force AS boolean) OR webhook_subscribed_at IS NULL
       OR webhook_subscribed_at <= now() - make_interval(secs => :after)
       OR NOT (coalesce(webhook_fields, '{}') @> CAST(:fields AS varchar[])))
ORDER BY id
"""
)
_SUBSCRIBED = text(
    """
UPDATE instagram_accounts SET webhook_subscribed_at = now(), webhook_fields = :fields
WHERE id = :id AND status IN ('active', 'paused')
"""
)


@dataclass(slots=True)
class SubscriptionReport:
    subscribed: list[int] = field(default_factory=list)
    failed: dict[int, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"subscribed": self.subscribed, "failed": self.failed}


async def check_subscriptions(
    resources: Resources, *, account_id: int | None = None, force: bool = False
) -> SubscriptionReport:
    """Subscribe the accounts that need it (one account, or all; `force`: even if fresh)."""
    report = SubscriptionReport()
    fields = list(WEBHOOK_FIELDS)
    async with resources.sessionmaker() as session:
        due = (
            await session.scalars(
                _DUE,
                {
                    "account_id": account_id,
                    "force": force,
                    "after": RESUBSCRIBE_AFTER.total_seconds(),
                    "fields": fields,
                },
            )
        ).all()
    for due_id in due:
        problem = await _subscribe(resources, due_id, fields)
        async with resources.sessionmaker() as session, session.begin():
            if problem is None:
                await session.execute(_SUBSCRIBED, {"id": due_id, "fields": fields})
                report.subscribed.append(due_id)
                continue
            report.failed[due_id] = problem
            account = await session.get(InstagramAccount, due_id)
            await record_event_once(
                session,
                dedupe_key=f"account:{due_id}",
                within=FAILURE_NOTICE_EVERY,
                source="worker",
                level=EventLevel.ERROR,
                kind="webhook_subscription_failed",
                message=(
                    f"Instagram webhooks could not be (re)subscribed for "
                    f"@{account.username if account else due_id}, so comments and messages "
                    f"may not arrive: {problem}"
                ),
                workspace_id=account.workspace_id if account else None,
                account_id=due_id,
                details={"fields": fields},
            )
    if report.subscribed or report.failed:
        logger.info("webhook subscriptions: %s", report.as_dict())
    return report


async def _subscribe(resources: Resources, account_id: int, fields: list[str]) -> str | None:
    """None when Meta confirmed the subscription, else what went wrong."""
    async with resources.sessionmaker() as session:
        account = await session.get(InstagramAccount, account_id)
        if account is None:
            return "the account is gone"
        ig_user_id = account.ig_user_id
        try:
            token = open_access_token(resources.cipher, account)
        except (MissingTokenError, TokenDecryptError) as exc:
            return f"no usable token ({exc})"
    try:
        confirmed = await resources.graph.subscribe_app(token, ig_user_id, fields)
    except GraphError as exc:
        return str(exc)[:500]
    return None if confirmed else "Instagram did not confirm the subscription"
