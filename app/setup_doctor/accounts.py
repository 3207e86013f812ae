"""The checks of one connected account, made live against Instagram: the token, the
permissions granted at connect, the webhook fields subscribed, what arrived per field, and
whether comments come by webhook or only by the reconciler."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession

from app.accounts.connect import WEBHOOK_FIELDS
from app.accounts.tokens import MissingTokenError, open_access_token
from app.crypto import TokenDecryptError
from app.db.models import InstagramAccount
from app.instagram.graph import GraphApiError, GraphError
from app.instagram.oauth import SCOPES
from app.resources import Resources
from app.setup_doctor.diagnosis import diagnose
from app.setup_doctor.report import AccountReport, Check, FieldSeen, Status
from app.setup_doctor.traffic import Traffic, load_traffic

COMMENTS_PERMISSION = "instagram_business_manage_comments"
PERMISSION_USE = {
    "instagram_business_basic": "see the account and its posts",
    "instagram_business_manage_comments": "receive comments and answer them",
    "instagram_business_manage_messages": "send the DMs and receive messages and button taps",
}
FIELD_USE = {
    "comments": "new comments, the trigger of every campaign",
    "messages": "DMs from fans: DM keyword triggers and the 24-hour window",
    "messaging_postbacks": "taps on the buttons in your DMs (two-step DMs, the follow gate)",
    "messaging_seen": "read receipts shown in the delivery log",
}
EXPIRY_WARNING_DAYS = 3


def ago(moment: datetime | None, now: datetime) -> str | None:
    if moment is None:
        return None
    seconds = max(0, int((now - moment).total_seconds()))
    for size, unit in ((86400, "day"), (3600, "hour"), (60, "minute")):
        if seconds >= size:
            count = seconds // size
            return f"{count} {unit}{'' if count == 1 else 's'} ago"
    return "just now"


async def check_account(
    resources: Resources, session: AsyncSession, account: InstagramAccount
) -> AccountReport:
    report = AccountReport(account_id=account.id, username=account.username)
    now = datetime.now(UTC)
    try:
        token: str | None = open_access_token(resources.cipher, account)
    except (MissingTokenError, TokenDecryptError):
        token = None
    report.checks.append(await _token(resources, account, token, now))
    permissions = _permissions(account.granted_permissions)
    report.checks.append(permissions)
    subscription, subscribed = await _subscription(resources, session, account, token)
    report.checks.append(subscription)
    report.can_resubscribe = subscription.failed and token is not None
    traffic = await load_traffic(session, account.id)
    report.webhooks_seen = [
        FieldSeen(field, FIELD_USE[field], ago(traffic.last_by_field.get(field), now))
        for field in WEBHOOK_FIELDS
    ]
    granted = account.granted_permissions
    report.checks.append(
        diagnose(
            traffic,
            comments_subscribed=None if subscribed is None else "comments" in subscribed,
            comments_permission=None if granted is None else COMMENTS_PERMISSION in granted,
        )
    )
    return report


def quick_checks(account: InstagramAccount, traffic: Traffic) -> list[Check]:
    """The checks that need no call to Instagram: the recorded permissions and fields."""
    checks = [_permissions(account.granted_permissions)]
    recorded = account.webhook_fields
    if recorded is not None and not set(WEBHOOK_FIELDS) <= set(recorded):
        checks.append(_missing_fields([f for f in WEBHOOK_FIELDS if f not in recorded]))
    granted = account.granted_permissions
    checks.append(
        diagnose(
            traffic,
            comments_subscribed=None if recorded is None else "comments" in recorded,
            comments_permission=None if granted is None else COMMENTS_PERMISSION in granted,
        )
    )
    return checks


async def _token(
    resources: Resources, account: InstagramAccount, token: str | None, now: datetime
) -> Check:
    title = "Access token"
    if token is None:
        return Check(
            "token",
            title,
            Status.FAIL,
            "OnceReply holds no usable token for this account, so it can neither read comments "
            "nor send.",
            "Reconnect the account on the Accounts page.",
        )
    expires = account.token_expires_at
    until = f" It expires {expires:%d %b %Y} and renews by itself." if expires else ""
    try:
        await resources.graph.get_me(token)
    except GraphApiError as exc:
        if exc.code == 190:
            return Check(
                "token",
                title,
                Status.FAIL,
                "Instagram no longer accepts this account's token (a changed password, the app "
                "removed in Instagram's settings, or an expiry).",
                "Reconnect the account on the Accounts page.",
                f"Graph API error {exc.code}/{exc.subcode}: {exc.message}"[:300],
            )
        return Check(
            "token", title, Status.WARN, "Instagram refused to check the token.", "", str(exc)[:300]
        )
    except GraphError as exc:
        return Check(
            "token",
            title,
            Status.WARN,
            "Instagram did not answer, so the token could not be checked. Try again in a minute.",
            "",
            str(exc)[:300],
        )
    if expires is not None and (expires - now).days < EXPIRY_WARNING_DAYS:
        return Check(
            "token",
            title,
            Status.WARN,
            f"The token works but expires {expires:%d %b %Y %H:%M} UTC and was not renewed.",
            "Reconnect the account to get a new 60-day token.",
        )
    return Check("token", title, Status.OK, f"Instagram accepts the token.{until}")


def _permissions(granted: list[str] | None) -> Check:
    title = "Permissions"
    if granted is None:
        return Check(
            "permissions",
            title,
            Status.INFO,
            "Instagram did not say which permissions were granted when this account was connected.",
            "Reconnect it once (Accounts → Reconnect) to let OnceReply check them.",
        )
    missing = [p for p in SCOPES if p not in granted]
    if not missing:
        return Check(
            "permissions", title, Status.OK, "All three permissions OnceReply needs are granted."
        )
    lost = "; ".join(f"{p} (to {PERMISSION_USE[p]})" for p in missing)
    return Check(
        "permissions",
        title,
        Status.FAIL,
        f"Not granted: {lost}.",
        "Reconnect the account on the Accounts page and leave every permission ticked on "
        "Instagram's screen.",
    )


async def _subscription(
    resources: Resources, session: AsyncSession, account: InstagramAccount, token: str | None
) -> tuple[Check, list[str] | None]:
    title = "Webhook fields subscribed"
    if token is None:
        return (
            Check("subscription", title, Status.WARN, "Cannot be checked without a token."),
            None,
        )
    try:
        fields = await resources.graph.subscribed_fields(token, account.ig_user_id)
    except GraphError as exc:
        return (
            Check(
                "subscription",
                title,
                Status.WARN,
                "Instagram did not say which fields are subscribed.",
                "Try again in a minute.",
                str(exc)[:300],
            ),
            None,
        )
    # Record what Instagram reported: the hourly subscription check re-subscribes an account
    # whose recorded fields lack one, so a field dropped elsewhere comes back by itself too.
    await session.execute(
        update(InstagramAccount)
        .where(InstagramAccount.id == account.id)
        .values(webhook_fields=fields or None)
    )
    await session.commit()
    missing = [f for f in WEBHOOK_FIELDS if f not in fields]
    if not missing:
        return (
            Check("subscription", title, Status.OK, f"Subscribed: {', '.join(fields)}."),
            fields,
        )
    return _missing_fields(missing), fields


def _missing_fields(missing: list[str]) -> Check:
    lost = "; ".join(f"{f} ({FIELD_USE[f]})" for f in missing)
    return Check(
        "subscription",
        "Webhook fields subscribed",
        Status.FAIL,
        f"Not subscribed, so Instagram sends nothing for: {lost}.",
        "Press Re-subscribe. If it comes back, tick the same fields on the Webhooks page of "
        "Meta's App Dashboard: fields are chosen there for the whole app.",
    )
