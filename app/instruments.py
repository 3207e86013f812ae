"""The Prometheus counters and histograms each process keeps for what it does itself.

A counter lives in the process that counts: the web counts the webhook POSTs it stores or
refuses and the dashboard's repeated clicks; a worker counts deliveries, Meta's answers,
send latencies and the duplicates its ingest and delivery jobs absorb. Each process exposes
its own (the web on `/metrics`, a worker on `WORKER_METRICS_PORT`), and Prometheus adds them
up across processes. What describes shared state (queue depth, budget use, backlog) is not
counted here but read at scrape time from PostgreSQL and Redis (`app/metrics.py`).

Label values are a few fixed words (a leg state, a trigger kind, Meta's numeric codes), never
an id or a user's text, so the number of series stays small.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

DELIVERIES = Counter(
    "oncereply_deliveries_total",
    "Delivery legs settled by this process, by the state they reached",
    ["kind", "leg", "state"],
)
META_ANSWERS = Counter(
    "oncereply_meta_answers_total",
    "Answers of Meta's send endpoints: 'ok', or the error's code and subcode",
    ["endpoint", "code", "subcode"],
)
SEND_SECONDS = Histogram(
    "oncereply_send_seconds",
    "Time of one call to Meta's send endpoints, by how it ended",
    ["endpoint", "outcome"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
WEBHOOK_EVENTS = Counter(
    "oncereply_webhook_events_total",
    "Webhook deliveries: received (stored), refused (bad signature or body), duplicate items",
    ["result"],
)
INBOX_CHECKS = Counter(
    "oncereply_inbox_checks_total",
    "Inbox checks of UNCONFIRMED replies, by result (confirmed: found and recorded SENT)",
    ["result"],
)
IDEMPOTENCY_HITS = Counter(
    "oncereply_idempotency_hits_total",
    "Work done once although asked again: duplicate webhooks, blocked sends, repeated clicks",
    ["scope"],
)


def meta_answer(endpoint: str, code: int | None, subcode: int | None) -> None:
    """One answer: a success is code 'ok'; an error without a code (a timeout) is 'none'."""
    if code is None and subcode is None:
        META_ANSWERS.labels(endpoint, "none", "").inc()
    else:
        META_ANSWERS.labels(endpoint, str(code), "" if subcode is None else str(subcode)).inc()


def meta_ok(endpoint: str) -> None:
    META_ANSWERS.labels(endpoint, "ok", "").inc()
