"""The name of every job, as the web, the worker and the services spell it.

A job's name is what SAQ stores in the queue and how the worker finds its function, so it is
written once, here; everything else (services enqueueing work, the registry in
`app.jobs.registry`, tests) uses these members. Renaming a member's value strands the jobs
already queued under the old name.
"""

from __future__ import annotations

from enum import StrEnum


class JobName(StrEnum):
    PURGE_EXPIRED = "purge_expired"
    INGEST_EVENT = "ingest_event"
    OUTBOX_RELAY = "outbox_relay"
    PROCESS_COMMENT = "process_comment"
    PACE_ACCOUNT = "pace_account"
    PROCESS_POSTBACK = "process_postback"
    PROCESS_MESSAGE = "process_message"
    SEND_FOLLOW_UP = "send_follow_up"
    VERIFY_UNCONFIRMED = "verify_unconfirmed"
    SWEEP_STALE_CLAIMS = "sweep_stale_claims"
    RELAY_DUE_WORK = "relay_due_work"
    REFRESH_TOKENS = "refresh_tokens"
    RECONCILE_COMMENTS = "reconcile_comments"
    RECONCILE_ACCOUNT = "reconcile_account"
    BIND_NEXT_POSTS = "bind_next_posts"
    CHECK_WEBHOOK_SUBSCRIPTIONS = "check_webhook_subscriptions"
    RECOUNT_CLICK_DAYS = "recount_click_days"
