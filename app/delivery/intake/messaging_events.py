"""Messaging webhook items into the ledger: one `messaging_events` row each.

Messages (story replies and story mentions among them), taps (postbacks), reactions, reads,
edits and echoes all get a ledger row keyed by
what identifies the item (`dedupe_key`: Meta's message id where there is one), so a
redelivered webhook adds nothing. The row notes whether the item (re)opens the person's
24-hour messaging window and, for an item that makes no work, why (an echo, our own message,
a deleted or unsupported message, not a trigger). Taps, DM keyword triggers, story replies and
story mentions among them are handed to `triggers`, which turns them into work.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from app.campaigns.rules import AccountRules
from app.db.models import MessagingMissReason
from app.db.raw import Db
from app.delivery.intake import triggers
from app.delivery.intake.bulk import BulkInsert
from app.instagram.webhook_payload import MessagingItem, MessagingKind

_INSERT_MESSAGING = BulkInsert(
    "messaging_events",
    (
        ("account_id", "bigint"),
        ("webhook_event_id", "bigint"),
        ("kind", "varchar"),
        ("dedupe_key", "varchar"),
        ("user_id", "varchar"),
        ("mid", "varchar"),
        ("text", "text"),
        ("payload", "text"),
        ("occurred_at", "timestamptz"),
        ("opens_window", "boolean"),
        ("miss_reason", "varchar"),
        ("details", "jsonb"),
    ),
    conflict="account_id, dedupe_key",
    returning="account_id, dedupe_key",
)
# Kinds of inbound messaging that (re)open a person's 24-hour window.
_WINDOW_KINDS = frozenset(
    {MessagingKind.MESSAGE, MessagingKind.POSTBACK, MessagingKind.REACTION, MessagingKind.REFERRAL}
)


async def record_messaging(
    db: Db,
    items: Sequence[tuple[MessagingItem, int]],
    accounts: dict[str, AccountRules],
    work: triggers.MessagingWork,
    duplicates: Counter[str] | None = None,
) -> dict[int | None, Counter[str]]:
    """Messaging ledger rows, and the taps and DM triggers among them added to `work`; counts
    per event (unknown account ids under the key None), and items already in the ledger (or
    twice in the batch) per account's Instagram id in `duplicates`."""
    duplicates = Counter() if duplicates is None else duplicates
    counts: dict[int | None, Counter[str]] = defaultdict(Counter)
    rows: dict[tuple[int, str], dict[str, Any]] = {}
    outcomes: list[tuple[tuple[int, str], int, str, str]] = []
    campaigns = await triggers.load_tap_campaigns(db, [item for item, _ in items])
    for item, event_id in items:
        account = accounts.get(item.account_ig_id)
        if account is None:
            counts[None][item.account_ig_id] += 1
            counts[event_id]["unknown_account"] += 1
            continue
        key = (account.account_id, _dedupe_key(item))
        if key in rows:
            counts[event_id]["duplicate"] += 1
            duplicates[item.account_ig_id] += 1
            continue
        reason = _messaging_miss(item)
        details = dict(item.extra)
        if reason is None:
            reason, noted = triggers.classify(item, account, campaigns, work)
            details |= noted
        outcomes.append((key, event_id, f"{item.kind}:{reason or 'work'}", item.account_ig_id))
        rows[key] = {
            "account_id": account.account_id,
            "webhook_event_id": event_id,
            "kind": item.kind.value,
            "dedupe_key": key[1],
            "user_id": item.user_id,
            "mid": item.mid,
            "text": item.text,
            "payload": item.payload,
            "occurred_at": item.occurred_at,
            "opens_window": _opens_window(item),
            "miss_reason": reason.value if reason else None,
            "details": details or None,
        }
    if not rows:
        return counts
    # Sorted by the unique key: concurrent batches then take row locks in one order.
    ordered = [rows[key] for key in sorted(rows)]
    new = set(await _INSERT_MESSAGING.execute(db, ordered))
    for key, event_id, outcome, ig_id in outcomes:
        counts[event_id][outcome if key in new else "duplicate"] += 1
        if key not in new:
            duplicates[ig_id] += 1
    return counts


def _messaging_miss(item: MessagingItem) -> MessagingMissReason | None:
    if item.kind is MessagingKind.ECHO:
        return MessagingMissReason.ECHO
    if item.is_self:
        return MessagingMissReason.SELF
    if item.kind is MessagingKind.MESSAGE:
        if item.is_deleted:
            return MessagingMissReason.DELETED
        if item.is_unsupported:
            return MessagingMissReason.UNSUPPORTED
        # A story mention carries no text, and a story reply may be a photo or a sticker: the
        # mention or the reply itself is the trigger.
        if item.story is not None:
            return None
        return None if item.text else MessagingMissReason.NO_TEXT
    if item.kind is MessagingKind.POSTBACK:
        return None
    return MessagingMissReason.NOT_A_TRIGGER


def _opens_window(item: MessagingItem) -> bool:
    if item.kind is MessagingKind.ECHO or item.is_self or item.is_deleted:
        return False
    return item.kind in _WINDOW_KINDS


def _dedupe_key(item: MessagingItem) -> str:
    millis = int(item.occurred_at.timestamp() * 1000)
    person = item.user_id or "-"
    kind = item.kind
    if kind is MessagingKind.MESSAGE:
        key = f"message:{item.mid}" if item.mid else f"message:{person}:{millis}"
    elif kind is MessagingKind.ECHO:
        key = f"echo:{item.mid}" if item.mid else f"echo:{person}:{millis}"
    elif kind is MessagingKind.POSTBACK:
        key = f"postback:{person}:{item.mid or f'{item.payload}:{millis}'}"
    elif kind is MessagingKind.REACTION:
        key = f"reaction:{person}:{item.mid}:{item.extra.get('action')}:{item.payload}"
    elif kind is MessagingKind.READ:
        key = f"read:{person}:{item.mid or millis}"
    elif kind is MessagingKind.EDIT:
        key = f"edit:{item.mid}:{item.extra.get('num_edit', millis)}"
    else:
        key = f"{kind}:{person}:{millis}"
    return key[:400]
