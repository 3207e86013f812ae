"""Inbound messaging items that become deliveries: button taps, DM keyword triggers, story
replies and story mentions.

Part of ingest (same transaction, same batch). For each inbound item that is not a miss by
its nature (echo, deleted, unsupported, self, no text), `classify` (called as
`messaging_events` records the item) decides:

- a tap (`postback`) on a payload we issued (`app.delivery.content.postbacks`) naming a campaign of
  this account → a tap to claim; any other payload → `unknown_payload`, a ledger record only;
- a reply to one of the account's stories that a story-reply campaign answers
  (`app.campaigns.story_matching`) → a `story_reply` row; when none does, it is a DM like any
  other (below);
- a story that mentions the account, with a story-mention campaign → a `story_mention` row;
  none → `no_match`;
- a DM whose text fires a campaign's DM keyword trigger (`app.campaigns.dm_matching`) → a
  `message` row; no campaign → `no_match`.

`write` then makes the work durable before anything is sent:

- taps: ONE statement inserts each tap's `postback_deliveries` key — hash(account, campaign,
  person, postback mid), `ON CONFLICT DO NOTHING`: Meta redelivering a tap finds the key taken,
  which is "already handled" — and, for the keys it inserted, the `dm_logs` row of what will
  be sent (trigger `postback:<key>`, the payload, `source_log_id` = the opening DM or follow
  prompt whose button was tapped, the username it carried, deadline = tap + 24 h);
- DMs, story replies and story mentions: `dm_logs` rows with trigger `dm:<mid>`,
  `story:<mid>` or `mention:<mid>` (`ON CONFLICT DO NOTHING`), deadline = message time + 24 h
  (each opens the person's 24-hour window): the same message redelivered adds nothing. No
  private-reply budget is used: these are DMs to the person's IGSID.

What each row then sends (the link or the follow prompt) is decided by the DM flow.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.campaigns.dm_matching import DmMatch, choose_dm_campaign
from app.campaigns.rules import AccountRules
from app.campaigns.story_matching import (
    StoryMatch,
    StoryMiss,
    choose_story_mention_campaign,
    choose_story_reply_campaign,
    story_mention_miss,
    story_reply_miss,
)
from app.db.models import AccountStatus, LegState, MessagingMissReason, TriggerKind
from app.db.raw import Db, fetch_tuples
from app.delivery.content.follow_ups import MESSAGING_WINDOW
from app.delivery.content.postbacks import parse_payload, postback_key
from app.delivery.intake.bulk import INSERT_DM_LOGS, BulkInsert, columns_of, unnest_arrays
from app.instagram.webhook_payload import MessagingItem, MessagingKind, StoryAction

_MAX_TRIGGER_ID = 255


@dataclass(frozen=True, slots=True)
class TapCampaign:
    """What a tap needs of the campaign its payload names (whatever the campaign's status:
    a tap for a paused campaign becomes a row that says so)."""

    id: int
    account_id: int
    workspace_id: int
    version: int


_TAP_CAMPAIGNS = (
    "SELECT id, account_id, workspace_id, version FROM campaigns "
    "WHERE id = ANY(CAST(%(ids)s AS bigint[]))"
)


async def load_tap_campaigns(db: Db, items: Collection[MessagingItem]) -> dict[int, TapCampaign]:
    """The campaigns the batch's tap payloads name (one query; none without taps)."""
    ids = {
        tap.campaign_id
        for item in items
        if item.kind is MessagingKind.POSTBACK and (tap := parse_payload(item.payload))
    }
    if not ids:
        return {}
    rows = await fetch_tuples(db, _TAP_CAMPAIGNS, {"ids": sorted(ids)})
    return {row[0]: TapCampaign(*row) for row in rows}


@dataclass(slots=True)
class MessagingWork:
    """The taps and DM triggers of a batch, as rows for `write`."""

    taps: list[dict[str, Any]] = field(default_factory=list)
    dms: list[dict[str, Any]] = field(default_factory=list)


def classify(
    item: MessagingItem,
    account: AccountRules,
    campaigns: Mapping[int, TapCampaign],
    work: MessagingWork,
) -> tuple[MessagingMissReason | None, dict[str, Any]]:
    """An inbound item that may be work: the ledger's miss reason (None when it became work,
    added to `work`) and what to note in the ledger row's details."""
    if account.status is AccountStatus.DISCONNECTED:
        return MessagingMissReason.ACCOUNT_INACTIVE, {}
    if not item.user_id:
        return MessagingMissReason.NOT_A_TRIGGER, {}
    if item.kind is MessagingKind.POSTBACK:
        return _tap(item, account, campaigns, work)
    if item.kind is MessagingKind.MESSAGE:
        if item.story is not None and item.story.action is StoryAction.MENTION:
            return _story_mention(item, account, work)
        if item.story is not None and item.story.action is StoryAction.REPLY:
            answered = _story_reply(item, account, work)
            if answered is not None:
                return answered
            reason, noted = _dm(item, account, work)
            if reason is not None:
                # Neither a story campaign nor a DM keyword: the ledger says why no story
                # campaign answered (the misses view shows it).
                noted = noted | {"story_miss": _story_reply_miss(item, account).value}
            return reason, noted
        return _dm(item, account, work)
    return MessagingMissReason.NOT_A_TRIGGER, {}


def _tap(
    item: MessagingItem,
    account: AccountRules,
    campaigns: Mapping[int, TapCampaign],
    work: MessagingWork,
) -> tuple[MessagingMissReason | None, dict[str, Any]]:
    tap = parse_payload(item.payload)
    campaign = campaigns.get(tap.campaign_id) if tap else None
    if tap is None or campaign is None or campaign.account_id != account.account_id:
        return MessagingMissReason.UNKNOWN_PAYLOAD, {}
    person = item.user_id or ""
    mid = item.mid or f"{item.payload}:{int(item.occurred_at.timestamp() * 1000)}"
    work.taps.append(
        {
            "key": postback_key(account.account_id, campaign.id, person, mid),
            "account_id": account.account_id,
            "workspace_id": campaign.workspace_id,
            "campaign_id": campaign.id,
            "campaign_version": campaign.version,
            "recipient_id": person,
            "mid": item.mid,
            "payload": tap.payload,
            "title": item.text,
            "deadline_at": item.occurred_at + MESSAGING_WINDOW,
        }
    )
    return None, {"campaign_id": campaign.id}


def _dm(
    item: MessagingItem, account: AccountRules, work: MessagingWork
) -> tuple[MessagingMissReason | None, dict[str, Any]]:
    match = choose_dm_campaign(account.rules, item.text or "", sent_at=item.occurred_at)
    if match is None:
        return MessagingMissReason.NO_MATCH, {}
    _add_message_row(item, account, work, TriggerKind.MESSAGE, match, media_id=None)
    return None, _noted(match)


def _story_reply(
    item: MessagingItem, account: AccountRules, work: MessagingWork
) -> tuple[MessagingMissReason | None, dict[str, Any]] | None:
    """A story-reply campaign's row, or None when no such campaign answers it."""
    story_id = item.story.story_id if item.story else None
    match = choose_story_reply_campaign(
        account.story_rules, story_id=story_id, text=item.text or "", sent_at=item.occurred_at
    )
    if match is None:
        return None
    _add_message_row(item, account, work, TriggerKind.STORY_REPLY, match, media_id=story_id)
    return None, _noted(match)


def _noted(match: DmMatch | StoryMatch) -> dict[str, Any]:
    """What the ledger row's details say about a keyword match."""
    noted: dict[str, Any] = {"campaign_id": match.campaign.id, "keyword": match.keyword}
    if match.read_as_digits is not None:
        # A number code read from look-alike letters: the word as the person typed it.
        noted["read_as_digits"] = match.read_as_digits
    return noted


def _story_reply_miss(item: MessagingItem, account: AccountRules) -> StoryMiss:
    return story_reply_miss(
        account.story_rules,
        story_id=item.story.story_id if item.story else None,
        text=item.text or "",
        sent_at=item.occurred_at,
    )


def _story_mention(
    item: MessagingItem, account: AccountRules, work: MessagingWork
) -> tuple[MessagingMissReason | None, dict[str, Any]]:
    match = choose_story_mention_campaign(account.story_rules, sent_at=item.occurred_at)
    if match is None:
        why = story_mention_miss(account.story_rules, sent_at=item.occurred_at)
        return MessagingMissReason.NO_MATCH, {"story_miss": why.value}
    _add_message_row(item, account, work, TriggerKind.STORY_MENTION, match, media_id=None)
    return None, {"campaign_id": match.campaign.id}


def _add_message_row(
    item: MessagingItem,
    account: AccountRules,
    work: MessagingWork,
    kind: TriggerKind,
    match: DmMatch | StoryMatch,
    *,
    media_id: str | None,
) -> None:
    campaign = match.campaign
    work.dms.append(
        {
            "workspace_id": campaign.workspace_id,
            "account_id": account.account_id,
            "campaign_id": campaign.id,
            "campaign_version": campaign.version,
            "trigger_kind": kind.value,
            "trigger_id": _trigger_id(_PREFIXES[kind], item),
            "comment_row_id": None,
            "media_id": media_id,
            "recipient_id": item.user_id,
            "recipient_username": None,
            "trigger_text": item.text,
            "matched_keyword": match.keyword,
            "deadline_at": item.occurred_at + MESSAGING_WINDOW,
            "pr_state": LegState.PENDING.value,
            "pub_state": None,
        }
    )


# The `trigger_id` prefix of each kind of row made from a message.
_PREFIXES = {
    TriggerKind.MESSAGE: "dm",
    TriggerKind.STORY_REPLY: "story",
    TriggerKind.STORY_MENTION: "mention",
}


def _trigger_id(prefix: str, item: MessagingItem) -> str:
    millis = int(item.occurred_at.timestamp() * 1000)
    trigger = f"{prefix}:{item.mid}" if item.mid else f"{prefix}:{item.user_id}:{millis}"
    if len(trigger) > _MAX_TRIGGER_ID:
        trigger = f"{prefix}:#" + hashlib.sha256(trigger.encode()).hexdigest()
    return trigger


# --- writing ----------------------------------------------------------------------------------

_TAP_COLUMNS = (
    ("key", "varchar"),
    ("account_id", "bigint"),
    ("workspace_id", "bigint"),
    ("campaign_id", "bigint"),
    ("campaign_version", "integer"),
    ("recipient_id", "varchar"),
    ("mid", "varchar"),
    ("payload", "varchar"),
    ("title", "text"),
    ("deadline_at", "timestamptz"),
)
# The tap claim and its log row in one statement. The log row's id is taken from the sequence
# up front so the claim can point at it; the foreign key is checked at the end of the
# statement, when the row exists. The tapped message is the person's latest opening DM or
# follow prompt from this campaign.
_INSERT_TAPS = f"""
WITH src AS (
    SELECT * FROM {unnest_arrays(_TAP_COLUMNS)}
        AS s(key, account_id, workspace_id, campaign_id, campaign_version, recipient_id, mid,
             payload, title, deadline_at)
),
alloc AS (
    SELECT s.*, nextval(pg_get_serial_sequence('dm_logs', 'id')) AS log_id,
           tapped.id AS source_id, tapped.recipient_username AS username
    FROM src s
    LEFT JOIN LATERAL (
        SELECT d.id, d.recipient_username FROM dm_logs d
        WHERE d.account_id = s.account_id AND d.campaign_id = s.campaign_id
          AND d.recipient_id = s.recipient_id
          AND d.message_kind IN ('opening_dm', 'follow_prompt')
        ORDER BY d.id DESC LIMIT 1
    ) tapped ON true
),
claimed AS (
    INSERT INTO postback_deliveries (id, account_id, campaign_id, recipient_id, postback_mid,
                                     dm_log_id)
    SELECT key, account_id, campaign_id, recipient_id, mid, log_id FROM alloc
    ON CONFLICT (id) DO NOTHING
    RETURNING id
)
INSERT INTO dm_logs (id, workspace_id, account_id, campaign_id, campaign_version, trigger_kind,
                     trigger_id, trigger_payload, source_log_id, recipient_id,
                     recipient_username, trigger_text, deadline_at)
SELECT a.log_id, a.workspace_id, a.account_id, a.campaign_id, a.campaign_version, 'postback',
       'postback:' || a.key, a.payload, a.source_id, a.recipient_id, a.username, a.title,
       a.deadline_at
FROM alloc a JOIN claimed c ON c.id = a.key
ORDER BY a.key
RETURNING id
"""  # noqa: S608 - composed from constants; every value is a bound array parameter


# The same insert as a comment's, giving back each new row's kind (DM, story reply, mention).
_INSERT_MESSAGE_LOGS = BulkInsert(
    INSERT_DM_LOGS.table,
    INSERT_DM_LOGS.columns,
    conflict=INSERT_DM_LOGS.conflict,
    returning="id, trigger_kind",
)


async def write(db: Db, work: MessagingWork) -> list[tuple[int, TriggerKind]]:
    """Make the batch's taps and DM triggers durable; the new `dm_logs` rows and their kinds
    (each owed one delivery job once the transaction commits)."""
    created: list[tuple[int, TriggerKind]] = []
    if work.taps:
        taps = _unique(work.taps, "key")
        rows = await fetch_tuples(db, _INSERT_TAPS, columns_of(_TAP_COLUMNS, taps))
        created += [(row[0], TriggerKind.POSTBACK) for row in rows]
    if work.dms:
        dms = _unique(work.dms, "account_id", "trigger_id")
        rows = await _INSERT_MESSAGE_LOGS.execute(db, dms)
        created += [(row[0], TriggerKind(row[1])) for row in rows]
    return created


def _unique(rows: Sequence[dict[str, Any]], *key: str) -> list[dict[str, Any]]:
    """One row per key, sorted by it: concurrent batches then take locks in one order."""
    by_key = {tuple(row[name] for name in key): row for row in rows}
    return [by_key[k] for k in sorted(by_key)]
